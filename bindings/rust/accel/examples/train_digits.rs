//! Trains an MLP (64-128-128-10) on the handwritten digits that Debian's python3-sklearn ships, on as
//! many processes as it is launched on: the Rust twin of examples/train_digits.c.
//!
//!     /usr/bin/python3 examples/make_mlp.py build/demo/digits_mlp.pt 64 128 128 10
//!     accel launch --nproc-per-node 2 --cpu --master-port 0 -- \
//!         target/debug/examples/train_digits --project-dir build/demo
//!
//! The data: 1797 rows of 64 pixel values (0..16) and a label, read from sklearn's digits.csv.gz through
//! `gzip -dc`, pixels scaled to [0, 1], shuffled with a fixed seed (the same splitmix64 shuffle as the C
//! program, so both split alike); the last 360 rows are the test set. Training: AdamW (no decay on
//! biases) with a cosine schedule and warmup, gradients clipped to norm 1, a progress bar, the loss and lr
//! of each step logged to DIR/logs, the mean loss of each epoch over every rank. Evaluation: argmax of
//! the logits, gathered with gather_for_metrics so each test sample counts once. The model is saved to
//! DIR/model/model.safetensors, and the last line printed is the test accuracy.
//!
//! Options: --project-dir DIR (build/demo), --model PATH (DIR/digits_mlp.pt), --data PATH (sklearn's
//! digits.csv.gz, or a plain .csv), --epochs E (20), --lr LR (0.01), --max-steps N (stop after N steps).
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

use accel::{compute_loss, Dataset, Loader, Model, Optimizer, Options, Progress, Reduction, Scheduler, State, Tensor};

const DEFAULT_DATA: &str = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";
const PIXELS: usize = 64;
const CLASSES: usize = 10;
const TEST_ROWS: usize = 360;
const TRAIN_BATCH: i64 = 32; // per process
const TEST_BATCH: i64 = 64; // per process
const TRAIN_DATA_SEED: i64 = 42;
const SPLIT_SEED: u64 = 0;

struct Args {
    project_dir: PathBuf,
    model: Option<PathBuf>,
    data: PathBuf,
    epochs: i64,
    lr: f64,
    max_steps: Option<i64>,
}

fn usage() -> ! {
    eprintln!("usage: train_digits [--project-dir DIR] [--model PATH] [--data PATH] [--epochs E] [--lr LR] [--max-steps N]");
    exit(2)
}

fn parse_args() -> Args {
    let mut args = Args { project_dir: "build/demo".into(), model: None, data: DEFAULT_DATA.into(), epochs: 20, lr: 1e-2, max_steps: None };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let value = words.next().unwrap_or_else(|| usage());
        let number = |minimum: i64| value.parse::<i64>().ok().filter(|n| *n >= minimum).unwrap_or_else(|| usage());
        match flag.as_str() {
            "--project-dir" => args.project_dir = value.clone().into(),
            "--model" => args.model = Some(value.clone().into()),
            "--data" => args.data = value.clone().into(),
            "--epochs" => args.epochs = number(1),
            "--lr" => args.lr = value.parse().ok().filter(|lr: &f64| *lr > 0.0).unwrap_or_else(|| usage()),
            "--max-steps" => args.max_steps = Some(number(0)),
            _ => usage(),
        }
    }
    args
}

/// Rows of 64 pixels (0..16) and a label (0..9), comma-separated, from a .csv or (gzip -dc) a .csv.gz.
fn read_digits(path: &Path) -> Result<(Vec<f32>, Vec<i64>), String> {
    let bytes = if path.extension().map_or(false, |extension| extension == "gz") {
        let output = Command::new("gzip").arg("-dc").arg("--").arg(path).output().map_err(|error| format!("cannot run gzip: {}", error))?;
        if !output.status.success() {
            return Err(format!("`gzip -dc {}` failed ({})", path.display(), output.status));
        }
        output.stdout
    } else {
        std::fs::read(path).map_err(|error| format!("cannot read {}: {}", path.display(), error))?
    };
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for (number, line) in String::from_utf8_lossy(&bytes).lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        let values: Vec<i64> = line.split(',').map(|field| field.trim().parse().unwrap_or(-1)).collect();
        let valid =
            values.len() == PIXELS + 1 && values[..PIXELS].iter().all(|v| (0..=16).contains(v)) && (0..10).contains(&values[PIXELS]);
        if !valid {
            return Err(format!("{}: line {} is not 64 pixel values 0..16 and a label 0..9", path.display(), number + 1));
        }
        pixels.extend(values[..PIXELS].iter().map(|&v| v as f32 / 16.0));
        labels.push(values[PIXELS]);
    }
    if labels.len() <= TEST_ROWS {
        return Err(format!("{} has {} rows; more than {} are needed", path.display(), labels.len(), TEST_ROWS));
    }
    Ok((pixels, labels))
}

