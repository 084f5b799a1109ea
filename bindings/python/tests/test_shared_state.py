"""The process state as Accelerate's test scripts use it, on one process: a later Accelerator joins the
shared settings it leaves unset; PartialState answers while any Accelerator of the state lives; an
Accelerator whose state was reset refuses to prepare with Accelerate's AttributeError; destroy_process_group
without a state does nothing; distributed_type is settable; join_uneven_inputs as Accelerate has it on each kind of state; a collective's
shape mismatch is Accelerate's DistributedOperationException too (accel.test_utils.scripts.test_ops raises
one on two processes)."""
import warnings

import pytest
import torch

import accel
from accel.errors import CollectiveShapeMismatchError, StateResetError
from accel.state import AcceleratorState, GradientState, PartialState
from accel.utils import DistributedOperationException, DistributedType


@pytest.fixture(autouse=True)
def no_state_left():
    """Each test starts and ends without a process state."""
    AcceleratorState._reset_state()
    yield
    AcceleratorState._reset_state()


def test_a_later_accelerator_joins_the_shared_settings_it_leaves_unset():
    first = accel.Accelerator(cpu=True, mixed_precision="bf16")
    assert accel.Accelerator().mixed_precision == "bf16" == first.mixed_precision
    with pytest.raises(accel.InvalidStateError, match="mixed_precision"):
        accel.Accelerator(mixed_precision="no")


def test_an_accelerators_own_settings_are_not_joined():
    # Accelerate gives an Accelerator that leaves gradient_accumulation_steps unset its default, 1, not the
    # earlier Accelerator's 2; the earlier one keeps its own.
    first = accel.Accelerator(cpu=True, gradient_accumulation_steps=2)
    assert accel.Accelerator(cpu=True).gradient_accumulation_steps == 1
    assert first.gradient_accumulation_steps == 2


def test_the_state_answers_while_any_accelerator_of_it_lives():
    outer = accel.Accelerator(cpu=True)

    def make_and_drop():
        accel.Accelerator(cpu=True).wait_for_everyone()

    make_and_drop()
    state = PartialState()
    assert state._accelerator is outer and state.num_processes == 1


def test_an_accelerator_whose_state_was_reset_refuses_to_prepare():
    accelerator = accel.Accelerator(cpu=True)
    AcceleratorState._reset_state()
    with pytest.raises(AttributeError, match=r"`AcceleratorState._reset_state\(\)` was called") as raised:
        accelerator.prepare(torch.nn.Linear(1, 1))
    assert isinstance(raised.value, StateResetError) and isinstance(raised.value, accel.InvalidStateError)


def test_after_a_reset_every_use_of_an_old_accelerator_says_so_and_other_names_are_plain_attribute_errors():
    accelerator = accel.Accelerator(cpu=True)
    with pytest.raises(AttributeError, match="^'AcceleratorState' object has no attribute 'someotherthing'$"):
        accelerator.state.someotherthing
    accelerator.state._reset_state()
    for use in (lambda: accelerator.num_processes, lambda: accelerator.device, accelerator.wait_for_everyone):
        with pytest.raises(StateResetError, match=r"`AcceleratorState._reset_state\(\)` was called"):
            use()
    assert repr(accelerator) == "accel.Accelerator(reset)"
    accelerator.state.someotherthing = "kept"  # a new state now, which takes attributes as Accelerate's does
    assert accel.state.AcceleratorState().someotherthing == "kept"


def test_a_partial_state_read_after_a_reset_names_the_reset():
    state = PartialState()
    with pytest.raises(AttributeError, match="^'PartialState' object has no attribute 'someotherthing'$"):
        state.someotherthing
    state._reset_state()
    with pytest.raises(AttributeError, match=r"^`PartialState` object has no attribute `num_processes`\. This happens "
                                             r"if `PartialState._reset_state\(\)` was called"):
        state.num_processes


def test_destroy_process_group_without_a_state_does_nothing():
    accelerator = accel.Accelerator(cpu=True)
    state = accelerator.state
    AcceleratorState._reset_state()
    state.destroy_process_group()
    assert not state.initialized


@pytest.mark.parametrize("kind", [DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU])
def test_join_uneven_inputs_as_accelerate_has_it_on_each_kind_of_state(kind):
    accelerator = accel.Accelerator(cpu=True)
    model = accelerator.prepare(torch.nn.Linear(1, 1))
    accelerator.state.distributed_type = kind
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with accelerator.join_uneven_inputs([model]) as joined:
            model(torch.ones(2, 1)).sum().backward()
        if kind == DistributedType.MULTI_GPU:  # where Accelerate would join uneven inputs
            with pytest.raises(accel.UnsupportedError, match="even_batches=False"):
                with accelerator.join_uneven_inputs([model], even_batches=False):
                    pass
        else:
            with accelerator.join_uneven_inputs([model], even_batches=False):
                pass
    assert joined is None
    said = [str(warning.message) for warning in caught]
    assert any("only supported for multi-GPU" in message for message in said) == (kind == DistributedType.MULTI_CPU)


def test_distributed_type_is_settable_as_accelerates_until_the_state_is_reset():
    # Accelerate's test_distributed_data_loop swaps it to reach the branch for another backend.
    accelerator = accel.Accelerator(cpu=True)
    state = accelerator.state
    assert state.distributed_type == DistributedType.NO
    state.distributed_type = DistributedType.FSDP
    assert accelerator.distributed_type == DistributedType.FSDP == PartialState().distributed_type
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with accelerator.join_uneven_inputs([]):
            pass
    assert any("only supported for multi-GPU" in str(warning.message) for warning in caught)
    state.distributed_type = DistributedType.NO
    assert accelerator.distributed_type == DistributedType.NO
    state.distributed_type = DistributedType.MULTI_CPU
    AcceleratorState._reset_state()
    assert accel.Accelerator(cpu=True).distributed_type == DistributedType.NO


def test_a_collective_shape_mismatch_is_accelerates_distributed_operation_exception():
    assert issubclass(CollectiveShapeMismatchError, accel.ShapeMismatchError)
    assert issubclass(CollectiveShapeMismatchError, DistributedOperationException)
    assert accel.utils.operations.DistributedOperationException is DistributedOperationException


def test_gradient_accumulation_is_each_accelerators_own_and_both_flags_are_settable():
    first = accel.Accelerator(cpu=True, gradient_accumulation_steps=2)
    second = accel.Accelerator(cpu=True, gradient_accumulation_steps=3)  # as a later Accelerate Accelerator
    assert (first.gradient_accumulation_steps, second.gradient_accumulation_steps) == (2, 3)
    second.gradient_accumulation_steps = 4
    assert GradientState().num_steps == 4 and first.gradient_accumulation_steps == 2
    with pytest.raises(accel.InvalidArgumentError, match="at least 1"):
        second.gradient_accumulation_steps = 0
    model = second.prepare(torch.nn.Linear(2, 1))
    synced = []
    for _ in range(8):
        with second.accumulate(model):
            synced.append(second.sync_gradients)
    assert synced == [False, False, False, True] * 2
    second.sync_gradients = True
    assert GradientState().sync_gradients and first.sync_gradients  # the process's flag
    second.sync_gradients = False
    assert not GradientState().sync_gradients
