//! Models, optimizers, schedulers, the training step and tracking on one process, with the tiny
//! TorchScript model of support/tiny_models.py.
mod common;

use std::fs;

use accel::{
    compute_loss, sys, Checkpointed, Dataset, Loader, Model, Optimizer, Options, Progress, SavedParts, Scheduler, State, Tensor, TrainStep,
};

/// 16 samples of 4 features whose class is the index of the largest of the first 3.
fn samples() -> (Tensor, Tensor) {
    let mut x = Vec::new();
    let mut y = Vec::new();
    for i in 0..16 {
        let row = [((i * 7) % 5) as f32, ((i * 3) % 4) as f32, ((i * 5) % 6) as f32, 1.0];
        let class = (0..3).fold(0, |best, c| if row[c] > row[best] { c } else { best });
        x.extend_from_slice(&row);
        y.push(class as i64);
    }
    (Tensor::from_slice(&x, &[16, 4]).unwrap(), Tensor::from_slice(&y, &[16]).unwrap())
}

#[test]
fn a_model_runs_forward_and_shows_its_parts() {
    let _one = common::one_test_at_a_time();
    let model = Model::load(common::tiny_model()).unwrap();
    let (x, _) = samples();
    let output = model.forward(&[&x]).unwrap();
    assert_eq!(output.count(), 2);
    assert_eq!((output.name(0), output.name(1), output.name(2)), (Some("logits".to_string()), Some("norm".to_string()), None));
    let logits = output.get_named("logits").unwrap();
    assert_eq!(logits.shape(), [16, 3]);
    assert_eq!(output.get(1).unwrap().shape(), [16]);
    assert_eq!(output.get(2).err().expect("two entries").code(), sys::ACCEL_ERR_OUT_OF_RANGE);

    let shift = Tensor::from_slice(&[1.0f32, 1.0, 1.0], &[3]).unwrap();
    let shifted = model.evaluate_named(&[&x], &[("shift", &shift)]).unwrap().get_named("logits").unwrap();
    let (plain, moved) = (logits.to_vec::<f32>().unwrap(), shifted.to_vec::<f32>().unwrap());
    assert!(plain.iter().zip(&moved).all(|(a, b)| (b - a - 1.0).abs() < 1e-5));
    assert_eq!(model.evaluate(&[&x]).unwrap().get(0).unwrap().to_vec::<f32>().unwrap(), plain);
    let named = model.forward_named(&[&x], &[("shift", &shift)]).unwrap();
    assert_eq!(named.get_named("logits").unwrap().to_vec::<f32>().unwrap(), moved);
    let error = model.forward(&[&shift]).err().expect("a wrong input shape");
    assert_eq!(error.code(), sys::ACCEL_ERR_TORCH);

    let names: Vec<_> = (0..model.num_parameters()).map(|index| model.parameter_name(index).unwrap()).collect();
    assert_eq!(names, ["hidden.weight", "hidden.bias", "out.weight", "out.bias"]);
    assert_eq!(model.parameter_name(4), None);
    assert_eq!(model.parameter(0).unwrap().shape(), [8, 4]);
    assert_eq!((model.num_buffers(), model.buffer_name(0)), (1, Some("scale".to_string())));
    assert_eq!(model.buffer(0).unwrap().to_vec::<f32>().unwrap(), [1.0, 1.0, 1.0]);
    assert_eq!(model.buffer(1).err().expect("one buffer").code(), sys::ACCEL_ERR_OUT_OF_RANGE);

    let mut model = model;
    let whole = model.whole_tensors(true).unwrap();
    let whole_names: Vec<_> = whole.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(whole_names, ["hidden.weight", "hidden.bias", "out.weight", "out.bias", "scale"]);
    assert_eq!(whole[2].1.to_vec::<f32>().unwrap(), model.parameter(2).unwrap().to_vec::<f32>().unwrap());
    assert!(model.whole_tensors(false).unwrap().is_empty());
}