/// splitmix64: the small, portable generator of the C program's fixed shuffle.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fisher-Yates over the rows, the same on every rank (fixed seed).
fn shuffle_rows(pixels: &mut [f32], labels: &mut [i64], mut seed: u64) {
    for i in (1..labels.len()).rev() {
        let j = (splitmix64(&mut seed) % (i as u64 + 1)) as usize;
        labels.swap(i, j);
        for column in 0..PIXELS {
            pixels.swap(i * PIXELS + column, j * PIXELS + column);
        }
    }
}

/// "x" float32 [rows, 64] and "y" int64 [rows].
fn dataset(pixels: &[f32], labels: &[i64]) -> accel::Result<Dataset> {
    let rows = labels.len() as i64;
    let x = Tensor::from_slice(pixels, &[rows, PIXELS as i64])?;
    let y = Tensor::from_slice(labels, &[rows])?;
    Dataset::from_tensors(&[("x", &x), ("y", &y)])
}

fn argmax(row: &[f32]) -> i64 {
    (0..row.len()).fold(0, |best, c| if row[c] > row[best] { c } else { best }) as i64
}

/// The whole run; an error's message names the accel function that failed.
fn train(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    // The launcher's environment says how many processes there are and where rank 0 listens.
    let state = State::new(None)?;
    let is_main = state.is_main_process();

    // Data: every rank reads the same file and makes the same split.
    let (mut pixels, mut labels) = read_digits(&args.data)?;
    shuffle_rows(&mut pixels, &mut labels, SPLIT_SEED);
    let train_rows = labels.len() - TEST_ROWS;
    let train_set = dataset(&pixels[..train_rows * PIXELS], &labels[..train_rows])?;
    let test_set = dataset(&pixels[train_rows * PIXELS..], &labels[train_rows..])?;
    let train_options =
        Options::from_text(&[("batch_size", &TRAIN_BATCH.to_string()), ("shuffle", "true"), ("data_seed", &TRAIN_DATA_SEED.to_string())])?;
    let mut train_loader = Loader::new(&state, &train_set, Some(&train_options))?;
    let test_options = Options::from_text(&[("batch_size", &TEST_BATCH.to_string())])?;
    let mut test_loader = Loader::new(&state, &test_set, Some(&test_options))?;

    // Model, optimizer (no weight decay on biases), schedule sized in single-process steps (Accelerate's
    // rule: the scheduler steps once per process for each optimizer step).
    let model_path = args.model.clone().unwrap_or_else(|| args.project_dir.join("digits_mlp.pt"));
    let mut model = Model::load(&model_path).map_err(|error| {
        format!("{}\nwrite the model first: /usr/bin/python3 examples/make_mlp.py {} 64 128 128 10", error, model_path.display())
    })?;
    state.prepare_model(&mut model, None)?;
    let optimizer_options = Options::from_text(&[("lr", &args.lr.to_string()), ("weight_decay", "0.01"), ("no_decay", "*bias")])?;
    let mut optimizer = Optimizer::new(&model, "adamw", Some(&optimizer_options))?;
    let single_process_steps = args.epochs * ((train_rows as i64 + TRAIN_BATCH - 1) / TRAIN_BATCH);
    let schedule = Options::from_text(&[
        ("total_steps", &single_process_steps.to_string()),
        ("warmup_steps", &(single_process_steps / 20).to_string()),
    ])?;
    let mut scheduler = Scheduler::new(&optimizer, "cosine", Some(&schedule))?;

    let config = format!("{{\"lr\": {}, \"epochs\": {}, \"batch_size\": {}, \"optimizer\": \"adamw\"}}", args.lr, args.epochs, TRAIN_BATCH);
    let overwrite = Options::from_text(&[("overwrite", "true")])?;
    state.init_trackers(&args.project_dir, "logs", Some(&config), Some(&overwrite))?;

    let steps_per_epoch = train_loader.length()?.unwrap_or(0);
    let total_steps = args.max_steps.map_or(args.epochs * steps_per_epoch, |max| max.min(args.epochs * steps_per_epoch));
    if is_main {
        println!(
            "digits: {} training rows, {} test rows; MLP 64-128-128-10 ({} parameter tensors); {} process(es) ({}, {})",
            train_rows,
            TEST_ROWS,
            model.num_parameters(),
            state.num_processes(),
            state.distributed_type_name(),
            state.device()
        );
        println!(
            "training: {} epochs of {} steps per process, batch {} per process, adamw lr {}, cosine schedule",
            args.epochs, steps_per_epoch, TRAIN_BATCH, args.lr
        );
    }
    let mut progress = Progress::new(&state, total_steps, Some("training"))?;
    let mut steps = 0;
    for epoch in 0..args.epochs {
        if steps >= total_steps {
            break;
        }
        model.set_training(true)?;
        let (mut loss_sum, mut batches) = (0.0f64, 0i64);
        for batch in &mut train_loader {
            let batch = batch?;
            let (x, y) = (batch.get("x")?, batch.get("y")?);
            state.accumulate()?;
            let logits = model.forward(&[&x]).and_then(|output| output.get(0))?;
            let loss = compute_loss("cross_entropy", &logits, &y, None)?;
            state.backward(&loss)?;
            let sync = state.sync_gradients();
            if sync {
                state.clip_grad_norm(&mut model, 1.0, 2.0)?;
            }
            optimizer.step()?;
            scheduler.step()?;
            optimizer.zero_grad()?;

            let value = f64::from(loss.to_vec::<f32>()?[0]);
            loss_sum += value;
            batches += 1;
            if sync {
                steps += 1;
                let lr = scheduler.last_lr(0)?;
                state.log(&[("loss", value), ("lr", lr)], steps)?;
                progress.update(1, value)?;
            }
            if steps >= total_steps {
                break; // --max-steps: every rank stops at the same step
            }
        }
        // The mean loss over every rank (each rank has as many batches: even_batches).
        let mean = if batches > 0 { (loss_sum / batches as f64) as f32 } else { 0.0 };
        let local = Tensor::from_slice(&[mean], &[1])?;
        let epoch_loss = state.reduce(&local, Reduction::Mean).and_then(|global| global.to_vec::<f32>())?[0];
        let lr = scheduler.last_lr(0)?;
        let early = if batches < steps_per_epoch { "  (stopped early: --max-steps)" } else { "" };
        state.print(&format!("epoch {:2}/{}  loss {:.4}  lr {:.2e}{}", epoch + 1, args.epochs, epoch_loss, lr, early))?;
    }
    drop(progress); // the bar stays, finished

    // Evaluation: predictions and labels of every rank, the samples that pad the last batch dropped.
    model.set_training(false)?;
    let (mut correct, mut counted) = (0usize, 0usize);
    for batch in &mut test_loader {
        let batch = batch?;
        let (x, y) = (batch.get("x")?, batch.get("y")?);
        let logits = model.evaluate(&[&x]).and_then(|output| output.get(0))?;
        let values = logits.to_vec::<f32>()?;
        let predictions: Vec<i64> = values.chunks(CLASSES).map(argmax).collect();
        let predictions = Tensor::from_slice(&predictions, &[predictions.len() as i64])?;
        let all_predictions = state.gather_for_metrics(&predictions).and_then(|t| t.to_vec::<i64>())?;
        let all_labels = state.gather_for_metrics(&y).and_then(|t| t.to_vec::<i64>())?;
        correct += all_predictions.iter().zip(&all_labels).filter(|(p, l)| p == l).count();
        counted += all_labels.len();
    }
    let save_dir = args.project_dir.join("model");
    state.save_model(&model, &save_dir, 0)?;
    if counted != TEST_ROWS {
        return Err(
            format!("evaluation counted {} test samples, not {}: gather_for_metrics dropped or repeated some", counted, TEST_ROWS).into()
        );
    }
    let accuracy = correct as f64 / counted as f64;
    if is_main {
        println!("saved the model to {}", save_dir.join("model.safetensors").display());
        println!("test: {} of {} samples classified correctly", correct, counted);
        println!("test accuracy: {:.2}", accuracy);
    }
    state.log(&[("test_accuracy", accuracy)], steps)?;
    state.finish_trackers()?;
    Ok(state.shutdown()?)
}

fn main() {
    let args = parse_args();
    if let Err(why) = train(&args) {
        eprintln!("train_digits (rank {}): {}", std::env::var("RANK").unwrap_or_else(|_| "0".to_string()), why);
        exit(1);
    }
}
