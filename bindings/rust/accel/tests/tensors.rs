//! Tensors: copies in and out of slices, accessors, and zero-copy DLPack both ways.
use accel::{sys, DType, DlpackTensor, Tensor};

#[test]
fn slices_round_trip_for_every_element_type() {
    let floats = Tensor::from_slice(&[1.5f32, -2.0, 3.25, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    assert_eq!(floats.to_vec::<f32>().unwrap(), [1.5, -2.0, 3.25, 4.0, 5.0, 6.0]);
    assert_eq!((floats.ndim(), floats.shape(), floats.numel()), (2, vec![2, 3], 6));
    assert_eq!((floats.dtype(), floats.element_size(), floats.device()), (Some(DType::Float32), 4, "cpu".to_string()));

    assert_eq!(Tensor::from_slice(&[1.0f64, 2.0], &[2]).unwrap().to_vec::<f64>().unwrap(), [1.0, 2.0]);
    assert_eq!(Tensor::from_slice(&[-1i8, 2], &[2]).unwrap().to_vec::<i8>().unwrap(), [-1, 2]);
    assert_eq!(Tensor::from_slice(&[-300i16, 2], &[2]).unwrap().to_vec::<i16>().unwrap(), [-300, 2]);
    assert_eq!(Tensor::from_slice(&[i32::MIN, 7], &[2]).unwrap().to_vec::<i32>().unwrap(), [i32::MIN, 7]);
    assert_eq!(Tensor::from_slice(&[i64::MAX], &[1]).unwrap().to_vec::<i64>().unwrap(), [i64::MAX]);
    assert_eq!(Tensor::from_slice(&[255u8, 0], &[2]).unwrap().to_vec::<u8>().unwrap(), [255, 0]);
    let flags = Tensor::from_slice(&[true, false, true], &[3]).unwrap();
    assert_eq!((flags.dtype(), flags.to_vec::<bool>().unwrap()), (Some(DType::Bool), vec![true, false, true]));
}

#[test]
fn scalars_and_empty_tensors() {
    let scalar = Tensor::from_slice(&[42i64], &[]).unwrap();
    assert_eq!((scalar.ndim(), scalar.shape(), scalar.to_vec::<i64>().unwrap()), (0, vec![], vec![42]));
    let empty = Tensor::from_slice::<f32>(&[], &[0, 5]).unwrap();
    assert_eq!((empty.shape(), empty.to_vec::<f32>().unwrap()), (vec![0, 5], vec![]));
}

#[test]
fn a_shape_that_does_not_fit_the_slice_is_refused() {
    let error = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[2, 2]).err().expect("refused");
    assert_eq!(error.code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    assert!(error.message().contains("holds 4 elements, the slice 3"), "{}", error);
    let negative = Tensor::from_slice(&[1.0f32], &[-1]).err().expect("refused");
    assert_eq!(negative.code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
}

#[test]
fn reading_as_another_type_is_a_dtype_error() {
    let error = Tensor::from_slice(&[1i64], &[1]).unwrap().to_vec::<f32>().err().expect("refused");
    assert_eq!((error.code(), error.name()), (sys::ACCEL_ERR_DTYPE, "ACCEL_ERR_DTYPE"));
}

#[test]
fn dlpack_export_shares_the_tensors_memory() {
    let tensor = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
    let exported = tensor.to_dlpack().unwrap();
    assert_eq!(exported.shape(), [3, 2]);
    assert_eq!((exported.dtype().code, exported.dtype().bits, exported.dtype().lanes), (sys::kDLFloat, 32, 1));
    assert_eq!(exported.device().device_type, sys::kDLCPU);
    assert_eq!(exported.data_ptr(), tensor.data_ptr().unwrap());
    drop(tensor); // the export keeps the memory
    assert_eq!(unsafe { exported.as_slice::<f32>() }.unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(unsafe { exported.as_slice::<i32>() }.err().expect("wrong type").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
}

#[test]
fn a_vec_is_imported_without_a_copy_and_freed_by_the_library() {
    let values: Vec<i64> = (0..12).collect();
    let address = values.as_ptr();
    let tensor = Tensor::from_vec(values, &[3, 4]).unwrap();
    assert_eq!(tensor.data_ptr().unwrap() as *const i64, address);
    assert_eq!((tensor.shape(), tensor.dtype()), (vec![3, 4], Some(DType::Int64)));
    assert_eq!(tensor.to_vec::<i64>().unwrap(), (0..12).collect::<Vec<_>>());
    // Through a second framework and back: still the same memory.
    let again = Tensor::from_dlpack(tensor.to_dlpack().unwrap()).unwrap();
    drop(tensor);
    assert_eq!(again.data_ptr().unwrap() as *const i64, address);
}

#[test]
fn dlpack_ownership_moves_through_raw_pointers() {
    let lent = DlpackTensor::from_vec(vec![1u8, 2, 3], &[3]).unwrap();
    let raw = lent.into_raw();
    let taken = unsafe { DlpackTensor::from_raw(raw) }.expect("not NULL");
    assert_eq!(taken.as_ptr(), raw as *const _);
    assert_eq!(Tensor::from_dlpack(taken).unwrap().to_vec::<u8>().unwrap(), [1, 2, 3]);
    assert!(unsafe { DlpackTensor::from_raw(std::ptr::null_mut()) }.is_none());
}

#[test]
fn bool_tensors_cannot_be_exported() {
    let error = Tensor::from_slice(&[true], &[1]).unwrap().to_dlpack().err().expect("refused by LibTorch 1.13");
    assert_eq!(error.code(), sys::ACCEL_ERR_DTYPE);
    assert!(!error.message().is_empty());
}

#[test]
fn tensors_are_read_from_several_threads() {
    let tensor = Tensor::from_slice(&[3.0f64; 1000], &[1000]).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| assert_eq!(tensor.to_vec::<f64>().unwrap().iter().sum::<f64>(), 3000.0));
        }
    });
}
