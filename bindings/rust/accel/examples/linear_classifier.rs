//! A linear classifier whose model is Rust's own: its weights are Rust `Vec`s lent to accel without a copy
//! (`Tensor::from_vec`), its forward and gradient are written by hand here, and accel brings the rest:
//! the loader's shards, rank 0's weights on every rank, the gradient all-reduce (the hand-written
//! gradient is accumulated straight into accel's gradient storage, the buckets themselves with several
//! processes), gradient accumulation and the optimizer, which steps the Rust memory in place.
//!
//!     accel launch --nproc-per-node 2 --cpu --master-port 0 -- target/debug/examples/linear_classifier
//!
//! The data: 3 classes of 4 features (points scattered around a centre per class), made with a fixed seed.
//! Each rank starts from weights of its own seed, so that the copy of rank 0's made by prepare matters.
//! Training: softmax cross-entropy, SGD with momentum, `--batch-size` rows per process and step (16),
//! `--epochs` (4), `--gradient-accumulation-steps` (1). Each epoch prints the mean loss over every rank; the
//! end checks that every rank holds the same weights, prints the training accuracy, and with `--output FILE`
//! the main process writes the weights there (little-endian f32, the weight's rows, then the bias).
//!
//! One process with `--gradient-accumulation-steps 2` trains on the very batches that two processes do
//! (Accelerate's equivalence), to the very same weights: cargo test checks it (tests/host_model.rs).
use std::process::exit;

use accel::{Dataset, Loader, Model, Optimizer, Options, Reduction, State, Tensor};

const FEATURES: usize = 4;
const CLASSES: usize = 3;
const ROWS: usize = 192;

struct Args {
    batch_size: usize,
    epochs: usize,
    accumulation: usize,
    output: Option<std::path::PathBuf>,
}

fn usage() -> ! {
    eprintln!("usage: linear_classifier [--batch-size B] [--epochs E] [--gradient-accumulation-steps K] [--output FILE]");
    exit(2)
}

fn parse_args() -> Args {
    let mut args = Args { batch_size: 16, epochs: 4, accumulation: 1, output: None };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let value = words.next().unwrap_or_else(|| usage());
        let count = || value.parse::<usize>().ok().filter(|n| *n > 0).unwrap_or_else(|| usage());
        match flag.as_str() {
            "--batch-size" => args.batch_size = count(),
            "--epochs" => args.epochs = count(),
            "--gradient-accumulation-steps" => args.accumulation = count(),
            "--output" => args.output = Some(value.clone().into()),
            _ => usage(),
        }
    }
    args
}

/// splitmix64: the same numbers on every rank and every run.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// ROWS points: class c is centred at 2 * e_c (the last feature is noise only).
fn make_data() -> (Vec<f32>, Vec<i64>) {
    let mut random = Random(2024);
    let (mut x, mut y) = (Vec::with_capacity(ROWS * FEATURES), Vec::with_capacity(ROWS));
    for row in 0..ROWS {
        let class = row % CLASSES;
        for feature in 0..FEATURES {
            let centre = if feature == class { 2.0 } else { 0.0 };
            x.push(centre + 1.2 * random.uniform());
        }
        y.push(class as i64);
    }
    (x, y)
}

/// The model: logits = x W^T + b, with W [CLASSES, FEATURES] and b [CLASSES] read in place.
struct Linear<'a> {
    weight: &'a [f32],
    bias: &'a [f32],
}

impl Linear<'_> {
    fn logits(&self, row: &[f32]) -> [f32; CLASSES] {
        let mut logits = [0.0f32; CLASSES];
        for (class, logit) in logits.iter_mut().enumerate() {
            let weights = &self.weight[class * FEATURES..(class + 1) * FEATURES];
            *logit = self.bias[class] + weights.iter().zip(row).map(|(w, x)| w * x).sum::<f32>();
        }
        logits
    }
}

fn softmax(logits: [f32; CLASSES]) -> [f32; CLASSES] {
    let top = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let mut exp = logits.map(|logit| (logit - top).exp());
    let total: f32 = exp.iter().sum();
    exp.iter_mut().for_each(|value| *value /= total);
    exp
}

/// One micro-batch: the mean cross-entropy of its rows (returned), and its gradient divided by the
/// accumulation steps (as Accelerate's backward divides the loss) added into the gradient storage. The
/// bias's gradient is finished first and marked ready first, as autograd would (last layer first).
fn forward_backward(model: &mut Model, parameters: &[Tensor; 2], x: &[f32], y: &[i64], accumulation: usize) -> accel::Result<f32> {
    let rows = y.len();
    // SAFETY: nothing writes the parameters while the micro-batch runs (no optimizer step, no prepare).
    let linear = unsafe { Linear { weight: parameters[0].as_slice::<f32>()?, bias: parameters[1].as_slice::<f32>()? } };
    let scale = 1.0 / (rows * accumulation) as f32;
    let mut loss = 0.0f32;
    // d loss / d logits for each row: (softmax - one-hot) * scale.
    let mut grad_logits = Vec::with_capacity(rows * CLASSES);
    for (row, &label) in x.chunks_exact(FEATURES).zip(y) {
        let probabilities = softmax(linear.logits(row));
        loss -= probabilities[label as usize].ln();
        for (class, probability) in probabilities.iter().enumerate() {
            grad_logits.push((probability - if class == label as usize { 1.0 } else { 0.0 }) * scale);
        }
    }

    // This micro-batch's gradients, then added into the storage, as autograd's AccumulateGrad does.
    let mut bias_grad = [0.0f32; CLASSES];
    for row_grad in grad_logits.chunks_exact(CLASSES) {
        bias_grad.iter_mut().zip(row_grad).for_each(|(sum, g)| *sum += g);
    }
    accumulate_into(&model.grad_view(1)?, &bias_grad)?;
    model.grad_ready(1)?;

    let mut weight_grad = [0.0f32; CLASSES * FEATURES];
    for (row, row_grad) in x.chunks_exact(FEATURES).zip(grad_logits.chunks_exact(CLASSES)) {
        for (class, g) in row_grad.iter().enumerate() {
            let sums = &mut weight_grad[class * FEATURES..(class + 1) * FEATURES];
            sums.iter_mut().zip(row).for_each(|(sum, feature)| *sum += g * feature);
        }
    }
    accumulate_into(&model.grad_view(0)?, &weight_grad)?;
    model.grad_ready(0)?;
    model.end_backward()?;
    Ok(loss / rows as f32)
}

