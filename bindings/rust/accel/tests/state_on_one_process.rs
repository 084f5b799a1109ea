//! The state and its collectives when the process runs alone (no launcher variables): collectives work
//! locally. Their two-process behaviour is in two_processes.rs.
mod common;

use accel::{sys, DistributedType, Reduction, State, Tensor};

#[test]
fn a_lone_process_describes_itself() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    assert_eq!((state.num_processes(), state.process_index(), state.local_process_index(), state.num_local_processes()), (1, 0, 0, 1));
    assert!(state.is_main_process() && state.is_local_main_process() && state.is_last_process());
    assert_eq!((state.distributed_type(), state.distributed_type_name()), (DistributedType::No, "NO".to_string()));
    assert_eq!((state.device(), state.mixed_precision(), state.backend()), ("cpu".to_string(), "no".to_string(), String::new()));
    assert!(!state.is_broken());
    state.wait_for_everyone().unwrap();
}

#[test]
fn the_state_is_shared_by_threads() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                assert_eq!(state.num_processes(), 1);
                assert_eq!(state.gather(&x).unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0]);
            });
        }
    });
}

#[test]
fn collectives_of_one_process_give_its_own_values() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    assert_eq!(state.gather(&x).unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(state.gather_for_metrics(&x).unwrap().shape(), [2, 2]);
    assert_eq!(state.reduce(&x, Reduction::Sum).unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(state.reduce(&x, Reduction::Max).unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(state.pad_across_processes(&x, -1, 0.0, false).unwrap().shape(), [2, 2]);
    assert_eq!(state.gather_bytes(b"rank zero").unwrap(), [b"rank zero".to_vec()]);
    assert_eq!(state.gather_bytes(b"").unwrap(), [Vec::<u8>::new()]);

    let mut y = Tensor::from_slice(&[5i64, 6], &[2]).unwrap();
    state.broadcast(&mut y, 0).unwrap();
    assert_eq!(y.to_vec::<i64>().unwrap(), [5, 6]);
    assert_eq!(state.broadcast(&mut y, 1).err().expect("no rank 1").code(), sys::ACCEL_ERR_OUT_OF_RANGE);
    assert_eq!(state.reduce(&y, Reduction::Mean).err().expect("mean of integers").code(), sys::ACCEL_ERR_DTYPE);
    assert_eq!(state.pad_across_processes(&y, 1, 0.0, true).err().expect("no dim 1").code(), sys::ACCEL_ERR_OUT_OF_RANGE);

    let reduced = state.reduce_named(&[("metrics.x", &x), ("metrics.y", &y)], Reduction::Sum).unwrap();
    assert_eq!(reduced[0].to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(reduced[1].to_vec::<i64>().unwrap(), [5, 6]);
    let error = state.reduce_named(&[("x", &x), ("y", &y)], Reduction::Mean).err().expect("mean of integers");
    assert_eq!(error.code(), sys::ACCEL_ERR_DTYPE);
    assert!(error.message().contains("'y' is Long"), "{}", error.message());
    assert_eq!(
        state.reduce_named(&[("x", &x), ("x", &y)], Reduction::Sum).err().expect("a repeated name").code(),
        sys::ACCEL_ERR_INVALID_ARGUMENT
    );
    assert!(state.reduce_named(&[], Reduction::Max).unwrap().is_empty());
    assert_eq!(state.autocast(|| 7).unwrap(), 7);
    state.free_memory().unwrap();
}

#[test]
fn work_is_split_and_sections_run() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let share = state.split_range(10).unwrap();
    assert_eq!((share.first, share.count, share.padded_count), (0, 10, 10));
    assert_eq!(state.split_range(-1).err().expect("negative").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    let rows = Tensor::from_slice(&[1i32, 2, 3], &[3]).unwrap();
    assert_eq!(state.split_tensor(&rows, true).unwrap().to_vec::<i32>().unwrap(), [1, 2, 3]);
    assert_eq!(state.send_to_device(&rows, false).unwrap().device(), "cpu");
    assert_eq!(state.main_process_first(|| 41 + 1).unwrap(), 42);
    assert_eq!(state.local_main_process_first(|| "done").unwrap(), "done");
}
