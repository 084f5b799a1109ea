# The package on one process: `julia --project=bindings/julia/Accel -e 'import Pkg; Pkg.test()'` with
# libaccel on LD_LIBRARY_PATH (or ACCEL_LIBRARY set). The model tests write an MLP with
# examples/make_mlp.py through ACCEL_PYTHON (default /usr/bin/python3, with torch).
using Accel
using Test

const REPOSITORY = normpath(joinpath(@__DIR__, "..", "..", "..", ".."))

function tiny_mlp(dir)
    path = joinpath(dir, "mlp.pt")
    python = get(ENV, "ACCEL_PYTHON", "/usr/bin/python3")
    run(`$python $(joinpath(REPOSITORY, "examples", "make_mlp.py")) $path 4 8 8 3`)
    return path
end

@testset "Accel" begin
    @testset "version" begin
        major, minor, patch = Accel.version_numbers()
        @test (major, minor) == (Accel.ACCEL_VERSION_MAJOR, Accel.ACCEL_VERSION_MINOR)
        @test Accel.library_version() == VersionNumber(major, minor, patch)
        @test Accel.has_feature("gloo")
        @test "gloo" in Accel.features()
        @test startswith(Accel.torch_version(), "1.13")
    end

    @testset "options and errors" begin
        options = Options(batch_size = 32, shuffle = true, lr = 0.5, mixed_precision = :bf16, data_seed = "7")
        dump = dump_options(options)
        for line in ("batch_size=32 (set)", "shuffle=true (set)", "lr=0.5 (set)", "mixed_precision=bf16 (set)", "data_seed=7 (set)")
            @test line in split(dump, '\n')
        end
        error = try
            set!(options, "no_such_key", 1)
        catch caught
            caught
        end
        @test error isa AccelError
        @test error.code == Accel.ACCEL_ERR_UNKNOWN_OPTION
        @test error.name == "ACCEL_ERR_UNKNOWN_OPTION"
        @test occursin("no_such_key", error.message)
        close(options)
        @test_throws ArgumentError dump_options(options)
    end

    @testset "tensors" begin
        matrix = Float32[1 2 3; 4 5 6]
        tensor = Tensor(matrix)
        @test size(tensor) == (2, 3)
        @test (ndims(tensor), length(tensor), dtype(tensor), element_size(tensor)) == (2, 6, :float32, 4)
        @test Array(tensor) == matrix
        @test Array(Tensor(Int64[5, 6])) == [5, 6]
        @test Array(Tensor(true))[] == true
        shared = unsafe_array(tensor)
        @test shared == matrix
        @test pointer(tensor) == pointer(parent(shared))
        @test_throws AccelError unsafe_array(Tensor([true, false]))  # LibTorch 1.13 exports no bool tensor
    end

    @testset "datasets and loaders" begin
        state = State()
        @test (num_processes(state), process_index(state), is_main_process(state)) == (1, 0, true)
        @test distributed_type(state) == :no
        x = Float32[i + j / 10 for i in 1:10, j in 1:2]
        data = Dataset(x = x, y = collect(Int64, 1:10))
        @test Accel.num_samples(data) == 10
        loader = Loader(state, data; batch_size = 4)
        @test num_batches(loader) == 3
        sizes = [length(Array(batch["y"])) for batch in loader]
        @test sizes == [4, 4, 2]
        @test end_of_dataloader(loader) && remainder(loader) == 2 && epoch(loader) == 1
        first_batch = first(loader)
        @test keys(first_batch) == ["x", "y"]
        @test Array(first_batch["x"]) == x[1:4, :]

        squares = Dataset(5) do index
            (value = Float64(index^2),)
        end
        @test [Array(batch["value"]) for batch in Loader(state, squares; batch_size = 5)] == [[1.0, 4.0, 9.0, 16.0, 25.0]]
        failing = Dataset(3) do index
            index == 2 && throw(DomainError(index, "no item 2"))
            (value = Float64(index),)
        end
        @test_throws DomainError collect(Loader(state, failing; batch_size = 3))
        @test_throws ArgumentError Loader(state, failing; prefetch_threads = 2)

        stream = Dataset(epoch -> ((y = Int64(10 * epoch + i),) for i in 0:4))
        @test Accel.num_samples(stream) === nothing
        streamed = Loader(state, stream; batch_size = 2)
        @test [Array(batch["y"]) for batch in streamed] == [[0, 1], [2, 3], [4]]
        @test [Array(batch["y"]) for batch in streamed] == [[10, 11], [12, 13], [14]]

        given = Loader(state, data; batches = [[10, 1], [5]])
        @test [Array(batch["y"]) for batch in given] == [[10, 1], [5]]
    end

    @testset "dealers" begin
        # BatchSamplerShard(BatchSampler(1:21, 3), 2 processes): rank 1's last batch is padded from the start.
        dealer = shard_dealer(batch_size = 3, num_processes = 2, process_index = 1)
        dealt = vcat([deal!(dealer, start:start+2) for start in 1:3:19]..., finish!(dealer))
        @test dealt == [[4, 5, 6], [10, 11, 12], [16, 17, 18], [1, 2, 3]]
        @test num_batches(dealer, 7, 3) == 4
        @test remainder(dealer) === nothing

        dispatch = dispatch_dealer(num_processes = 2, process_index = 0)
        @test isempty(deal!(dispatch, [1, 2, 3]))
        @test isempty(deal!(dispatch, [4, 5, 6]))
        @test isempty(deal!(dispatch, [7, 8, 9]))
        @test deal!(dispatch, [10]) == [[1, 2, 3]]
        @test finish!(dispatch) == [[7, 8]]
        @test remainder(dispatch) == 4

        error = try
            shard_dealer(batch_size = 3, num_processes = 2, process_index = 5)
        catch caught
            caught
        end
        @test error isa AccelError && error.code == Accel.ACCEL_ERR_INVALID_ARGUMENT
        @test occursin("process_index", error.message)
        close(dealer)
        @test_throws ArgumentError finish!(dealer)
    end

    @testset "collectives on one process" begin
        state = State()
        tensor = Tensor(Float32[1, 2])
        @test Array(gather(state, tensor)) == Float32[1, 2]
        @test Array(reduce_across(state, tensor, :max)) == Float32[1, 2]
        @test gather_bytes(state, "rank zero") == [Vector{UInt8}("rank zero")]
        @test Array(broadcast_from!(state, tensor, 0)) == Float32[1, 2]
        @test size(pad_across_processes(state, tensor)) == (2,)
        @test split_range(state, 10) == (indices = 1:10, padded_count = 10)
        @test main_process_first(() -> 42, state) == 42
        @test [Array(t) for t in reduce_named(state, ["a" => tensor, "b.0" => Tensor(Int64[3])], :sum)] == [Float32[1, 2], Int64[3]]
        @test autocast(() -> 7, state) == 7
        free_memory!(state)
        @test device(send_to_device(state, tensor)) == "cpu"
        error = try
            reduce_across(state, Tensor(Int64[1]), :mean)
        catch caught
            caught
        end
        @test error isa AccelError && error.code == Accel.ACCEL_ERR_DTYPE
    end

    @testset "training" begin
        mktempdir() do dir
            state = State()
            x = Float32[(i * j) % 5 for i in 1:16, j in 1:4]
            y = Int64[argmax(x[i, 1:3]) - 1 for i in 1:16]
            loader = Loader(state, Dataset(x = x, y = y); batch_size = 8)
            model = prepare_model!(state, Model(tiny_mlp(dir)))
            @test parameter_names(model) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]
            @test size(parameter(model, 1)) == (8, 4)
            optimizer = Optimizer(model, "adamw"; lr = 0.05)
            scheduler = Scheduler(optimizer, "linear"; warmup_steps = 2, total_steps = 40)
            init_trackers(state, dir, "run"; config_json = "{\"lr\": 0.05}")
            progress = Progress(state, 40; description = "training")
            loss_of() = Array(compute_loss("cross_entropy", evaluate(model, Tensor(x))[1], Tensor(y)))[]
            before = loss_of()
            train!(model)
            for epoch in 1:20, batch in loader
                accumulate!(state)
                loss = compute_loss("cross_entropy", forward(model, batch["x"])[1], batch["y"])
                backward!(state, loss)
                sync_gradients(state) && clip_grad_norm!(state, model, 1.0)
                step!(optimizer)
                step!(scheduler)
                zero_grad!(optimizer)
                log_metrics(state, (loss = Float64(Array(loss)[]), lr = last_lr(scheduler)), step_count(scheduler))
                update!(progress)
            end
            close(progress)
            train!(model, false)
            @test loss_of() < 0.8 * before
            @test step_count(scheduler) == 40
            @test grad_sync_stat(model, "syncs") == 0  # one process: nothing all-reduced
            @test_throws AccelError grad_sync_stat(model, "overlap")
            @test lr(optimizer) == last_lr(scheduler)
            finish_trackers(state)
            @test countlines(joinpath(dir, "run", "metrics.jsonl")) == 40
            save_model(state, model, joinpath(dir, "saved"))
            @test isfile(joinpath(dir, "saved", "model.safetensors"))
            save_model(state, model, joinpath(dir, "sharded"); max_shard_size=100)
            @test isfile(joinpath(dir, "sharded", "model.safetensors.index.json"))
            load_weights!(model, joinpath(dir, "sharded"))

            halving = Scheduler(optimizer) do step
                step < 1 ? 0.5^step : error("step $step is too far")
            end
            accumulate!(state)
            backward!(state, compute_loss("cross_entropy", forward(model, Tensor(x))[1], Tensor(y)))
            step!(optimizer)
            @test_throws ErrorException step!(halving)
        end
    end

    @testset "a model of the program's tensors" begin
        state = State()
        weight = Tensor(Float32[1 2; 3 4])
        model = prepare_model!(state, Model(["weight" => weight]; buffers = ["running_mean" => Tensor(Float32[0.5, 0.5])]))
        @test parameter_names(model) == ["weight"]
        @test buffer_names(model) == ["running_mean"]
        optimizer = Optimizer(model, "sgd"; lr = 0.5)
        accumulate!(state)
        begin_forward!(model)
        storage = unsafe_array(grad_view(model, 1))  # the backward's gradient, accumulated in place
        storage .+= Float32[2 2; -2 0]
        grad_ready!(model, 1)
        end_backward!(model)
        step!(optimizer)
        @test Array(weight) == Float32[0 1; 4 4]  # the program's tensor, stepped in place
        zero_grad!(optimizer)
        @test all(iszero, Array(grad_view(model, 1)))
        @test Array(grad_scale(state))[] == 1  # no fp16 loss scaling
        @test !unscale_gradients!(state, model)
        update_grad_scale!(state, false)
        @test_throws AccelError grad_ready!(model, 2)
        @test_throws ArgumentError Model(["w" => weight]; trainable = [true, false])
        @test_throws AccelError Model(["w" => weight, "w" => weight])

        # The program's own optimizer: on one process it steps every element, called back by step!.
        steps = Ref(0)
        external = Optimizer(model) do
            steps[] += 1
            steps[] == 2 && error("the second step fails")
        end
        @test pieces(external) == [("weight", 1, 4)]
        value, grad = piece_tensors(external, 1)
        @test size(Array(value)) == (4,) && grad !== nothing
        # One process shards nothing under zero_stage 3: the unit calls say so.
        @test num_units(model) == 0
        @test_throws AccelError unit_numel(model, 0)
        @test_throws AccelError set_units!(model, [0])
        step!(external)
        @test steps[] == 1
        @test_throws ErrorException step!(external)
    end

    @testset "train step" begin
        mktempdir() do dir
            state = State()
            x = Float32[(i * j) % 5 for i in 1:16, j in 1:4]
            y = Int64[argmax(x[i, 1:3]) - 1 for i in 1:16]
            path = tiny_mlp(dir)
            stepped, looped = prepare_model!(state, Model(path)), prepare_model!(state, Model(path))
            step_optimizer, loop_optimizer = Optimizer(stepped, "sgd"; lr = 0.1), Optimizer(looped, "sgd"; lr = 0.1)
            step = TrainStep(stepped, step_optimizer; loss = "cross_entropy", max_grad_norm = 0.5)
            @test eager_reason(step) == "no step yet"
            for _ in 1:3  # each step is accumulate, forward, the loss, backward, clipping, step and zero_grad
                loss = Array(step(x; target = y))[]
                accumulate!(state)
                expected = compute_loss("cross_entropy", forward(looped, x)[1], Tensor(y))
                backward!(state, expected)
                clip_grad_norm!(state, looped, 0.5)
                step!(loop_optimizer)
                zero_grad!(loop_optimizer)
                @test isfinite(loss) && loss == Array(expected)[]
            end
            @test all(Array(parameter(stepped, i)) == Array(parameter(looped, i)) for i in 1:length(parameter_names(stepped)))
            @test [train_step_stat(step, name) for name in ("steps", "eager_steps", "replays", "captures", "warmup_steps")] == [3, 3, 0, 0, 0]
            @test eager_reason(step) == "cuda_graph is off"
            @test_throws AccelError train_step_stat(step, "loss")
            @test_throws AccelError step(x)  # cross_entropy needs a target
            close(step)
            @test_throws ArgumentError eager_reason(step)

            graphed = TrainStep(stepped, step_optimizer; cuda_graph = true)
            @test isfinite(Array(graphed(x; target = y))[])
            @test occursin("CUDA", eager_reason(graphed))  # on the CPU it runs eagerly and says why
            error = try
                TrainStep(stepped, step_optimizer; reduction = "none")
            catch caught
                caught
            end
            @test error isa AccelError && error.code == Accel.ACCEL_ERR_INVALID_ARGUMENT
        end
    end
end
