"""The Accelerator's checkpoints: save_state / load_state, their pre-hooks, register_for_checkpointing."""
import os
import pickle
import sys

from ._checkpoint_hooks import HookFiles, HookHandle
from ._library import ffi, lib
from ._sizes import convert_file_size_to_int
from .errors import AccelIOError, InvalidArgumentError, check
from .model import Model


def _size_in_bytes(size):
    """max_shard_size in bytes (accel._sizes), refusing 0."""
    try:
        value = convert_file_size_to_int(size)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"max_shard_size {size!r} is not a positive number of bytes: give an int or a string "
                         "with a unit, such as '10GB' or '500MiB'")
    return value


class _SinkFile:
    """What torch.save and pickle.dump write into while a registered object is saved: each write goes to the
    library's sink (accel_sink_write copies it), valid for the length of the save callback."""

    def __init__(self, sink):
        self._sink = sink

    def write(self, data):
        view = memoryview(data)
        check(lib.accel_sink_write(self._sink, ffi.from_buffer(view), view.nbytes))
        return view.nbytes

    def flush(self):
        pass


class _SavedParts:
    """The bytes each process that saved a registered object wrote (accel_parts_t), during its load callback."""

    def __init__(self, parts):
        self._parts = parts

    def count(self):
        return lib.accel_parts_count(self._parts)

    def read(self, part):
        """The bytes process `part` saved (copied: the library's copy is dropped at once, so that one part is
        not held twice while it is parsed)."""
        data, size = ffi.new("const void **"), ffi.new("size_t *")
        check(lib.accel_parts_read(self._parts, part, data, size))
        copied = ffi.buffer(data[0], size[0])[:]
        check(lib.accel_parts_release(self._parts))
        return copied


