"""The scripts of accelerate_scripts/, written as for Hugging Face Accelerate, run on 1 and 2 processes
started by `accel launch --cpu`: each asserts its own numbers and prints "<name>: ok on <n> processes".
A script names accel only in its import lines (the port from Accelerate is those lines). And ddp_identity:
an eager nn.Module trained by accel on 2 processes ends with the very weights and buffers torch's own
DistributedDataParallel over Gloo gives it (SGD with momentum and AdamW, accumulation 1 and 3); and
zero_identity: the same module ends with the same weights under ZeRO stages 0-3 and FSDP's SHARD_GRAD_OP and FULL_SHARD
(stages 2 and 3 also with random delays before each forward, gradient accumulation and step), stepped by accel's AdamW or
by torch's AdamW or SGD, each process then holding about half of the optimizer's state."""
import os
import pathlib
import re
import subprocess
import sys

import pytest
from conftest import child_environment

HERE = pathlib.Path(__file__).resolve().parent
SCRIPTS = HERE / "accelerate_scripts"
LAUNCHER = os.environ.get("ACCEL_LAUNCHER", str(HERE.parents[2] / "build" / "bin" / "accel"))
IDENTITY_RUNS = ("ddp_identity.py", "zero_identity.py", "zero3_resume.py", "fsdp_mixed_precision.py",
                 "merge_weights.py", "fsdp_checkpointing.py",
                 "fsdp_mixed_dtypes.py", "fsdp_prefetch.py")  # each with a test of its own, below
# The folder's _*.py are modules its scripts share, not scripts.
ACCELERATE_STYLE = sorted(path for path in SCRIPTS.glob("[!_]*.py") if path.name not in IDENTITY_RUNS)


def launch(processes, script, *arguments, failing=False):
    """The script's output; with failing, the run, which must have failed."""
    env = child_environment()
    result = subprocess.run([LAUNCHER, "launch", "--nproc-per-node", str(processes), "--cpu", "--master-port", "0",
                             "--", sys.executable, str(script), *map(str, arguments)],
                            env=env, capture_output=True, text=True, timeout=240)
    assert (result.returncode != 0) == failing, result.stdout + result.stderr
    return result if failing else result.stdout


@pytest.mark.parametrize("script", ACCELERATE_STYLE, ids=lambda path: path.stem)
def test_only_the_imports_name_accel(script):
    imports = re.compile(r"^\s*(from accel(\.\w+)* import |import accel\b)")
    code = re.sub(r'"""(.|\n)*?"""', "", script.read_text())  # docstrings may say what the script checks
    assert [line for line in code.splitlines() if re.search(r"\baccel\b", line) and not imports.match(line)] == []
    assert any(imports.match(line) for line in code.splitlines())


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("script", ACCELERATE_STYLE, ids=lambda path: path.stem)
def test_the_script_runs_and_its_numbers_hold(script, processes, tmp_path):
    output = launch(processes, script, tmp_path / "output")
    assert f"{script.stem}: ok on {processes} processes" in output


def test_an_eager_module_trained_by_accel_ends_with_torch_ddps_weights(tmp_path):
    torch = pytest.importorskip("torch")
    # A process has one state, whose gradient_accumulation_steps is fixed: one launch per value.
    for steps in (1, 3):
        launch(2, SCRIPTS / "ddp_identity.py", "accel", steps, tmp_path / f"accel{steps}.pt")
    launch(2, SCRIPTS / "ddp_identity.py", "ddp", "1,3", tmp_path / "ddp.pt")
    ours = {**torch.load(tmp_path / "accel1.pt"), **torch.load(tmp_path / "accel3.pt")}
    theirs = torch.load(tmp_path / "ddp.pt")
    assert sorted(ours) == ["adamw/1", "adamw/3", "sgd/1", "sgd/3"] and sorted(theirs) == sorted(ours)
    for run in ours:
        assert sorted(ours[run]) == sorted(theirs[run])
        differing = [name for name in ours[run] if not torch.equal(ours[run][name], theirs[run][name])]
        assert differing == [], run


ZERO_RUNS = ("1", "2", "fsdp", "1-offload", "fsdp-offload", "3", "fsdp-full", "fsdp-keep", "fsdp-ckpt", "2-delays",
             "3-delays", "fsdp-post-delays")


