"""What torch itself would have given, checked to the bit: shared by collated_batches.py (launched as a
script, its folder on sys.path) and tests/test_data_loader.py (which imports accelerate_scripts._torch_checks).
Not a script: test_accelerate_scripts.py runs none whose name starts with "_"."""
import torch


def same_as_torchs(ours, theirs, where="batch"):
    """ours is theirs to the bit: the same structure, and tensors of the same dtype, shape and strides."""
    assert type(ours) is type(theirs), f"{where}: {type(ours).__name__} where torch gives {type(theirs).__name__}"
    if isinstance(theirs, torch.Tensor):
        assert (ours.dtype, ours.shape, ours.stride()) == (theirs.dtype, theirs.shape, theirs.stride()), where
        assert torch.equal(ours, theirs), where
    elif isinstance(theirs, dict):
        assert list(ours) == list(theirs), where
        for key in theirs:
            same_as_torchs(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), where
        for index, (mine, its) in enumerate(zip(ours, theirs)):
            same_as_torchs(mine, its, f"{where}[{index}]")
    else:
        assert ours == theirs, where
