//! Models of Rust's own memory (Model::from_tensors): zero-copy both ways, the gradient storage, the grad
//! scaler's calls and the errors on one process; and examples/linear_classifier.rs (a hand-written
//! forward and gradient) on two processes through `accel launch`, which must train to the very weights of
//! one process accumulating the same two micro-batches, with the loss going down.
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use accel::{sys, Model, Optimizer, Options, State, Tensor};

#[test]
fn the_model_shares_rust_memory_and_the_optimizer_steps_it_in_place() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let weight = vec![1.0f32, 2.0, 3.0, 4.0];
    let address = weight.as_ptr();
    let weight = Tensor::from_vec(weight, &[2, 2]).unwrap();
    let mean = Tensor::from_vec(vec![0.5f32, 0.5], &[2]).unwrap();
    let mut model = Model::from_tensors(&[("weight", &weight)], None, &[("running_mean", &mean)]).unwrap();
    state.prepare_model(&mut model, None).unwrap();
    assert_eq!((model.parameter_name(0), model.buffer_name(0)), (Some("weight".to_string()), Some("running_mean".to_string())));
    assert_eq!(model.parameter(0).unwrap().data_ptr().unwrap() as *const f32, address, "the parameter is not the Vec's memory");

    let mut optimizer = Optimizer::new(&model, "sgd", Some(&Options::from_text(&[("lr", "0.5")]).unwrap())).unwrap();
    state.accumulate().unwrap();
    model.begin_forward(true).unwrap();
    let storage = model.grad_view(0).unwrap();
    assert_eq!(storage.shape(), [2, 2]);
    unsafe { storage.as_mut_slice::<f32>().unwrap() }.copy_from_slice(&[2.0, 2.0, -2.0, 0.0]);
    model.grad_ready(0).unwrap();
    model.end_backward().unwrap();
    optimizer.step().unwrap();
    assert_eq!(unsafe { weight.as_slice::<f32>().unwrap() }, [0.0, 1.0, 4.0, 4.0], "the step did not write the Vec");
    optimizer.zero_grad().unwrap();
    assert_eq!(model.grad_view(0).unwrap().to_vec::<f32>().unwrap(), [0.0; 4], "zero_grad keeps the storage, zeroed");
    assert_eq!(model.grad_view(0).unwrap().data_ptr().unwrap(), storage.data_ptr().unwrap(), "the storage moved");

    // A whole value (a state dict's) written into the Vec, converted from f64.
    model.set_parameter(0, &Tensor::from_vec(vec![-1.0f64, 0.5, 0.25, 8.0], &[2, 2]).unwrap()).unwrap();
    assert_eq!(unsafe { weight.as_slice::<f32>().unwrap() }, [-1.0, 0.5, 0.25, 8.0]);
    let wrong = Tensor::from_vec(vec![0.0f32; 4], &[4]).unwrap();
    assert_eq!(model.set_parameter(0, &wrong).err().expect("another shape").code(), sys::ACCEL_ERR_SHAPE_MISMATCH);
}

/// Without fp16 loss scaling the scale is 1 and unscaling finds nothing; the calls check their arguments.
#[test]
fn the_grad_scaler_calls_answer_without_fp16() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    assert_eq!(state.grad_scale().unwrap().to_vec::<f32>().unwrap(), [1.0]);
    let weight = Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap();
    let mut model = Model::from_tensors(&[("w", &weight)], None, &[]).unwrap();
    state.prepare_model(&mut model, None).unwrap();
    unsafe { model.grad_view(0).unwrap().as_mut_slice::<f32>().unwrap() }.copy_from_slice(&[f32::INFINITY, 2.0, 4.0]);
    assert!(!state.unscale_gradients(&mut model).unwrap());
    assert_eq!(model.grad_view(0).unwrap().to_vec::<f32>().unwrap(), [f32::INFINITY, 2.0, 4.0], "no scale, nothing divided");
    state.update_grad_scale(true).unwrap();
    assert_eq!(state.grad_scale().unwrap().to_vec::<f32>().unwrap(), [1.0]);
}