def test_an_eager_module_under_zero_stages_one_to_three_ends_with_stage_zeros_weights(tmp_path):
    torch = pytest.importorskip("torch")
    for accumulation in (1, 3):
        for stage in ("0",) + ZERO_RUNS:
            launch(2, SCRIPTS / "zero_identity.py", stage, accumulation, tmp_path / f"zero{stage}.pt")
        runs = {stage: torch.load(tmp_path / f"zero{stage}.pt") for stage in ("0",) + ZERO_RUNS}
        assert sorted(runs["0"]) == ["accel-adamw", "torch-adamw", "torch-sgd"]
        for optimizer, whole in runs["0"].items():
            for stage in ZERO_RUNS:
                weights = runs[stage][optimizer]["weights"]
                assert sorted(weights) == sorted(whole["weights"])
                differing = [name for name in whole["weights"] if not torch.equal(whole["weights"][name], weights[name])]
                assert differing == [], (optimizer, stage, accumulation)
                # Rank 0 holds about half of the optimizer's state (this small model's 64-element alignment
                # gaps make it 0.45; 0.58 under stage 3, whose units are each padded to a multiple of 128).
                ratio = runs[stage][optimizer]["optimizer_state_bytes"] / whole["optimizer_state_bytes"]
                assert 0.4 < ratio < 0.6, (optimizer, stage, accumulation)


def test_stage_three_on_three_processes_ends_with_stage_zeros_weights(tmp_path):
    """zero_identity on 3 processes, where a unit's chunks are thirds and each sum has three terms: DeepSpeed's
    stage 3 (prefetching forward and BACKWARD_PRE), with random delays, and FULL_SHARD with BACKWARD_POST and
    delays, each against stage 0 on 3 processes, bit for bit."""
    torch = pytest.importorskip("torch")
    runs = ("3", "3-delays", "fsdp-post-delays")
    for accumulation in (1, 3):
        for stage in ("0",) + runs:
            launch(3, SCRIPTS / "zero_identity.py", stage, accumulation, tmp_path / f"zero{stage}.pt")
        whole = torch.load(tmp_path / "zero0.pt")
        for stage in runs:
            sharded = torch.load(tmp_path / f"zero{stage}.pt")
            for optimizer, expected in whole.items():
                weights = sharded[optimizer]["weights"]
                differing = [name for name in expected["weights"]
                             if not torch.equal(expected["weights"][name], weights[name])]
                assert differing == [], (optimizer, stage, accumulation)


def test_fsdp_prefetch_starts_the_next_units_gather_and_changes_no_weight(tmp_path):
    """A unit's forward starts the gather of the unit that came next in the previous forward (none in the
    first; a guess the forward then does not take, as step 2's unit 1, is released at its end); a unit's
    backward, of the unit before it in this forward (BACKWARD_PRE as it begins, BACKWARD_POST as it ends)."""
    torch = pytest.importorskip("torch")
    for mode in ("none", "pre", "post"):
        launch(2, SCRIPTS / "fsdp_prefetch.py", mode, tmp_path / f"{mode}.pt")
    runs = {mode: torch.load(tmp_path / f"{mode}.pt") for mode in ("none", "pre", "post")}
    assert runs["none"]["started"] == [{"forward": [], "backward": []}] * 4
    expected = [{"forward": [], "backward": [2, 1, 0]}, {"forward": [1, 2, 3], "backward": [2, 1, 0]},
                {"forward": [1], "backward": [2, 0]}, {"forward": [2, 3], "backward": [2, 1, 0]}]
    for mode in ("pre", "post"):
        assert runs[mode]["started"] == expected, mode
        whole = runs["none"]["weights"]
        assert [name for name in whole if not torch.equal(whole[name], runs[mode]["weights"][name])] == [], mode


@pytest.mark.parametrize("optimizer,plugin", [("accel", "deepspeed"), ("torch", "full"), ("torch", "sharded")])
def test_a_stage_three_checkpoint_resumes_under_another_stage_and_number_of_processes(tmp_path, optimizer, plugin):
    """save_state of a model sharded by ZeRO stage 3 on 2 processes (under FSDP's FULL_STATE_DICT its file
    streamed unit by unit; under DeepSpeed's stage 3 and SHARDED_STATE_DICT each process's pieces; the rest in
    the background) resumes under stage 0 on 1 process, under stage 3 on 3 and under stage 2 on 2, to the
    weights the run that never stopped reached (to 1e-6: the global batch's gradients are summed in another
    grouping); with accel's SGD, and with torch's AdamW and StepLR, whose states are saved per process."""
    pytest.importorskip("torch")
    launch(2, SCRIPTS / "zero3_resume.py", "save", 3, tmp_path, optimizer, plugin)
    assert (tmp_path / "model.safetensors").exists() == (plugin == "full")
    for processes, stage in ((1, 0), (3, 3), (2, 2)):
        assert "zero3_resume: resume" in launch(processes, SCRIPTS / "zero3_resume.py", "resume", stage, tmp_path,
                                                optimizer, plugin)
    if plugin != "full":  # inspect lists the pieces; a process's piece missing: the load fails naming it
        inspect = subprocess.run([LAUNCHER, "checkpoint", "inspect", str(tmp_path)], capture_output=True, text=True)
        assert '"models_in_pieces": [0]' in inspect.stdout and '"rank1/model.safetensors"' in inspect.stdout, inspect.stdout
        (tmp_path / "rank1" / "model.safetensors").unlink()
        failed = launch(1, SCRIPTS / "zero3_resume.py", "resume", 0, tmp_path, optimizer, plugin, failing=True)
        assert "rank1/model.safetensors" in failed.stderr, failed.stderr


