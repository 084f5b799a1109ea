# The demo's training (examples/train_digits.c) in Julia over the Accel package: the same MLP
# (64-128-128-10, TorchScript from examples/make_mlp.py), the same digits, split, batches, AdamW with a
# cosine schedule and clipping, evaluation through gather_for_metrics. With a Julia toolchain (not on this
# project's machines, where the package's calls are generated from the headers and check_wrappers.py checks
# the wrappers instead):
#
#   LD_LIBRARY_PATH=build/lib build/bin/accel launch --nproc-per-node 2 --cpu --master-port 0 -- \
#       julia --project=bindings/julia/Accel bindings/julia/examples/train_digits.jl MODEL.pt DIGITS.csv.gz [EPOCHS]
using Accel

const PIXELS = 64
const CLASSES = 10
const TEST_ROWS = 360

"""sklearn's digits.csv.gz: 64 pixel values (0..16) and a label per line; pixels scaled to [0, 1]."""
function read_digits(path::AbstractString)
    text = endswith(path, ".gz") ? read(`gzip -dc $path`, String) : read(path, String)
    rows = [parse.(Int, split(line, ',')) for line in split(text, '\n') if count(==(','), line) == PIXELS]
    pixels = Float32[row[p] / 16 for row in rows, p in 1:PIXELS]   # samples along dim 1
    labels = Int64[row[end] for row in rows]
    return pixels, labels
end

"""The C demo's fixed shuffle (splitmix64, Fisher-Yates, seed 0), so every version holds out the same rows."""
function shuffle_rows!(pixels, labels)
    state = UInt64(0)
    for i in length(labels)-1:-1:1                     # 0-based i, as in the C code
        state += 0x9E3779B97F4A7C15
        z = state
        z = (z ⊻ (z >> 30)) * 0xBF58476D1CE4E5B9
        z = (z ⊻ (z >> 27)) * 0x94D049BB133111EB
        j = Int((z ⊻ (z >> 31)) % UInt64(i + 1))
        pixels[i+1, :], pixels[j+1, :] = pixels[j+1, :], pixels[i+1, :]
        labels[i+1], labels[j+1] = labels[j+1], labels[i+1]
    end
end

function main(model_path, data_path, epochs)
    state = State()
    pixels, labels = read_digits(data_path)
    shuffle_rows!(pixels, labels)
    train_rows = length(labels) - TEST_ROWS
    train_set = Dataset(x = pixels[1:train_rows, :], y = labels[1:train_rows])
    test_set = Dataset(x = pixels[train_rows+1:end, :], y = labels[train_rows+1:end])
    train_loader = Loader(state, train_set; batch_size = 32, shuffle = true, data_seed = 42)
    test_loader = Loader(state, test_set; batch_size = 64)

    model = prepare_model!(state, Model(model_path))
    optimizer = Optimizer(model, "adamw"; lr = 0.01, weight_decay = 0.01, no_decay = "*bias")
    single_process_steps = epochs * cld(train_rows, 32)   # Accelerate's rule: sized for one process
    scheduler = Scheduler(optimizer, "cosine"; total_steps = single_process_steps,
                          warmup_steps = div(single_process_steps, 20))

    progress = Progress(state, epochs * num_batches(train_loader); description = "training")
    for epoch in 1:epochs, batch in train_loader
        accumulate!(state)
        loss = compute_loss("cross_entropy", forward(model, batch["x"])[1], batch["y"])
        backward!(state, loss)
        sync_gradients(state) && clip_grad_norm!(state, model, 1.0)
        step!(optimizer); step!(scheduler); zero_grad!(optimizer)
        update!(progress, 1, Array(loss)[])
    end
    close(progress)

    train!(model, false)
    correct = counted = 0
    for batch in test_loader
        logits = Array(evaluate(model, batch["x"])[1])            # samples along dim 1
        predictions = Int64[argmax(logits[row, :]) - 1 for row in 1:size(logits, 1)]
        all_predictions = Array(gather_for_metrics(state, Tensor(predictions)))
        all_labels = Array(gather_for_metrics(state, batch["y"]))
        correct += count(all_predictions .== all_labels)
        counted += length(all_predictions)
    end
    print_main(state, "test accuracy: $(round(correct / counted, digits = 2)) ($correct of $counted)")
    shutdown(state)
end

main(ARGS[1], ARGS[2], length(ARGS) > 2 ? parse(Int, ARGS[3]) : 20)
