//! Two processes through `accel launch`: collectives, splitting, main_process_first, a loader with
//! gather_for_metrics, data-parallel training, a shape mismatch and the shutdown. The test starts this
//! same test binary on two ranks, running only the ignored `two_process_worker`.
mod common;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use accel::{compute_loss, sys, Dataset, DistributedType, Loader, Model, Optimizer, Options, Reduction, State, Tensor};

#[test]
fn two_ranks_agree() {
    let dir = common::scratch_dir("two_processes");
    let output = Command::new(common::launcher())
        .args(["launch", "--nproc-per-node", "2", "--cpu", "--master-port", "0", "--"])
        .arg(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "two_process_worker", "--ignored", "--nocapture", "--test-threads=1"])
        .env("TINY_MODEL", common::tiny_model())
        .env("WORKER_DIR", &dir)
        .env("ACCEL_TIMEOUT_S", "60") // a hang fails within a minute, naming the missing rank
        // The build's variables: the ranks' states would warn that they set no state setting.
        .env_remove("ACCEL_LIB_DIR")
        .env_remove("ACCEL_LAUNCHER")
        .env_remove("ACCEL_PYTHON")
        .output()
        .expect("accel launch runs");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "accel launch failed ({}):\n{}", output.status, text);
    for rank in 0..2 {
        assert!(text.contains(&format!("worker rank {} ok", rank)), "rank {} did not finish:\n{}", rank, text);
    }
}

#[test]
#[ignore = "a rank of two_ranks_agree, started by `accel launch`"]
fn two_process_worker() {
    let state = State::new(None).unwrap();
    let rank = state.process_index();
    assert_eq!((state.num_processes(), state.distributed_type(), state.backend()), (2, DistributedType::MultiCpu, "gloo+shm".to_string()));
    assert_eq!(state.is_main_process(), rank == 0);
    assert_eq!(state.is_last_process(), rank == 1);

    collectives(&state, rank);
    splitting_and_sections(&state, rank);
    loading_and_metrics(&state);
    training(&state, rank);

    // Row counts may differ between ranks; the other sizes may not.
    let rows_differ = Tensor::from_slice(&vec![1.0f32; 1 + rank as usize], &[1 + rank as i64]).unwrap();
    assert_eq!(state.gather(&rows_differ).unwrap().shape(), vec![3]);
    let mismatched = Tensor::from_slice(&vec![1.0f32; 2 + rank as usize], &[1, 2 + rank as i64]).unwrap();
    assert_eq!(state.gather(&mismatched).err().expect("shapes differ").code(), sys::ACCEL_ERR_SHAPE_MISMATCH);
    state.wait_for_everyone().unwrap();
    state.shutdown().unwrap();
    assert_eq!(state.gather(&mismatched).err().expect("shut down").code(), sys::ACCEL_ERR_INVALID_STATE);
    println!("worker rank {} ok", rank);
}

