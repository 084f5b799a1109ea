//! Datasets of every kind and the loaders over them, on one process.
mod common;
#[path = "support/files.rs"]
mod files;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use accel::{sys, Batch, CallbackResult, Dataset, ItemStream, Loader, Options, Sample, State, Tensor};

fn column(batch: &Batch, name: &str) -> Vec<i64> {
    batch.get(name).unwrap().to_vec::<i64>().unwrap()
}

fn options(pairs: &[(&str, &str)]) -> Options {
    Options::from_text(pairs).unwrap()
}

/// Ten rows: "x" float32 [10, 2] = (i, -i), "y" int64 [10] = i.
fn ten_rows() -> Dataset {
    let x: Vec<f32> = (0..10).flat_map(|i| [i as f32, -(i as f32)]).collect();
    let y: Vec<i64> = (0..10).collect();
    let (x, y) = (Tensor::from_slice(&x, &[10, 2]).unwrap(), Tensor::from_slice(&y, &[10]).unwrap());
    Dataset::from_tensors(&[("x", &x), ("y", &y)]).unwrap()
}

#[test]
fn a_loader_over_tensors_yields_an_epoch_then_starts_the_next() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let data = ten_rows();
    assert_eq!(data.length(), Some(10));
    let mut loader = Loader::new(&state, &data, Some(&options(&[("batch_size", "4")]))).unwrap();
    assert_eq!(loader.length().unwrap(), Some(3));
    assert_eq!(loader.epoch(), 0);

    let mut seen = Vec::new();
    while let Some(batch) = loader.next() {
        let batch = batch.unwrap();
        assert_eq!(batch.names(), ["x", "y"]);
        assert_eq!((batch.count(), batch.name(2)), (2, None));
        let y = column(&batch, "y");
        let x = batch.get("x").unwrap().to_vec::<f32>().unwrap();
        assert_eq!(x, y.iter().flat_map(|&i| [i as f32, -(i as f32)]).collect::<Vec<_>>());
        seen.push((y.len(), loader.end_of_dataloader()));
    }
    assert_eq!(seen, [(4, false), (4, false), (2, true)]);
    assert_eq!(loader.remainder(), Some(2));
    assert_eq!(loader.epoch(), 1);
    assert_eq!(loader.next().map(|batch| column(&batch.unwrap(), "y")), Some(vec![0, 1, 2, 3]), "the next epoch");

    let error = loader.next().unwrap().unwrap().get("z").err().expect("no field z");
    assert_eq!(error.code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
}

#[test]
fn a_function_of_the_index_feeds_prefetch_threads() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let data = Dataset::from_fn(7, move |index, sample: &mut Sample| {
        counted.fetch_add(1, Ordering::SeqCst);
        sample.add("x", &Tensor::from_slice(&[index as f32; 2], &[2])?)?;
        sample.add("y", &Tensor::from_slice(&[index], &[])?)?;
        Ok(())
    })
    .unwrap();
    let mut loader = Loader::new(&state, &data, Some(&options(&[("batch_size", "3"), ("prefetch_threads", "2")]))).unwrap();
    let batches: Vec<Vec<i64>> = (&mut loader).map(|batch| column(&batch.unwrap(), "y")).collect();
    assert_eq!(batches, [vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
    assert!(calls.load(Ordering::SeqCst) >= 7);
    drop(data); // the loader keeps the dataset and its function alive
    assert_eq!(loader.next().map(|batch| column(&batch.unwrap(), "y")), Some(vec![0, 1, 2]));
}

#[test]
fn an_error_or_panic_in_the_function_fails_next_with_its_message() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let failing = Dataset::from_fn(4, |index, sample: &mut Sample| {
        if index == 2 {
            return Err(format!("no item {}", index).into());
        }
        sample.add("y", &Tensor::from_slice(&[index], &[])?)?;
        Ok(())
    })
    .unwrap();
    let mut loader = Loader::new(&state, &failing, Some(&options(&[("batch_size", "4")]))).unwrap();
    let error = loader.next().unwrap().err().expect("the callback failed");
    assert_eq!(error.code(), sys::ACCEL_ERR_CALLBACK);
    assert!(error.message().ends_with(": no item 2"), "{}", error);

    let panicking = Dataset::from_fn(2, |_, _: &mut Sample| -> CallbackResult<()> { panic!("out of cheese") }).unwrap();
    let mut loader = Loader::new(&state, &panicking, None).unwrap();
    let error = loader.next().unwrap().err().expect("the callback panicked");
    assert_eq!(error.code(), sys::ACCEL_ERR_CALLBACK);
    assert!(error.message().contains("panicked: out of cheese"), "{}", error);
}

/// Five items 0..5 per epoch, numbered by epoch: item i of epoch e is 10 * e + i.
struct Counter {
    epoch: i64,
    next: i64,
}

impl ItemStream for Counter {
    fn start_epoch(&mut self, epoch: i64) -> CallbackResult<()> {
        self.epoch = epoch;
        self.next = 0;
        Ok(())
    }

    fn next_item(&mut self, sample: &mut Sample<'_>) -> CallbackResult<bool> {
        if self.next == 5 {
            return Ok(false);
        }
        sample.add("y", &Tensor::from_slice(&[10 * self.epoch + self.next], &[])?)?;
        self.next += 1;
        Ok(true)
    }
}