#[test]
fn models_load_from_memory_and_save_as_torchscript() {
    let _one = common::one_test_at_a_time();
    let dir = common::scratch_dir("torchscript");
    let model = Model::from_bytes(&fs::read(common::tiny_model()).unwrap()).unwrap();
    model.save_torchscript(dir.join("again.pt")).unwrap();
    let again = Model::load(dir.join("again.pt")).unwrap();
    assert_eq!(again.parameter(3).unwrap().to_vec::<f32>().unwrap(), model.parameter(3).unwrap().to_vec::<f32>().unwrap());
    assert_eq!(Model::from_bytes(b"not a model").err().expect("refused").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    assert_eq!(Model::load(dir.join("missing.pt")).err().expect("no file").code(), sys::ACCEL_ERR_IO);
}

#[test]
fn training_lowers_the_loss_and_is_tracked_and_saved() {
    let _one = common::one_test_at_a_time();
    let dir = common::scratch_dir("training");
    let state = State::new(None).unwrap();
    let (x, y) = samples();
    let data = Dataset::from_tensors(&[("x", &x), ("y", &y)]).unwrap();
    let mut loader = Loader::new(&state, &data, Some(&Options::from_text(&[("batch_size", "8")]).unwrap())).unwrap();

    let mut model = Model::load(common::tiny_model()).unwrap();
    assert_eq!(model.set_checkpoint_model("sharded").err().expect("not prepared").code(), sys::ACCEL_ERR_INVALID_STATE);
    state.prepare_model(&mut model, None).unwrap();
    assert_eq!(state.prepare_model(&mut model, None).err().expect("prepared twice").code(), sys::ACCEL_ERR_INVALID_STATE);
    let optimizer_options = Options::from_text(&[("lr", "0.05"), ("weight_decay", "0.01"), ("no_decay", "*bias")]).unwrap();
    let mut optimizer = Optimizer::new(&model, "adamw", Some(&optimizer_options)).unwrap();
    assert_eq!(optimizer.num_groups(), 2);
    let mut scheduler =
        Scheduler::new(&optimizer, "linear", Some(&Options::from_text(&[("warmup_steps", "2"), ("total_steps", "40")]).unwrap())).unwrap();

    state.init_trackers(&dir, "run", Some("{\"lr\": 0.05}"), None).unwrap();
    let mut progress = Progress::new(&state, 40, Some("training")).unwrap();
    let loss_of = |model: &Model| -> f32 {
        let logits = model.evaluate(&[&x]).unwrap().get_named("logits").unwrap();
        compute_loss("cross_entropy", &logits, &y, None).unwrap().to_vec::<f32>().unwrap()[0]
    };
    let before = loss_of(&model);
    assert!(state.set_gradient_accumulation_steps(0).is_err(), "an accumulation below 1 is refused");
    state.set_gradient_accumulation_steps(3).unwrap();
    assert_eq!(state.gradient_accumulation_steps(), 3);
    state.set_gradient_accumulation_steps(1).unwrap();
    state.set_sync_gradients(false).unwrap();
    assert!(!state.sync_gradients());
    assert_eq!(state.gradient_accumulation_steps(), 1, "every step synchronises below");
    model.set_training(true).unwrap();
    assert!(model.is_training());
    let mut step = 0;
    for _epoch in 0..20 {
        for batch in &mut loader {
            let batch = batch.unwrap();
            state.accumulate().unwrap();
            let logits = model.forward(&[&batch.get("x").unwrap()]).unwrap().get_named("logits").unwrap();
            let loss = compute_loss("cross_entropy", &logits, &batch.get("y").unwrap(), None).unwrap();
            state.backward(&loss).unwrap();
            assert!(state.sync_gradients());
            let norm = state.clip_grad_norm(&mut model, 1.0, 2.0).unwrap();
            assert!(norm.is_finite() && norm >= 0.0);
            state.clip_grad_value(&mut model, 10.0).unwrap();
            optimizer.step().unwrap();
            scheduler.step().unwrap();
            optimizer.zero_grad().unwrap();
            step += 1;
            state.log(&[("loss", f64::from(loss.to_vec::<f32>().unwrap()[0])), ("lr", scheduler.last_lr(0).unwrap())], step).unwrap();
            progress.update(1, f64::NAN).unwrap();
        }
    }
    drop(progress);
    model.set_training(false).unwrap();
    assert!(!model.is_training());
    let after = loss_of(&model);
    assert!(after < before * 0.8, "loss {} -> {}", before, after);
    assert_eq!(scheduler.step_count(), 40);
    assert!(!optimizer.step_was_skipped());
    assert_eq!(optimizer.loss_scale().unwrap(), 1.0);
    assert_eq!(optimizer.lr(0).unwrap(), scheduler.last_lr(0).unwrap());
    assert_eq!(state.clip_grad_norm(&mut model, 0.0, 2.0).err().expect("max_norm 0").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);

    state.print("training done").unwrap();
    state.finish_trackers().unwrap();
    let metrics = fs::read_to_string(dir.join("run/metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 40);
    assert!(metrics.lines().last().unwrap().contains("\"step\":40"), "{}", metrics);
    assert_eq!(fs::read_to_string(dir.join("run/config.json")).unwrap(), "{\"lr\": 0.05}");

    state.save_model(&model, dir.join("saved"), 0).unwrap();
    assert!(dir.join("saved/model.safetensors").exists());
    // Above 100 bytes the tensors go into shards with an index, which load_weights reads back.
    state.save_model(&model, dir.join("sharded"), 100).unwrap();
    assert!(dir.join("sharded/model.safetensors.index.json").exists());
    let mut reloaded = Model::load(common::tiny_model()).unwrap();
    reloaded.load_weights(dir.join("sharded")).unwrap();
    assert_eq!(reloaded.parameter(1).unwrap().to_vec::<f32>().unwrap(), model.parameter(1).unwrap().to_vec::<f32>().unwrap());
    assert_eq!(reloaded.load_weights(dir.join("nothing")).err().expect("no save there").code(), sys::ACCEL_ERR_IO);
    // One process: nothing is all-reduced, and a figure's name is checked all the same.
    assert_eq!(model.grad_sync_stat("last_overlapped_ms").unwrap(), 0.0);
    assert_eq!(model.grad_sync_stat("overlap").err().expect("no such figure").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    let plain = model.unwrap_model().unwrap();
    assert_eq!(plain.parameter(1).unwrap().to_vec::<f32>().unwrap(), model.parameter(1).unwrap().to_vec::<f32>().unwrap());

    // A checkpoint brings back the saved parameters and schedule after more training.
    let saved = model.parameter(1).unwrap().to_vec::<f32>().unwrap();
    let objects = Checkpointed { models: &[&model], optimizers: &[&optimizer], schedulers: &[&scheduler], loaders: &[&loader] };
    state.save_state(dir.join("checkpoint"), &objects).unwrap();
    // The same in the background, the model in each process's pieces: captured now, so the training below
    // does not reach it.
    assert_eq!(model.set_checkpoint_model("pieces").err().expect("not a choice").code(), sys::ACCEL_ERR_BAD_OPTION_VALUE);
    model.set_checkpoint_model("sharded").unwrap();
    let objects = Checkpointed { models: &[&model], optimizers: &[&optimizer], schedulers: &[&scheduler], loaders: &[&loader] };
    state.save_state_async(dir.join("background"), &objects).unwrap();
    // The schedule has reached 0: a rate set by hand makes the next epoch move the parameters.
    for group in 0..optimizer.num_groups() {
        optimizer.set_lr(group, 0.05).unwrap();
    }
    for batch in &mut loader {
        let batch = batch.unwrap();
        state.accumulate().unwrap();
        let logits = model.forward(&[&batch.get("x").unwrap()]).unwrap().get_named("logits").unwrap();
        let loss = compute_loss("cross_entropy", &logits, &batch.get("y").unwrap(), None).unwrap();
        state.backward(&loss).unwrap();
        optimizer.step().unwrap();
        scheduler.step().unwrap();
        optimizer.zero_grad().unwrap();
    }
    assert_ne!(model.parameter(1).unwrap().to_vec::<f32>().unwrap(), saved);
    let objects = Checkpointed { models: &[&model], optimizers: &[&optimizer], schedulers: &[&scheduler], loaders: &[&loader] };
    state.wait_for_save().unwrap();
    assert!(dir.join("background/rank0/model.safetensors").is_file() && !dir.join("background/model.safetensors").exists());
    state.load_state(dir.join("background"), &objects).unwrap();
    assert_eq!(model.parameter(1).unwrap().to_vec::<f32>().unwrap(), saved);
    state.load_state(dir.join("checkpoint"), &objects).unwrap();
    assert_eq!(model.parameter(1).unwrap().to_vec::<f32>().unwrap(), saved);
    assert_eq!(scheduler.step_count(), 40);
    assert_eq!(optimizer.lr(0).unwrap(), 0.0);
    let missing = state.load_state(dir.join("missing"), &objects).err().expect("no checkpoint there");
    assert_eq!(missing.code(), sys::ACCEL_ERR_IO);
}

#[test]
fn a_train_step_makes_the_calls_of_a_loop_and_says_why_it_runs_eagerly() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let (x, y) = samples();
    let shift = Tensor::from_slice(&[0.5f32, -0.5, 0.0], &[3]).unwrap();
    let (mut stepped, mut looped) = (Model::load(common::tiny_model()).unwrap(), Model::load(common::tiny_model()).unwrap());
    state.prepare_model(&mut stepped, None).unwrap();
    state.prepare_model(&mut looped, None).unwrap();
    let sgd = Options::from_text(&[("lr", "0.1")]).unwrap();
    let (step_optimizer, mut loop_optimizer) =
        (Optimizer::new(&stepped, "sgd", Some(&sgd)).unwrap(), Optimizer::new(&looped, "sgd", Some(&sgd)).unwrap());
    let clipped = Options::from_text(&[("loss", "cross_entropy"), ("max_grad_norm", "0.5")]).unwrap();
    let mut step = TrainStep::new(&stepped, &step_optimizer, Some(&clipped)).unwrap();
    assert_eq!(step.eager_reason(), "no step yet");

    // Each step equals accumulate, forward, the loss, backward, clipping, step and zero_grad by hand.
    for named in [&[][..], &[("shift", &shift)][..], &[][..]] {
        let loss = step.run(&[&x], named, Some(&y)).unwrap().to_vec::<f32>().unwrap();
        state.accumulate().unwrap();
        let logits = looped.forward_named(&[&x], named).unwrap().get_named("logits").unwrap();
        let expected = compute_loss("cross_entropy", &logits, &y, None).unwrap();
        state.backward(&expected).unwrap();
        state.clip_grad_norm(&mut looped, 0.5, 2.0).unwrap();
        loop_optimizer.step().unwrap();
        loop_optimizer.zero_grad().unwrap();
        assert!(loss.len() == 1 && loss[0].is_finite(), "{:?}", loss);
        assert_eq!(loss, expected.to_vec::<f32>().unwrap());
    }
    for index in 0..stepped.num_parameters() {
        assert_eq!(stepped.parameter(index).unwrap().to_vec::<f32>().unwrap(), looped.parameter(index).unwrap().to_vec::<f32>().unwrap());
    }
    let counts: Vec<u64> =
        ["steps", "eager_steps", "replays", "captures", "warmup_steps"].iter().map(|name| step.stat(name).unwrap()).collect();
    assert_eq!(counts, [3, 3, 0, 0, 0]);
    assert_eq!(step.eager_reason(), "cuda_graph is off");
    let unknown = step.stat("loss").err().expect("no such figure");
    assert!(unknown.code() == sys::ACCEL_ERR_INVALID_ARGUMENT && unknown.message().contains("eager_steps"), "{}", unknown);
    assert_eq!(step.run(&[&x], &[], None).err().expect("no target").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    assert_eq!(step.stat("steps").unwrap(), 3, "a refused batch is no step");
    drop(step);

    // On the CPU a step asked to capture a CUDA graph runs eagerly and says why.
    let graphed = Options::from_text(&[("cuda_graph", "true")]).unwrap();
    let mut step = TrainStep::new(&stepped, &step_optimizer, Some(&graphed)).unwrap();
    assert!(step.run(&[&x], &[], Some(&y)).unwrap().to_vec::<f32>().unwrap()[0].is_finite());
    assert!(step.eager_reason().contains("CUDA"), "{}", step.eager_reason());
    assert_eq!((step.stat("eager_steps").unwrap(), step.stat("replays").unwrap()), (1, 0));

    let refused = |pairs: &[(&str, &str)]| TrainStep::new(&stepped, &step_optimizer, Some(&Options::from_text(pairs).unwrap())).err();
    assert_eq!(refused(&[("reduction", "none")]).expect("no scalar loss").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    assert_eq!(refused(&[("max_grad_norm", "-1")]).expect("negative").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    assert_eq!(refused(&[("batch_size", "8")]).expect("a loader's key").code(), sys::ACCEL_ERR_UNKNOWN_OPTION);
    let other = TrainStep::new(&stepped, &loop_optimizer, None).err().expect("another model's optimizer");
    assert_eq!(other.code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    let unprepared = Model::load(common::tiny_model()).unwrap();
    assert_eq!(TrainStep::new(&unprepared, &step_optimizer, None).err().expect("not prepared").code(), sys::ACCEL_ERR_INVALID_STATE);
}

#[test]
fn a_schedule_from_a_function_sets_the_rates_and_reports_its_failures() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let mut model = Model::load(common::tiny_model()).unwrap();
    state.prepare_model(&mut model, None).unwrap();
    let mut optimizer = Optimizer::new(&model, "sgd", Some(&Options::from_text(&[("lr", "0.1")]).unwrap())).unwrap();
    optimizer.set_lr(0, 0.2).unwrap();
    assert_eq!(optimizer.lr(0).unwrap(), 0.2);
    optimizer.set_lr(0, 0.1).unwrap();
    assert_eq!(optimizer.set_lr(0, -1.0).err().expect("negative").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    assert_eq!(optimizer.lr(1).err().expect("one group").code(), sys::ACCEL_ERR_OUT_OF_RANGE);

    let mut halving =
        Scheduler::from_fn(&optimizer, |step| if step < 2 { Ok(0.5f64.powi(step as i32)) } else { Err("step 2 is too far".into()) })
            .unwrap();
    assert_eq!(halving.last_lr(0).unwrap(), 0.1);
    let (x, y) = samples();
    state.accumulate().unwrap();
    let logits = model.forward(&[&x]).unwrap().get(0).unwrap();
    state.backward(&compute_loss("cross_entropy", &logits, &y, None).unwrap()).unwrap();
    optimizer.step().unwrap();
    halving.step().unwrap();
    assert_eq!(halving.last_lr(0).unwrap(), 0.05);
    optimizer.step().unwrap();
    let error = halving.step().err().expect("the function failed");
    assert_eq!(error.code(), sys::ACCEL_ERR_CALLBACK);
    assert!(error.message().ends_with(": step 2 is too far"), "{}", error);

    let refused = Scheduler::from_fn(&optimizer, |_| Err("not even step 0".into())).err().expect("fails at step 0");
    assert!(refused.message().ends_with(": not even step 0"), "{}", refused);
    assert_eq!(Scheduler::new(&optimizer, "zigzag", None).err().expect("unknown").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    assert_eq!(Optimizer::new(&model, "rmsprop", None).err().expect("unknown kind").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
}

#[test]
fn one_cycle_sets_the_momentum_and_a_plateau_steps_with_a_metric() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let mut model = Model::load(common::tiny_model()).unwrap();
    state.prepare_model(&mut model, None).unwrap();
    let adam = Optimizer::new(&model, "adam", None).unwrap();
    assert_eq!(adam.betas(0).unwrap(), (0.9, 0.999));
    let one_cycle_options = Options::from_text(&[("max_lr", "0.1"), ("total_steps", "10")]).unwrap();
    let _one_cycle = Scheduler::new(&adam, "one_cycle", Some(&one_cycle_options)).unwrap();
    assert_eq!(adam.momentum(0).unwrap(), 0.95); // max_momentum, as torch's OneCycleLR sets it

    let mut sgd = Optimizer::new(&model, "sgd", Some(&Options::from_text(&[("lr", "0.1")]).unwrap())).unwrap();
    assert_eq!(sgd.betas(0).err().expect("sgd has no betas").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    let plateau_options = Options::from_text(&[("patience", "0"), ("factor", "0.5")]).unwrap();
    let mut plateau = Scheduler::new(&sgd, "reduce_on_plateau", Some(&plateau_options)).unwrap();
    for metric in [1.0, 2.0] {
        state.accumulate().unwrap();
        let (x, y) = samples();
        let logits = model.forward(&[&x]).unwrap().get(0).unwrap();
        state.backward(&compute_loss("cross_entropy", &logits, &y, None).unwrap()).unwrap();
        sgd.step().unwrap();
        sgd.zero_grad().unwrap();
        plateau.step_with_metric(metric).unwrap();
    }
    assert_eq!(sgd.lr(0).unwrap(), 0.05); // the metric got worse once: halved
    assert_eq!(plateau.step().err().expect("a plateau needs a metric").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
}

#[test]
fn losses_are_computed_with_their_options() {
    let input = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let target = Tensor::from_slice(&[1.0f32, 1.0, 1.0], &[3]).unwrap();
    assert_eq!(compute_loss("mse", &input, &target, None).unwrap().to_vec::<f32>().unwrap(), [5.0 / 3.0]);
    let sum = Options::from_text(&[("reduction", "sum")]).unwrap();
    assert_eq!(compute_loss("l1", &input, &target, Some(&sum)).unwrap().to_vec::<f32>().unwrap(), [3.0]);
    assert_eq!(compute_loss("hinge", &input, &target, None).err().expect("unknown").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
}

#[test]
fn no_sync_and_item_count_backward_on_one_process() {
    let _one = common::one_test_at_a_time();
    let state = State::new(None).unwrap();
    let (x, y) = samples();
    let mut model = Model::load(common::tiny_model()).unwrap();
    state.prepare_model(&mut model, None).unwrap();
    let summed = Options::from_text(&[("reduction", "sum")]).unwrap();
    let loss_of = |model: &Model| {
        let logits = model.forward(&[&x]).unwrap().get_named("logits").unwrap();
        compute_loss("cross_entropy", &logits, &y, Some(&summed)).unwrap()
    };
    state
        .no_sync(&mut model, |model| {
            state.accumulate().unwrap();
            state.backward_with_items(&loss_of(model), 16).unwrap();
            let nested = state.no_sync(model, |_| ()).err().expect("already in no_sync");
            assert_eq!(nested.code(), sys::ACCEL_ERR_INVALID_STATE);
        })
        .unwrap();
    let error = state.backward_with_items(&loss_of(&model), 0).err().expect("no items");
    assert_eq!(error.code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
}

#[test]
fn registered_objects_are_saved_restored_and_report_their_failures() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let _one = common::one_test_at_a_time();
    let dir = common::scratch_dir("registered");
    let state = State::new(None).unwrap();
    let mut model = Model::load(common::tiny_model()).unwrap();
    state.prepare_model(&mut model, None).unwrap();
    let counter = Arc::new(AtomicU64::new(7));
    let (saved, loaded) = (counter.clone(), counter.clone());
    state
        .register_for_checkpointing(
            "counter",
            move || {
                let value = saved.load(Ordering::SeqCst);
                if value == 99 {
                    return Err("99 cannot be saved".into());
                }
                Ok(value.to_le_bytes().to_vec())
            },
            move |bytes: &[u8]| {
                let mut word = [0u8; 8];
                word.copy_from_slice(bytes);
                loaded.store(u64::from_le_bytes(word), Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
    let duplicate = state.register_for_checkpointing("counter", || Ok(Vec::new()), |_: &[u8]| Ok(()));
    assert_eq!(duplicate.err().expect("already registered").code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    let objects = Checkpointed { models: &[&model], ..Default::default() };
    state.save_state(dir.join("checkpoint"), &objects).unwrap();
    assert!(dir.join("checkpoint/rank0/custom_checkpoint_counter.bin").exists());
    counter.store(8, Ordering::SeqCst);
    state.load_state(dir.join("checkpoint"), &objects).unwrap();
    assert_eq!(counter.load(Ordering::SeqCst), 7);
    counter.store(99, Ordering::SeqCst);
    let error = state.save_state(dir.join("other"), &objects).err().expect("the save function failed");
    assert_eq!(error.code(), sys::ACCEL_ERR_CALLBACK);
    assert!(error.message().ends_with(": 99 cannot be saved"), "{}", error);
    assert!(!dir.join("other").exists());
}

#[test]
fn parts_objects_load_from_the_saving_processes_bytes() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let _one = common::one_test_at_a_time();
    let dir = common::scratch_dir("parts");
    let state = State::new(None).unwrap();
    let counter = Arc::new(AtomicU64::new(7));
    let (saved, loaded) = (counter.clone(), counter.clone());
    state
        .register_parts_for_checkpointing(
            "counter",
            move || Ok(saved.load(Ordering::SeqCst).to_le_bytes().to_vec()),
            move |parts: &mut SavedParts| {
                assert_eq!(parts.count(), 1);
                let beyond = parts.read(1).err().expect("one saving process");
                assert_eq!(beyond.code(), sys::ACCEL_ERR_OUT_OF_RANGE);
                let mut word = [0u8; 8];
                word.copy_from_slice(parts.read(0)?);
                parts.release()?;
                loaded.store(u64::from_le_bytes(word), Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
    state.save_state(dir.join("checkpoint"), &Checkpointed::default()).unwrap();
    assert!(dir.join("checkpoint/rank0/custom_checkpoint_counter.bin").exists());
    counter.store(8, Ordering::SeqCst);
    state.load_state(dir.join("checkpoint"), &Checkpointed::default()).unwrap();
    assert_eq!(counter.load(Ordering::SeqCst), 7);
}