#[test]
fn wrong_models_and_calls_are_refused_with_the_reason() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let weight = Tensor::from_vec(vec![1.0f32; 2], &[2]).unwrap();
    let steps = Tensor::from_vec(vec![0i64; 2], &[2]).unwrap();
    let code = |result: accel::Result<Model>| result.err().expect("refused").code();
    assert_eq!(code(Model::from_tensors(&[("w", &weight), ("w", &weight)], None, &[])), sys::ACCEL_ERR_INVALID_ARGUMENT);
    assert_eq!(code(Model::from_tensors(&[("steps", &steps)], None, &[])), sys::ACCEL_ERR_INVALID_ARGUMENT);
    let error = Model::from_tensors(&[("w", &weight)], Some(&[true, false]), &[]).err().expect("two flags, one parameter");
    assert!(error.message().contains("2 trainable flags for 1 parameters"), "{}", error.message());

    let mut frozen = Model::from_tensors(&[("w", &weight), ("steps", &steps)], Some(&[true, false]), &[]).unwrap();
    assert_eq!(frozen.grad_view(0).err().expect("not prepared").code(), sys::ACCEL_ERR_INVALID_STATE);
    state.prepare_model(&mut frozen, None).unwrap();
    assert_eq!(frozen.grad_view(1).err().expect("a frozen parameter").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    assert_eq!(frozen.grad_ready(2).err().expect("no parameter 2").code(), sys::ACCEL_ERR_OUT_OF_RANGE);
    let storage = frozen.grad_view(0).unwrap();
    assert_eq!(unsafe { storage.as_mut_slice::<f64>() }.err().expect("float32 storage").code(), sys::ACCEL_ERR_DTYPE);

    let mut script = Model::load(common::tiny_model()).unwrap();
    state.prepare_model(&mut script, None).unwrap();
    let error = script.end_backward().err().expect("accel runs a TorchScript model's backward itself");
    assert_eq!(error.code(), sys::ACCEL_ERR_INVALID_STATE);
    assert!(error.message().contains("TorchScript"), "{}", error.message());
}

/// examples/linear_classifier, built by cargo test beside this test binary.
fn linear_classifier() -> PathBuf {
    let deps = std::env::current_exe().expect("this test binary");
    let example = deps.parent().and_then(Path::parent).expect("target/<profile>/deps").join("examples/linear_classifier");
    assert!(
        example.exists(),
        "{} is not built (`cargo test` builds the examples, `cargo test --test host_model` does not)",
        example.display()
    );
    example
}

/// Runs the example on `processes` ranks with `args`; its output, after checking that it succeeded.
fn launch(processes: u32, args: &[&str]) -> String {
    let output = Command::new(common::launcher())
        .args(["launch", "--nproc-per-node", &processes.to_string(), "--cpu", "--master-port", "0", "--"])
        .arg(linear_classifier())
        .args(args)
        .env("ACCEL_TIMEOUT_S", "60")
        .env_remove("ACCEL_LIB_DIR")
        .env_remove("ACCEL_LAUNCHER")
        .env_remove("ACCEL_PYTHON")
        .output()
        .expect("accel launch runs");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "accel launch of the example failed ({}):\n{}", output.status, text);
    text
}

fn epoch_losses(text: &str) -> Vec<f64> {
    text.lines().filter_map(|line| line.split_once(" loss ")).map(|(_, loss)| loss.trim().parse().expect("a loss")).collect()
}

fn accuracy(text: &str) -> f64 {
    let (_, rest) = text.split_once("training accuracy ").expect("the accuracy line");
    rest.split_whitespace().next().and_then(|value| value.parse().ok()).expect("an accuracy")
}

#[test]
fn rust_owned_classifier_trains_on_two_processes_to_the_weights_of_one() {
    let dir = common::scratch_dir("linear_classifier");
    let (two, one) = (dir.join("two.bin"), dir.join("one.bin"));
    let two_ranks = launch(2, &["--output", two.to_str().unwrap()]);
    // One process, two micro-batches of 16 per step: the rows that the two ranks take in one step.
    let one_rank = launch(1, &["--gradient-accumulation-steps", "2", "--output", one.to_str().unwrap()]);
    assert!(two_ranks.contains("weights agree on 2 processes"), "{}", two_ranks);

    let losses = epoch_losses(&two_ranks);
    assert_eq!(losses.len(), 4, "{}", two_ranks);
    assert!(losses[3] < losses[0] / 3.0, "the loss did not go down: {:?}", losses);
    assert!(accuracy(&two_ranks) >= 0.9, "{}", two_ranks);

    let (two, one) = (std::fs::read(&two).unwrap(), std::fs::read(&one).unwrap());
    assert_eq!(two.len(), (3 * 4 + 3) * 4);
    assert!(two == one, "two processes trained to other weights than one process on the same batches:\n{}\n{}", two_ranks, one_rank);
}