/// Adds `gradient` into a parameter's gradient storage, in place: with several processes the bucket itself.
fn accumulate_into(storage: &Tensor, gradient: &[f32]) -> accel::Result<()> {
    // SAFETY: nothing else touches the storage until grad_ready hands it over to the all-reduce.
    let sums = unsafe { storage.as_mut_slice::<f32>()? };
    sums.iter_mut().zip(gradient).for_each(|(sum, g)| *sum += g);
    Ok(())
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let accumulation = args.accumulation.to_string();
    let state = State::new(Some(&Options::from_text(&[("gradient_accumulation_steps", &accumulation)])?))?;
    let (x, y) = make_data();
    let data = Dataset::from_tensors(&[
        ("x", &Tensor::from_slice(&x, &[ROWS as i64, FEATURES as i64])?),
        ("y", &Tensor::from_slice(&y, &[ROWS as i64])?),
    ])?;
    let batch_size = args.batch_size.to_string();
    let mut loader =
        Loader::new(&state, &data, Some(&Options::from_text(&[("batch_size", &batch_size), ("shuffle", "true"), ("data_seed", "7")])?))?;

    // Rust's memory, lent to accel: each rank its own initial weights until prepare copies rank 0's.
    let mut random = Random(100 + state.process_index() as u64);
    let weight: Vec<f32> = (0..CLASSES * FEATURES).map(|_| 0.1 * random.uniform()).collect();
    let parameters =
        [Tensor::from_vec(weight, &[CLASSES as i64, FEATURES as i64])?, Tensor::from_vec(vec![0.0f32; CLASSES], &[CLASSES as i64])?];
    let mut model = Model::from_tensors(&[("linear.weight", &parameters[0]), ("linear.bias", &parameters[1])], None, &[])?;
    state.prepare_model(&mut model, None)?;
    let mut optimizer = Optimizer::new(&model, "sgd", Some(&Options::from_text(&[("lr", "0.5"), ("momentum", "0.9")])?))?;

    for epoch in 0..args.epochs {
        let (mut loss_sum, mut batches) = (0.0f32, 0usize);
        for batch in &mut loader {
            let batch = batch?;
            state.accumulate()?;
            model.begin_forward(true)?;
            loss_sum += forward_backward(
                &mut model,
                &parameters,
                &batch.get("x")?.to_vec::<f32>()?,
                &batch.get("y")?.to_vec::<i64>()?,
                args.accumulation,
            )?;
            batches += 1;
            optimizer.step()?; // skipped while accumulating
            optimizer.zero_grad()?;
        }
        let mean = state.reduce(&Tensor::from_slice(&[loss_sum / batches as f32], &[1])?, Reduction::Mean)?.to_vec::<f32>()?;
        state.print(&format!("epoch {} loss {:.6}", epoch, mean[0]))?;
    }

    // SAFETY: training is over: nothing writes the parameters any more.
    let (weight, bias) = unsafe { (parameters[0].as_slice::<f32>()?.to_vec(), parameters[1].as_slice::<f32>()?.to_vec()) };
    let everywhere = state
        .gather(&Tensor::from_slice(&[weight.clone(), bias.clone()].concat(), &[1, (weight.len() + bias.len()) as i64])?)?
        .to_vec::<f32>()?;
    let mine = [weight.clone(), bias.clone()].concat();
    for (rank, theirs) in everywhere.chunks_exact(mine.len()).enumerate() {
        if theirs.iter().map(|v| v.to_bits()).ne(mine.iter().map(|v| v.to_bits())) {
            return Err(format!("rank {} holds other weights than rank {}", rank, state.process_index()).into());
        }
    }
    let linear = Linear { weight: &weight, bias: &bias };
    let correct = x.chunks_exact(FEATURES).zip(&y).filter(|(row, &label)| {
        let logits = linear.logits(row);
        (0..CLASSES).max_by(|&a, &b| logits[a].total_cmp(&logits[b])) == Some(label as usize)
    });
    state.print(&format!(
        "weights agree on {} processes; training accuracy {:.3}",
        state.num_processes(),
        correct.count() as f64 / ROWS as f64
    ))?;
    if let (Some(path), true) = (&args.output, state.is_main_process()) {
        let bytes: Vec<u8> = mine.iter().flat_map(|value| value.to_le_bytes()).collect();
        std::fs::write(path, bytes).map_err(|error| format!("cannot write {}: {}", path.display(), error))?;
    }
    Ok(state.shutdown()?)
}

fn main() {
    if let Err(error) = run(&parse_args()) {
        eprintln!("linear_classifier: {}", error);
        exit(1);
    }
}
