"""Runs a function on several forked processes, each with its own launch environment, as accel.launchers'
debug_launcher and notebook_launcher do: the processes meet through the library's own rendezvous when the
function makes its Accelerator (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...), and a process that fails
stops the others and is named in the error the caller gets.

Forking (not spawning) lets the function be anything the caller has, a notebook's closure or lambda
included, as Accelerate's launchers allow."""
import gc
import multiprocessing
import multiprocessing.connection
import os
import time
import traceback

from . import state

# How long a process asked to stop (SIGTERM) gets before it is killed.
STOP_GRACE_S = 5.0


class LaunchedProcessError(RuntimeError):
    """A launched process failed. .process_index: its rank (RANK); .exitcode: its exit code (negative: killed by
    that signal); .error: "ExceptionType: message" of what the function raised, or "" when the process
    ended without raising (an exit code, a signal); .child_traceback: the text of that exception's
    traceback ("" likewise)."""

    def __init__(self, process_index, num_processes, exitcode, error, child_traceback):
        self.process_index = process_index
        self.exitcode = exitcode
        self.error = error
        self.child_traceback = child_traceback
        if error:
            what = f"raised {error}"
        elif exitcode is not None and exitcode < 0:
            what = f"was killed by signal {-exitcode}"
        else:
            what = f"exited with code {exitcode}"
        message = f"rank {process_index} of {num_processes} {what}"
        if child_traceback:
            message += f"\n\nIts traceback:\n{child_traceback}"
        super().__init__(message)


def refuse_existing_state(launcher_name):
    """ValueError when this process has a live Accelerator, as Accelerate's notebook_launcher refuses one (the
    processes it forks start without a state, but a notebook that made one outside the function most likely
    meant it to train there)."""
    gc.collect()  # an Accelerator only a reference cycle keeps (its prepared torch objects refer to it) is gone
    if state._live_accelerator() is not None:
        raise ValueError(
            f"{launcher_name}: this process already has an Accelerator (or a PartialState), whose state the "
            "launched processes would inherit instead of meeting each other. Make the Accelerator only inside "
            "the launched function, or close the one made outside it first (accelerator.close()); in a notebook, "
            "restart the kernel and make sure no cell makes an Accelerator.")


def run_forked(function, args, environments):
    """Forks one process per entry of environments (a dict each, added to that process's os.environ, with
    its RANK and WORLD_SIZE) and runs function(*args) in each. Returns when every process has ended well; raises
    LaunchedProcessError for the process that failed first, once the others are stopped."""
    environments = list(environments)
    context = multiprocessing.get_context("fork")
    processes, readers = [], []
    try:
        for environment in environments:
            reader, writer = context.Pipe(duplex=False)
            process = context.Process(target=_run_in_child, args=(function, args, environment, writer),
                                      name=f"accel rank {len(processes)}")
            process.start()
            writer.close()  # the child holds the other end: the reader sees EOF when the child is gone
            processes.append(process)
            readers.append(reader)
        reports, failed_at = _wait_for_first_failure(processes, readers)
    finally:
        _stop(processes)
    for rank, reader in enumerate(readers):
        if rank not in reports:
            _receive(reader, rank, reports)
        reader.close()
    if failed_at is not None:
        # The earliest failure is the cause; a process that raised after it most likely saw it (a peer
        # gone), and those stopped here raised nothing.
        times = {rank: report[0] for rank, report in reports.items()}
        times.setdefault(failed_at[0], failed_at[1])
        first = min(times, key=times.get)
        _, error, text = reports.get(first, (None, "", ""))
        raise LaunchedProcessError(int(environments[first]["RANK"]), int(environments[first]["WORLD_SIZE"]),
                                   processes[first].exitcode, error, text)


def _wait_for_first_failure(processes, readers):
    """Waits until every process has ended or one has failed. Returns the failure reports received, by
    rank ((time.monotonic() of the failure, "Type: message", traceback text)), and (rank, time.monotonic())
    of the first process seen to fail, or None when all ended well."""
    reports, running, listening = {}, set(range(len(processes))), dict(enumerate(readers))
    while running:
        ready = multiprocessing.connection.wait(
            [processes[rank].sentinel for rank in running] + list(listening.values()))
        for rank, reader in list(listening.items()):
            if reader in ready and not _receive(reader, rank, reports):
                del listening[rank]
        for rank in list(running):
            if processes[rank].sentinel in ready:
                processes[rank].join()
                running.discard(rank)
                if processes[rank].exitcode != 0:
                    return reports, (rank, time.monotonic())
    return reports, None


def _receive(reader, rank, reports):
    """Reads rank's report into reports if one is there; False when the pipe is closed (the process is
    gone, or was stopped in the middle of sending)."""
    try:
        if reader.poll():
            reports[rank] = reader.recv()
        return True
    except EOFError:
        return False


def _stop(processes):
    """Stops the processes still running: SIGTERM, then SIGKILL after STOP_GRACE_S."""
    alive = [process for process in processes if process.is_alive()]
    for process in alive:
        process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in alive:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _run_in_child(function, args, environment, report):
    """The forked process: its launch environment, the function, and on an exception the report to the
    parent (instead of the traceback on stderr: the parent's error carries it)."""
    os.environ.update(environment)
    state._forget_inherited_states()
    try:
        function(*args)
    except Exception as error:
        report.send((time.monotonic(), f"{type(error).__name__}: {error}", traceback.format_exc()))
        raise SystemExit(1) from None
    finally:
        report.close()
        _release_library_objects()


def _release_library_objects():
    """Frees the library objects the function left alive, as the end of a script would: multiprocessing
    ends a forked process with os._exit, and without this a checkpoint still being written in the
    background (save_state_async) would be cut off. PartialState() keeps its Accelerator in the shared
    state, so that goes first."""
    state.PartialState._shared_state.clear()
    gc.collect()