class CheckpointingMixin:
    """The Accelerator's save and load methods."""

    def save(self, obj, f, safe_serialization=False):
        """Accelerate's save: torch.save(obj, f) (safe_serialization: obj, a dict of tensors, as a
        safetensors file) by the main process, or by each machine's main process with
        project_configuration.save_on_each_node."""
        from .utils.other import save
        save(obj, f, save_on_each_node=self.project_configuration.save_on_each_node,
             safe_serialization=safe_serialization)

    def save_model(self, model, save_directory, max_shard_size="10GB", safe_serialization=True):
        """Accelerate's save_model: the unwrapped model's weights in save_directory (created if missing), up to
        max_shard_size (bytes, or a string such as "10GB", "500MB", "2GiB") in model.safetensors, above it in
        model-0000i-of-0000N shards with model.safetensors.index.json; safe_serialization=False: the same
        with torch.save, pytorch_model.bin or pytorch_model-0000i-of-0000N.bin with
        pytorch_model.bin.index.json. Tied weights are stored once in safetensors. load_checkpoint_in_model
        reads them back (Model.load_weights the safetensors of a prepared model).

        A model this Accelerator prepared is written as safetensors by the library, from the main process
        while the others wait (collective); under zero_stage 3 the processes gather its units one at a time
        while the main process writes them, so that no process holds the whole model. Any other torch module (one never prepared, or a dispatched model
        whose offloaded weights are read back through its hooks), and every torch.save, is written by the
        main process (each machine's with project_configuration.save_on_each_node) as Accelerate writes it;
        the others do not wait. A save_directory that is a file is an AccelIOError."""
        shard_bytes = _size_in_bytes(max_shard_size)
        torch = sys.modules.get("torch")
        is_module = torch is not None and isinstance(model, torch.nn.Module)
        if isinstance(model, Model) or not (is_module and self._writes_in_python(model, safe_serialization)):
            handle = self._accel_model(model, "save_model")
            if not safe_serialization:
                raise ValueError("save_model(safe_serialization=False) writes torch.save's files from a torch "
                                 "module: an accel.Model's weights are saved as safetensors only")
            check(lib.accel_state_save_model(self.pointer, handle.pointer, str(save_directory).encode(),
                                             shard_bytes))
            return
        from .utils.checkpoint_files import write_checkpoint
        from .utils.other import _without_shared_tensors
        save_directory = os.fspath(save_directory)
        if os.path.isfile(save_directory):
            raise AccelIOError(lib.ACCEL_ERR_IO, f"save_model: the path {save_directory!r} is a file; give the "
                                                 "folder to write the model's files into")
        os.makedirs(save_directory, exist_ok=True)
        state_dict = self._state_dict_to_save(model)
        if safe_serialization:
            state_dict = _without_shared_tensors(state_dict)
        writes = self.is_local_main_process if self.project_configuration.save_on_each_node else self.is_main_process
        if writes:
            write_checkpoint(state_dict, save_directory, shard_bytes, safe_serialization)

    def _writes_in_python(self, module, safe_serialization):
        """Whether save_model writes this torch module itself (not the library): with torch.save, when no
        Accelerator prepared it, or when hooks offload some of its weights."""
        from .utils.modeling import offloads
        hosted = None if self._torch_objects is None else self._torch_objects.hosted_of(module)
        return not safe_serialization or hosted is None or any(offloads(sub) for sub in module.modules())

    def _state_dict_to_save(self, module):
        """The unwrapped module's state dict, its offloaded weights read back through their hooks (on the
        CPU); RuntimeError when weights are on the meta device with no hook to read them."""
        from .utils.modeling import get_state_dict_offloaded_model, offloads
        hosted = None if self._torch_objects is None else self._torch_objects.hosted_of(module)
        if hasattr(hosted, "whole_state_dict"):
            return self.get_state_dict(module)
        module = self.unwrap_model(module)
        if any(offloads(sub) for sub in module.modules()):
            return get_state_dict_offloaded_model(module)
        if any(parameter.device.type == "meta" for parameter in module.parameters()):
            raise RuntimeError("You can't save the model since some parameters are on the meta device.")
        return module.state_dict()

    # --- checkpoints: every object prepared by this accelerator, in preparation order -------------------

    def _prepared_arrays(self, models=None):
        """The prepared objects as the C arrays accel_state_save_state and load_state take, with counts;
        models: the accel Models to carry when not all (a pre-hook took some out)."""
        arguments = []
        models = self._accel_models if models is None else models
        for objects, array_type in ((models, "accel_model_t *[]"), (self._accel_optimizers, "accel_optimizer_t *[]"),
                                    (self._accel_schedulers, "accel_scheduler_t *[]"), (self._loaders, "accel_loader_t *[]")):
            arguments += [ffi.new(array_type, [prepared.pointer for prepared in objects]), len(objects)]
        return arguments

    def save_state(self, output_dir=None, safe_serialization=True, **save_model_func_kwargs):
        """Accelerate's save_state: every prepared model, optimizer, scheduler and data loader, the grad
        scaler, each rank's random generators and the accumulation step, into output_dir (collective;
        written to a temporary folder, then moved into place); returns the folder. The next numbered
        checkpoint of the project, project_dir/checkpoints/checkpoint_<project_configuration.iteration>,
        when project_configuration.automatic_checkpoint_naming is on (output_dir is then ignored, as in
        Accelerate) or output_dir is None, keeping at most total_limit of them. Call it on every process:
        under `if accelerator.is_main_process:` it fails on every rank within seconds ("collectives out of
        step") rather than hanging until the timeout. Models are always stored as safetensors, whatever
        safe_serialization says (the checkpoint's format is the library's); save_model_func_kwargs are
        DeepSpeed's and FSDP's savers' and are refused (TypeError)."""
        if save_model_func_kwargs:
            raise TypeError(f"save_state() got unexpected keyword arguments {sorted(save_model_func_kwargs)} "
                            "(they go to DeepSpeed's or FSDP's own savers, which accel does not use)")
        numbered = output_dir is None or self.project_configuration.automatic_checkpoint_naming
        directory = self._numbered_checkpoint() if numbered else str(output_dir)
        self._follow_state_dict_type()
        if not self._save_state_pre_hooks:
            self._checkpoint_call(lib.accel_state_save_state, None if numbered else directory)
            return directory
        hook_files = HookFiles(self, directory)
        models = self._models_after_save_hooks(hook_files.directory)
        with hook_files:
            self._checkpoint_call(lib.accel_state_save_state, None if numbered else directory, models)
        return directory

    def _follow_state_dict_type(self):
        """FSDP's state_dict_type as it is now (set_state_dict_type may have changed it since prepare): how
        each model's file is written, whole or a piece per process."""
        if self._fsdp_plugin is not None:
            for model in self._accel_models:
                model.set_checkpoint_model(self._fsdp_plugin.checkpoint_model())

    def _numbered_checkpoint(self):
        """The folder of the next numbered checkpoint, after giving the library project_configuration's
        iteration (which a user may have set)."""
        if not self.project_configuration.project_dir:
            raise ValueError("save_state() without a folder (or with automatic_checkpoint_naming) writes the "
                             "project's next numbered checkpoint, and this Accelerator has no project_dir: give "
                             "Accelerator(project_dir=...) or a ProjectConfiguration with one")
        check(lib.accel_state_set_checkpoint_iteration(self.pointer, int(self.project_configuration.iteration)))
        return os.path.join(self.project_configuration.project_dir, "checkpoints",
                            f"checkpoint_{self.project_configuration.iteration}")

    def _checkpoint_call(self, function, directory, models=None):
        """A save or load of the prepared objects (folder None: the library's numbered one), then
        project_configuration.iteration brought level with the library's."""
        try:
            check(function(self.pointer, ffi.NULL if directory is None else str(directory).encode(),
                           *self._prepared_arrays(models)), self._checkpoint_callbacks)
        finally:
            self.project_configuration.iteration = lib.accel_state_checkpoint_iteration(self.pointer)

    @property
    def project_dir(self):
        return self.project_configuration.project_dir

    @property
    def logging_dir(self):
        return self.project_configuration.logging_dir

    @property
    def save_iteration(self):
        return self.project_configuration.iteration

    def save_state_async(self, output_dir=None):
        """save_state in the background: the objects are captured before it returns (the models' tensors
        copied to host memory, about one checkpoint's size), then a thread writes them and moves the
        checkpoint into place once every rank's part is written, while training goes on. A save already in
        flight is waited for first. A failure in the background is raised once, by the next save_state,
        save_state_async, load_state or wait_for_save (which wait for it), or by backward or an optimizer
        step, which then do nothing else; the previous checkpoint stays."""
        if self._save_state_pre_hooks:
            raise ValueError("save_state pre-hooks run with save_state only: the files they write join a "
                             "checkpoint once it is in place, which save_state_async does later")
        numbered = output_dir is None or self.project_configuration.automatic_checkpoint_naming
        directory = self._numbered_checkpoint() if numbered else str(output_dir)
        self._follow_state_dict_type()
        self._checkpoint_call(lib.accel_state_save_state_async, None if numbered else directory)
        return directory

    def wait_for_save(self):
        """Waits for the background save in flight, if any; raises its failure if nothing reported it."""
        check(lib.accel_state_wait_for_save(self.pointer))

    def load_state(self, input_dir=None, **load_model_func_kwargs):
        """Restores what save_state wrote (without input_dir: project_dir's highest-numbered checkpoint)
        into the objects prepared in the same order; everything is checked first, so on an error nothing
        has changed. project_configuration.iteration then follows the loaded numbered checkpoint (its number
        + 1), where Accelerate leaves it. load_model_func_kwargs: Accelerate's map_location (None, "cpu" or
        "on_device") changes nothing, as tensors go where the prepared objects are; anything else is
        refused (TypeError)."""
        map_location = load_model_func_kwargs.pop("map_location", None)
        if map_location not in (None, "cpu", "on_device"):
            raise TypeError(f"Unsupported optimizer map location passed, please choose one of `None`, "
                            f"`'cpu'`, or `'on_device'`. Got {map_location!r}")
        if load_model_func_kwargs:
            raise TypeError(f"load_state() got unexpected keyword arguments {sorted(load_model_func_kwargs)} "
                            "(they go to DeepSpeed's or FSDP's own loaders, which accel does not use)")
        models = self._models_after_load_hooks(input_dir)
        try:
            self._checkpoint_call(lib.accel_state_load_state, input_dir, models)
        except InvalidArgumentError as error:
            if self.dataloader_config.use_stateful_dataloader and any(
                    getattr(loader, "_python_plan", False) for loader in self._dataloaders):
                error.add_note("(accel: a prepared DataLoader that this package plans (on one process, one that "
                               "shuffles without a seedable sampler, as Accelerate's) keeps its place among the "
                               "process's own objects, which move to no other number of processes; with "
                               "DataLoaderConfiguration(use_seedable_sampler=True) the library plans it, and its "
                               "place moves)")
            raise

    def register_save_state_pre_hook(self, hook):
        """Accelerate's register_save_state_pre_hook: save_state first calls hook(models, weights,
        output_dir), models being the prepared models in preparation order (a torch module as the user made
        it, or an accel.Model) and weights their state_dicts. A model whose entry the hook removes from
        weights (weights.pop(), when it saves the model its own way) is left out of the checkpoint, as
        Accelerate leaves it out; load it back with a load_state pre-hook that removes it from models.
        Editing a state_dict in place changes nothing saved: the model's tensors are. output_dir is a folder
        beside the checkpoint ("<folder>.hook_files"): what the hooks write there is moved into the
        checkpoint once it is in place (the checkpoint itself goes into place whole, so it cannot be written
        into before); a name that clashes with a checkpoint file is a ValueError. The hooks do not run with
        save_state_async (ValueError). Returns a handle whose remove() unregisters the hook."""
        return HookHandle(self._save_state_pre_hooks, hook)

    def register_load_state_pre_hook(self, hook):
        """Accelerate's register_load_state_pre_hook: load_state first calls hook(models, input_dir); a model
        the hook removes from models (models.pop(), when it loads the model its own way) is not restored from
        the checkpoint. Needs an input_dir, as the save hooks. Returns a handle whose remove() unregisters it."""
        return HookHandle(self._load_state_pre_hooks, hook)

    def _user_models(self):
        """The prepared models as the user knows them (a torch module for a prepared nn.Module)."""
        hosted = {id(h.model): h.module for h in (self._torch_objects.hosted if self._torch_objects else [])}
        return [hosted.get(id(model), model) for model in self._accel_models]

    def _kept_models(self, models, remaining, what):
        """The accel Models whose entries (by identity) are still in remaining, in preparation order."""
        kept = {id(entry) for entry in remaining}
        if len(kept) != len(remaining) or not kept <= {id(entry) for entry in models}:
            raise ValueError(f"a {what} pre-hook may remove entries, not add or replace them")
        return [model for model, entry in zip(self._accel_models, models) if id(entry) in kept]

    def _models_after_save_hooks(self, output_dir):
        models = self._user_models()
        weights = [model.state_dict() for model in models]
        originals = list(weights)
        for hook in list(self._save_state_pre_hooks.values()):
            hook(models, weights, str(output_dir))
        return self._kept_models(originals, weights, "save_state")

    def _models_after_load_hooks(self, input_dir):
        if not self._load_state_pre_hooks:
            return self._accel_models
        if input_dir is None:
            raise ValueError("load_state pre-hooks need an input_dir: accel finds the numbered folder itself")
        models = self._user_models()
        originals = list(models)
        for hook in list(self._load_state_pre_hooks.values()):
            hook(models, str(input_dir))
        return self._kept_models(originals, models, "load_state")

    def register_for_checkpointing(self, *objects):
        """Accelerate's register_for_checkpointing: objects with state_dict() and load_state_dict(state)
        that every later save_state saves and load_state restores, in registration order. Each is stored
        as the pickle of its state_dict() (Accelerate uses torch.save, a pickle too), in each rank's own
        folder: rank<r>/custom_checkpoint_<i>.bin, i counting this accelerator's registrations from 0.
        Unpickling runs arbitrary code: load only checkpoints you trust. A checkpoint must hold exactly the
        registered objects (InvalidArgumentError naming the missing or extra one). An exception raised by
        state_dict() or load_state_dict() comes out of save_state / load_state. The objects are kept
        alive as long as the accelerator, until free_memory() forgets them."""
        invalid = [i for i, obj in enumerate(objects)
                   if not (callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None)))]
        if invalid:
            # Accelerate's wording, which its tests (and so users' checks) read: the index among the invalid ones.
            raise ValueError("All `objects` must include a `state_dict` and `load_state_dict` function to be stored. "
                             "The following inputs are invalid:" +
                             "".join(f"\n\t- Item at index {index}, `{type(objects[i]).__name__}`"
                                     for index, i in enumerate(invalid)))
        for obj in objects:
            self._register_bytes_object(str(len(self._custom_objects)),
                                        lambda file, obj=obj: pickle.dump(obj.state_dict(), file),
                                        lambda data, obj=obj: obj.load_state_dict(pickle.loads(data)))
            self._custom_objects.append(obj)

    def _register_bytes_object(self, name, save, load, parts=False):
        """Registers, under name, an object every save_state and load_state carries: save(file) writes its
        bytes into a file-like object (straight into the library's copy, so an optimizer's state is held
        once more while saving, not twice), load(bytes) restores it from this process's bytes. parts: an
        object any number of processes can load, whose load(saved) reads the saving processes' bytes it
        needs (saved.count(), saved.read(i))."""
        def save_callback(sink, _payload):
            save(_SinkFile(sink))

        def load_callback(data, size, _payload):
            load(ffi.buffer(data, size)[:])

        def load_parts_callback(saved, _payload):
            load(_SavedParts(saved))

        callbacks = self._checkpoint_callbacks
        saving = callbacks.make("accel_save_object_fn", save_callback)
        if parts:
            check(lib.accel_state_register_parts_for_checkpointing(
                self.pointer, name.encode(), saving, callbacks.make("accel_load_parts_fn", load_parts_callback), ffi.NULL))
        else:
            check(lib.accel_state_register_for_checkpointing(
                self.pointer, name.encode(), saving, callbacks.make("accel_load_object_fn", load_callback), ffi.NULL))