def test_a_torch_optimizers_stage_zero_checkpoint_resumes_sharded_on_another_number_of_processes(tmp_path):
    """A torch optimizer's state saved at stage 0 on 1 process (every process holds it whole) resumes under
    stage 3 on 2 processes, each keeping its share, to the weights of the run that never stopped."""
    pytest.importorskip("torch")
    launch(1, SCRIPTS / "zero3_resume.py", "save", 0, tmp_path, "torch")
    assert "zero3_resume: resume" in launch(2, SCRIPTS / "zero3_resume.py", "resume", 3, tmp_path, "torch")


def test_a_checkpoint_in_pieces_of_whole_parameters_resumes_on_another_number_of_processes(tmp_path):
    """SHARD_GRAD_OP with SHARDED_STATE_DICT on 2 processes: every process holds the whole parameters and writes
    an even split of each tensor's elements (buffers whole from process 0); FULL_SHARD on 3 processes and
    NO_SHARD on 1 resume from those pieces to the weights of the run that never stopped."""
    pytest.importorskip("torch")
    launch(2, SCRIPTS / "zero3_resume.py", "save", 2, tmp_path, "torch", "sharded")
    assert not (tmp_path / "model.safetensors").exists()
    for processes, stage in ((3, 3), (1, 0)):
        assert "zero3_resume: resume" in launch(processes, SCRIPTS / "zero3_resume.py", "resume", stage, tmp_path,
                                                "torch", "sharded")


@pytest.mark.parametrize("reduce,processes", [("fp32", 2), ("bf16", 2), ("fp32", 3)])
def test_fsdp_mixed_precision_takes_the_steps_of_fsdps_recipe_bit_for_bit(reduce, processes):
    """FULL_SHARD with mixed_precision_policy param_dtype bf16, reduce_dtype fp32 or bf16 and buffer_dtype bf16,
    torch's AdamW: the fp32 weights of the recipe recomputed in one process (fsdp_mixed_precision.py). On 3
    processes with reduce_dtype fp32 only: the recipe rounds a bf16 sum after each addition, the shared-memory
    transport once."""
    pytest.importorskip("torch")
    assert f"fsdp_mixed_precision: reduce {reduce}: bit for bit" in launch(processes, SCRIPTS / "fsdp_mixed_precision.py",
                                                                           reduce)