#[test]
fn a_stream_is_read_again_each_epoch() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let data = Dataset::from_stream(Counter { epoch: -1, next: 0 }).unwrap();
    assert_eq!(data.length(), None);
    let mut loader = Loader::new(&state, &data, Some(&options(&[("batch_size", "2")]))).unwrap();
    assert_eq!(loader.length().unwrap(), None);
    let first: Vec<Vec<i64>> = (&mut loader).map(|batch| column(&batch.unwrap(), "y")).collect();
    assert_eq!(first, [vec![0, 1], vec![2, 3], vec![4]]);
    let second: Vec<Vec<i64>> = (&mut loader).map(|batch| column(&batch.unwrap(), "y")).collect();
    assert_eq!(second, [vec![10, 11], vec![12, 13], vec![14]]);
}

#[test]
fn given_batches_are_kept_as_they_are() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let data = ten_rows();
    let batches = [vec![9, 0, 1], vec![5], vec![2, 3]];
    let mut loader = Loader::with_batches(&state, &data, &batches, None).unwrap();
    let yielded: Vec<Vec<i64>> = (&mut loader).map(|batch| column(&batch.unwrap(), "y")).collect();
    assert_eq!(yielded, batches);
    assert_eq!(loader.remainder(), None);
    let empty = Loader::with_batches(&state, &data, &[vec![0], vec![]], None).err().expect("an empty batch");
    assert_eq!(empty.code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    // loader.h promises ACCEL_ERR_INVALID_ARGUMENT here too; the library says ACCEL_ERR_OUT_OF_RANGE.
    let outside = Loader::with_batches(&state, &data, &[vec![10]], None).err().expect("an index out of range");
    assert!(outside.message().contains("index 10"), "{}", outside);
}

#[test]
fn a_saved_position_resumes_exactly_and_epochs_can_be_chosen() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let data = ten_rows();
    let settings = options(&[("batch_size", "3"), ("shuffle", "true"), ("data_seed", "5")]);
    let mut original = Loader::new(&state, &data, Some(&settings)).unwrap();
    let first = column(&original.next().unwrap().unwrap(), "y");
    let saved = original.save_state().unwrap();
    let rest: Vec<Vec<i64>> = (&mut original).map(|batch| column(&batch.unwrap(), "y")).collect();
    assert_eq!(rest.len(), 3);
    assert_ne!(first, vec![0, 1, 2], "shuffled");

    let mut resumed = Loader::new(&state, &data, Some(&settings)).unwrap();
    resumed.load_state(&saved).unwrap();
    let resumed_rest: Vec<Vec<i64>> = (&mut resumed).map(|batch| column(&batch.unwrap(), "y")).collect();
    assert_eq!(resumed_rest, rest);
    let error = resumed.load_state(b"not a loader state").err().expect("refused");
    assert_eq!(error.code(), sys::ACCEL_ERR_INVALID_ARGUMENT);

    let mut skipping = Loader::new(&state, &data, Some(&settings)).unwrap();
    skipping.skip_first_batches(1).unwrap();
    assert_eq!(column(&skipping.next().unwrap().unwrap(), "y"), rest[0]);
    let during = skipping.set_epoch(3).err().expect("during an epoch");
    assert_eq!(during.code(), sys::ACCEL_ERR_INVALID_STATE);

    let mut later = Loader::new(&state, &data, Some(&settings)).unwrap();
    later.set_epoch(4).unwrap();
    assert_eq!(later.epoch(), 4);
}

#[test]
fn npy_and_safetensors_files_are_datasets() {
    let dir = common::scratch_dir("dataset_files");
    let x: Vec<f32> = (0..6).map(|value| value as f32 / 2.0).collect();
    files::write_npy_f32(&dir.join("x.npy"), &[3, 2], &x);
    files::write_npy_f32(&dir.join("w.npy"), &[3], &[7.0, 8.0, 9.0]);
    files::write_safetensors(&dir.join("data.safetensors"), &x, &[4, 5, 6]);

    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let npy = Dataset::from_npy(&[("x", dir.join("x.npy")), ("w", dir.join("w.npy"))]).unwrap();
    assert_eq!(npy.length(), Some(3));
    let batch = Loader::new(&state, &npy, Some(&options(&[("batch_size", "3")]))).unwrap().next().unwrap().unwrap();
    assert_eq!(batch.get("x").unwrap().to_vec::<f32>().unwrap(), x);
    assert_eq!(batch.get("w").unwrap().to_vec::<f32>().unwrap(), [7.0, 8.0, 9.0]);

    let safetensors = Dataset::from_safetensors(dir.join("data.safetensors")).unwrap();
    let batch = Loader::new(&state, &safetensors, Some(&options(&[("batch_size", "2")]))).unwrap().next().unwrap().unwrap();
    assert_eq!(column(&batch, "y"), [4, 5]);
    assert_eq!(batch.get("x").unwrap().shape(), [2, 2]);

    let missing = Dataset::from_safetensors(dir.join("missing.safetensors")).err().expect("no such file");
    assert_eq!(missing.code(), sys::ACCEL_ERR_IO);
}
