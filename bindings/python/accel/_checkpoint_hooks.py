"""save_state / load_state pre-hooks' handles, and the folder beside a checkpoint their files go through."""
import itertools
import os
import shutil


class HookHandle:
    """What register_*_pre_hook return: remove() unregisters the hook (again: nothing), as torch's
    RemovableHandle; also a context manager that removes it on exit."""

    _next_id = itertools.count()

    def __init__(self, hooks, hook):
        if not callable(hook):
            raise TypeError(f"a hook must be callable, not {type(hook).__name__}")
        self._hooks, self.id = hooks, next(self._next_id)
        hooks[self.id] = hook

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.remove()


class HookFiles:
    """The folder save_state's pre-hooks write into ("<output_dir>.hook_files", made afresh by the main
    process), and, around the save (`with`), its entries moved into the checkpoint once it is in place (the
    folder removed, also when the save failed; kept, with a ValueError, when a name clashes)."""

    def __init__(self, accelerator, output_dir):
        self._accelerator, self._target = accelerator, str(output_dir).rstrip("/")
        self.directory = self._target + ".hook_files"
        failure = None
        if accelerator.is_main_process:
            try:
                shutil.rmtree(self.directory, ignore_errors=True)
                os.makedirs(self.directory)
            except OSError as error:
                failure = error
        # Every rank learns whether the folder is there (a barrier would leave the others waiting).
        if accelerator._on_any_process(failure is not None):
            raise failure or OSError(f"the main process could not make {self.directory} for the pre-hooks")

    def __enter__(self):
        return self

    def __exit__(self, failure, *_):
        if failure is not None:  # every rank failed the save (it is all or none): no barrier to meet
            if self._accelerator.is_main_process:
                shutil.rmtree(self.directory, ignore_errors=True)
            return
        self._accelerator.wait_for_everyone()
        clashes = self._move_in() if self._accelerator.is_main_process else []
        self._accelerator.wait_for_everyone()
        if clashes:
            raise ValueError(f"save_state pre-hooks wrote {clashes} in {self.directory}, names the checkpoint "
                             f"{self._target} already has: they were left there, not moved into it")

    def _move_in(self):
        """Moves the hooks' files into the checkpoint and removes the folder; with a clash, moves nothing,
        keeps the folder and returns the clashing names."""
        names = sorted(os.listdir(self.directory))
        clashes = [name for name in names if os.path.exists(os.path.join(self._target, name))]
        if clashes:
            return clashes
        for name in names:
            os.rename(os.path.join(self.directory, name), os.path.join(self._target, name))
        os.rmdir(self.directory)
        return []