/// The caller's own optimizer: on one process it steps every trainable element (the pieces are the whole
/// parameters), called by `step` on a sync step; its failure fails the step, saying why.
#[test]
fn an_external_optimizer_calls_back_to_step_the_pieces_it_lists() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let weight = Tensor::from_vec(vec![1.0f32; 6], &[2, 3]).unwrap();
    let bias = Tensor::from_vec(vec![0.0f32; 2], &[2]).unwrap();
    let mut model = Model::from_tensors(&[("weight", &weight), ("bias", &bias)], None, &[]).unwrap();
    state.prepare_model(&mut model, None).unwrap();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let mut optimizer = Optimizer::external(&model, move || {
        if counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            return Err("the second step fails".into());
        }
        Ok(())
    })
    .unwrap();
    let pieces = optimizer.pieces().unwrap();
    assert_eq!(pieces, [
        accel::Piece { parameter: "weight".to_string(), begin: 0, numel: 6 },
        accel::Piece { parameter: "bias".to_string(), begin: 0, numel: 2 }
    ]);
    state.accumulate().unwrap();
    optimizer.step().unwrap();
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    let error = optimizer.step().err().expect("the callback failed");
    assert_eq!(error.code(), sys::ACCEL_ERR_CALLBACK);
    assert!(error.message().contains("the second step fails"), "{}", error.message());

    let mut script = Model::load(common::tiny_model()).unwrap();
    state.prepare_model(&mut script, None).unwrap();
    let refused = Optimizer::external(&script, || Ok(())).err().expect("a TorchScript model's tensors are accel's");
    assert_eq!(refused.code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
}

/// ZeRO stage 3's calls: units are given before prepare (a TorchScript model has none); on one process
/// nothing is sharded, so the unit calls say the model is not; a piece's tensor is the parameter's memory
/// (without ZeRO, the whole parameter), its gradient there during the external step only.
#[test]
fn stage_three_units_are_given_before_prepare_and_one_process_shards_nothing() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let weight = Tensor::from_vec(vec![1.0f32; 6], &[2, 3]).unwrap();
    let bias = Tensor::from_vec(vec![0.0f32; 2], &[2]).unwrap();
    let mut model = Model::from_tensors(&[("weight", &weight), ("bias", &bias)], None, &[]).unwrap();
    let wrong = model.set_units(&[0]).err().expect("one unit for two parameters");
    assert!(wrong.message().contains("1 units given for 2 parameters"), "{}", wrong.message());
    model.set_units(&[0, 1]).unwrap();
    state.prepare_model(&mut model, Some(&Options::from_text(&[("zero_stage", "3")]).unwrap())).unwrap();
    assert_eq!(model.num_units(), 0);
    let refused = model.set_units(&[0, 0]).err().expect("units after prepare");
    assert_eq!(refused.code(), sys::ACCEL_ERR_INVALID_STATE);
    let full = Tensor::from_vec(vec![0.0f32; 64], &[64]).unwrap();
    // SAFETY: refused before the library could write into `full`.
    let prefetched = unsafe { model.unit_prefetch(0, &full) }.err();
    for error in [model.unit_gather(0, &full).err(), prefetched, model.unit_reduce(0, &full).err(),
                  model.unit_gather_gradients(0, &full).err(), model.unit_numel(0).err(),
                  model.parameter_place(0).err()] {
        let error = error.expect("one process shards nothing");
        assert_eq!(error.code(), sys::ACCEL_ERR_INVALID_STATE);
        assert!(error.message().contains("not sharded"), "{}", error.message());
    }
    let optimizer = Optimizer::external(&model, || Ok(())).unwrap();
    let (value, grad) = optimizer.piece_tensors(0).unwrap();
    assert_eq!((value.shape(), value.data_ptr().unwrap()), (vec![6], weight.data_ptr().unwrap()));
    assert!(grad.is_some(), "without ZeRO the piece is the parameter, whose gradient storage is set at prepare");
    assert_eq!(optimizer.piece_tensors(2).err().expect("two pieces").code(), sys::ACCEL_ERR_OUT_OF_RANGE);

    // A TorchScript model takes units too (accel gathers them around the forward it runs), one per parameter.
    let mut script = Model::load(common::tiny_model()).unwrap();
    assert_eq!(script.set_units(&[]).err().expect("no unit for its parameters").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
}