def test_accel_checkpoint_merge_gives_stage_zeros_save_model_byte_for_byte(tmp_path):
    """`accel checkpoint merge` of a FULL_SHARD run's checkpoint (whole, or in each process's pieces after
    set_state_dict_type("SHARDED_STATE_DICT")), and of its save_model in shards, writes the
    very model.safetensors a stage 0 save_model of the same weights writes (merge_weights.py: tied weights,
    BatchNorm buffers), though the checkpoint's own file, written unit by unit, orders its tensors otherwise;
    merged into shards, it holds the same tensors; an OUT holding a model, or a source that is none, fails
    naming it."""
    torch = pytest.importorskip("torch")
    from accel.utils.safetensors_io import load_file

    launch(2, SCRIPTS / "merge_weights.py", "sharded", tmp_path)
    launch(1, SCRIPTS / "merge_weights.py", "whole", tmp_path)
    expected = (tmp_path / "stage0" / "model.safetensors").read_bytes()

    def merge(*arguments):
        return subprocess.run([LAUNCHER, "checkpoint", "merge", *map(str, arguments)], capture_output=True, text=True)

    assert (tmp_path / "checkpoint" / "model.safetensors").read_bytes() != expected
    pieces = tmp_path / "checkpoint_pieces"
    assert not (pieces / "model.safetensors").exists()
    assert all((pieces / f"rank{rank}" / "model.safetensors").is_file() for rank in (0, 1))
    for source, out in (("checkpoint", "merged"), ("shards", "merged_shards"), ("checkpoint_pieces", "merged_pieces")):
        result = merge(tmp_path / source, tmp_path / out)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / out / "model.safetensors").read_bytes() == expected, source
    result = merge(tmp_path / "checkpoint", tmp_path / "resharded", "--max-shard-size", "2000")
    assert result.returncode == 0 and "model.safetensors.index.json" in result.stdout, result.stderr
    held = {}
    for folder in ("resharded", "stage0_shards"):
        held[folder] = {}
        for shard in sorted((tmp_path / folder).glob("model-*.safetensors")):
            held[folder].update(load_file(shard))
    assert sorted(held["resharded"]) == sorted(held["stage0_shards"])
    assert all(torch.equal(value, held["stage0_shards"][name]) for name, value in held["resharded"].items())
    # Accelerate's command: the same merge, the checkpoint removed after it with --remove_checkpoint_dir.
    accelerate_style = subprocess.run([LAUNCHER, "merge-weights", str(tmp_path / "shards"), str(tmp_path / "merged_by_name"),
                                       "--remove_checkpoint_dir"], capture_output=True, text=True)
    assert accelerate_style.returncode == 0, accelerate_style.stderr
    assert (tmp_path / "merged_by_name" / "model.safetensors").read_bytes() == expected
    assert not (tmp_path / "shards").exists()
    # And as accelerate.utils.merge_fsdp_weights.
    python = subprocess.run([sys.executable, "-c", "import sys; from accel.utils import merge_fsdp_weights; "
                             "merge_fsdp_weights(sys.argv[1], sys.argv[2])", str(tmp_path / "checkpoint"),
                             str(tmp_path / "merged_in_python")], capture_output=True, text=True, env=child_environment())
    assert python.returncode == 0, python.stderr
    assert (tmp_path / "merged_in_python" / "model.safetensors").read_bytes() == expected
    # Given as Accelerate's SHARDED_STATE_DICT model folder, which accel's checkpoint does not have.
    python = subprocess.run([sys.executable, "-c", "import sys; from accel.utils import merge_fsdp_weights; "
                             "merge_fsdp_weights(sys.argv[1], sys.argv[2])", str(pieces / "pytorch_model_fsdp_0"),
                             str(tmp_path / "merged_accelerate_style")], capture_output=True, text=True,
                            env=child_environment())
    assert python.returncode == 0, python.stderr
    assert (tmp_path / "merged_accelerate_style" / "model.safetensors").read_bytes() == expected
    refused = subprocess.run([LAUNCHER, "merge-weights", str(tmp_path / "checkpoint"), str(tmp_path / "pickled"),
                              "--unsafe_serialization"], capture_output=True, text=True)
    assert refused.returncode == 2 and "writes model.safetensors" in refused.stderr
    refused = merge(tmp_path / "checkpoint", tmp_path / "stage0")
    assert refused.returncode == 1 and "holds a saved model already (model.safetensors)" in refused.stderr
    refused = merge(tmp_path / "stage0" / "nothing", tmp_path / "elsewhere")
    assert refused.returncode == 1 and "is not a directory" in refused.stderr


@pytest.mark.parametrize("optimizer", ["torch", "accel"])
def test_activation_checkpointing_of_nested_units_keeps_data_parallel_weights(optimizer, tmp_path):
    """FULL_SHARD with activation_checkpointing, blocks and their Linears each a unit (a recomputed block
    gathers its Linears again inside backward), and a forward with gradients between each backward and step:
    the weights of data parallelism without checkpointing, bit for bit."""
    torch = pytest.importorskip("torch")
    for mode in ("full", "ddp"):
        launch(2, SCRIPTS / "fsdp_checkpointing.py", mode, optimizer, tmp_path / f"{mode}.pt")
    full, ddp = torch.load(tmp_path / "full.pt"), torch.load(tmp_path / "ddp.pt")
    assert sorted(full) == sorted(ddp) and [name for name in ddp if not torch.equal(full[name], ddp[name])] == []


def test_a_unit_of_two_dtypes_is_split_and_keeps_data_parallel_weights(tmp_path):
    """FULL_SHARD with NO_WRAP over an fp32 and an fp64 Linear (FSDP's "uniform dtype" refusal): a unit per
    dtype, the weights of data parallelism bit for bit (fsdp_mixed_dtypes.py)."""
    torch = pytest.importorskip("torch")
    for mode in ("full", "ddp"):
        launch(2, SCRIPTS / "fsdp_mixed_dtypes.py", mode, tmp_path / f"{mode}.pt")
    full, ddp = torch.load(tmp_path / "full.pt"), torch.load(tmp_path / "ddp.pt")
    assert sorted(full) == sorted(ddp) and [name for name in ddp if not torch.equal(full[name], ddp[name])] == []