fn collectives(state: &State, rank: i32) {
    let mine = Tensor::from_slice(&[rank as f32, rank as f32 + 0.5], &[2]).unwrap();
    assert_eq!(state.gather(&mine).unwrap().to_vec::<f32>().unwrap(), [0.0, 0.5, 1.0, 1.5]);
    assert_eq!(state.reduce(&mine, Reduction::Sum).unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0]);
    assert_eq!(state.reduce(&mine, Reduction::Mean).unwrap().to_vec::<f32>().unwrap(), [0.5, 1.0]);
    assert_eq!(state.reduce(&mine, Reduction::Max).unwrap().to_vec::<f32>().unwrap(), [1.0, 1.5]);
    let words = state.gather_bytes("ab".repeat(rank as usize).as_bytes()).unwrap();
    assert_eq!(words, [b"".to_vec(), b"ab".to_vec()]);

    let mut shared = Tensor::from_slice(&[rank as i64 * 10], &[1]).unwrap();
    state.broadcast(&mut shared, 1).unwrap();
    assert_eq!(shared.to_vec::<i64>().unwrap(), [10]);

    // Rank r holds [4r, 4r + 1, 4r + 2, 4r + 3]: the sums are [4, 6, 8, 10], of which rank r keeps two.
    let first = 4.0 * rank as f32;
    let quarter = Tensor::from_slice(&[first, first + 1.0, first + 2.0, first + 3.0], &[4]).unwrap();
    let mut share = Tensor::from_slice(&[0.0f32; 2], &[2]).unwrap();
    state.reduce_scatter(&quarter, &mut share, Reduction::Mean).unwrap();
    assert_eq!(share.to_vec::<f32>().unwrap(), if rank == 0 { [2.0, 3.0] } else { [4.0, 5.0] });
    let mut everyone = Tensor::from_slice(&[0.0f32; 8], &[2, 4]).unwrap();
    state.all_gather(&quarter, &mut everyone).unwrap();
    assert_eq!(everyone.to_vec::<f32>().unwrap(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let mut too_small = Tensor::from_slice(&[0.0f32; 3], &[3]).unwrap();
    assert_eq!(state.all_gather(&quarter, &mut too_small).err().expect("3 of 8").code(), sys::ACCEL_ERR_SHAPE_MISMATCH);

    let ragged = Tensor::from_slice(&vec![rank as f32 + 1.0; 1 + 2 * rank as usize], &[1 + 2 * rank as i64]).unwrap();
    let padded = state.pad_across_processes(&ragged, 0, -1.0, false).unwrap();
    let expected: &[f32] = if rank == 0 { &[1.0, -1.0, -1.0] } else { &[2.0, 2.0, 2.0] };
    assert_eq!(padded.to_vec::<f32>().unwrap(), expected);
}

fn splitting_and_sections(state: &State, rank: i32) {
    let share = state.split_range(5).unwrap();
    assert_eq!((share.first, share.count, share.padded_count), if rank == 0 { (0, 3, 3) } else { (3, 2, 3) });
    let rows = Tensor::from_slice(&[0i64, 1, 2, 3, 4], &[5]).unwrap();
    let expected: &[i64] = if rank == 0 { &[0, 1, 2] } else { &[3, 4, 4] };
    assert_eq!(state.split_tensor(&rows, true).unwrap().to_vec::<i64>().unwrap(), expected);

    // Each rank appends its number inside the section: the main process's must come first.
    let log = PathBuf::from(std::env::var_os("WORKER_DIR").expect("WORKER_DIR")).join("order");
    state.main_process_first(|| write!(OpenOptions::new().create(true).append(true).open(&log).unwrap(), "{}", rank).unwrap()).unwrap();
    state.local_main_process_first(|| ()).unwrap();
    state.wait_for_everyone().unwrap();
    assert_eq!(fs::read_to_string(&log).unwrap(), "01");
}

/// Ten rows in batches of 3 per rank: the last global batch is padded from the start, and
/// gather_for_metrics drops the padding, so every row is counted once.
fn loading_and_metrics(state: &State) {
    let y: Vec<i64> = (0..10).collect();
    let y = Tensor::from_slice(&y, &[10]).unwrap();
    let data = Dataset::from_tensors(&[("y", &y)]).unwrap();
    let mut loader = Loader::new(state, &data, Some(&Options::from_text(&[("batch_size", "3")]).unwrap())).unwrap();
    assert_eq!(loader.length().unwrap(), Some(2));
    let mut counted = Vec::new();
    while let Some(batch) = loader.next() {
        let rows = batch.unwrap().get("y").unwrap();
        counted.extend(state.gather_for_metrics(&rows).unwrap().to_vec::<i64>().unwrap());
    }
    assert_eq!(counted, (0..10).collect::<Vec<_>>());
}

/// Each rank trains on its own data; the averaged gradients keep the parameters equal everywhere.
fn training(state: &State, rank: i32) {
    let mut model = Model::load(std::env::var_os("TINY_MODEL").expect("TINY_MODEL")).unwrap();
    state.prepare_model(&mut model, None).unwrap();
    let mut optimizer = Optimizer::new(&model, "sgd", Some(&Options::from_text(&[("lr", "0.1")]).unwrap())).unwrap();
    let x = Tensor::from_slice(&[rank as f32 + 1.0; 8], &[2, 4]).unwrap();
    let y = Tensor::from_slice(&[rank as i64, 2], &[2]).unwrap();
    for _ in 0..3 {
        state.accumulate().unwrap();
        let logits = model.forward(&[&x]).unwrap().get_named("logits").unwrap();
        state.backward(&compute_loss("cross_entropy", &logits, &y, None).unwrap()).unwrap();
        optimizer.step().unwrap();
        optimizer.zero_grad().unwrap();
    }
    for index in 0..model.num_parameters() {
        let everywhere = state.gather(&model.parameter(index).unwrap()).unwrap().to_vec::<f32>().unwrap();
        let (first, second) = everywhere.split_at(everywhere.len() / 2);
        assert_eq!(first, second, "{} differs between the ranks", model.parameter_name(index).unwrap());
    }
    let dir = PathBuf::from(std::env::var_os("WORKER_DIR").expect("WORKER_DIR")).join("model");
    state.save_model(&model, &dir, 0).unwrap();
    assert!(dir.join("model.safetensors").exists(), "the main process saved before anyone went on");
}
