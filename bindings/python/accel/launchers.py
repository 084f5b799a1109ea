"""accel.launchers: Accelerate's debug_launcher and notebook_launcher, which run a training function on
several processes of this machine without `accel launch`: the processes are forked from this one (so the
function may be a notebook's), each told its rank through the launch environment (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and meet through the library's rendezvous when
the function makes its Accelerator. They run on the CPU.

The Accelerator must be made inside the function: a process has one state, which forked processes would
inherit (ValueError if this process has one). A function that raises in any process fails the launch
with LaunchedProcessError naming that process, once the others are stopped."""
import os
import secrets
import socket
import sys
import warnings

from ._forked_processes import LaunchedProcessError, refuse_existing_state, run_forked
from ._library import lib
from .errors import UnsupportedError
from .utils.dataclasses import PrecisionType
from .utils.environment import patch_environment

__all__ = ["LaunchedProcessError", "debug_launcher", "notebook_launcher"]


def debug_launcher(function, args=(), num_processes=2):
    """Runs function(*args) on num_processes forked processes on the CPU, without mixed precision, for
    debugging and tests (not meant for real training, as Accelerate says of its own). Each process's
    Accelerator sees num_processes processes and its own process_index. The processes meet on a free
    port of 127.0.0.1 (Accelerate's meet through a temporary file; a fixed port could be taken). An Accelerator
    of the calling process stays its own: the launched processes start without a state (Accelerate's
    inherit the caller's)."""
    _check_count("num_processes", num_processes)
    run_forked(function, args, _rank_environments(
        num_processes=num_processes, node_rank=0, num_nodes=1, master_addr="127.0.0.1", master_port=_free_port(),
        mixed_precision="no", restart_count=0))


def notebook_launcher(function, args=(), num_processes=None, mixed_precision="no", use_port="29500",
                      master_addr="127.0.0.1", node_rank=0, num_nodes=1, rdzv_backend="static", rdzv_endpoint="",
                      rdzv_conf=None, rdzv_id="none", max_restarts=0, monitor_interval=0.1,
                      log_line_prefix_template=None):
    """Runs function(*args) on num_processes forked processes of this machine, on the CPU, as Accelerate's
    notebook_launcher does on a machine's GPUs; with num_processes=1 (on one node), in this process.

    mixed_precision: "no", "fp16" or "bf16", the processes' default (ACCEL_MIXED_PRECISION: an Accelerator
    given none takes it). use_port, master_addr: where the processes meet (rank 0 listens there). Several
    machines (num_nodes > 1), each calling notebook_launcher with its node_rank: ranks node_rank *
    num_processes + i, meeting at master_addr:use_port (or rdzv_endpoint, "host:port"), the static
    rendezvous; export the same ACCEL_JOB_KEY on every machine. max_restarts: after a failure, every process
    of this machine is started again, up to that many times, ACCEL_RESTART_COUNT telling them the attempt.
    rdzv_id names the run, which the static rendezvous does not need. monitor_interval: a failed process is
    noticed when it ends, with no polling period.

    Not available (UnsupportedError when given): TPUs (a Colab or Kaggle notebook with TPU_NAME set),
    rdzv_backend other than "static", rdzv_conf, log_line_prefix_template."""
    _refuse_unsupported(rdzv_backend, rdzv_conf, log_line_prefix_template)
    try:
        mixed_precision = PrecisionType(str(mixed_precision).lower()).value
    except ValueError:
        raise ValueError(f"Unknown mixed_precision mode: {mixed_precision}. Choose between "
                         f"{[precision.value for precision in PrecisionType]}.") from None
    if num_processes is None:
        raise ValueError("You have to specify the number of processes you would like to use, add "
                         "`num_processes=...` to your call.")
    _check_count("num_processes", num_processes)
    _check_count("num_nodes", num_nodes)
    if not 0 <= node_rank < num_nodes:
        raise ValueError("The node_rank must be less than the number of nodes.")
    if not isinstance(max_restarts, int) or max_restarts < 0:
        raise ValueError(f"max_restarts must be an int >= 0, not {max_restarts!r}")
    if num_processes * num_nodes == 1:
        print("Launching training on CPU.")
        with patch_environment(accel_mixed_precision=mixed_precision):
            function(*args)
        return
    master_addr, master_port = _meeting_point(master_addr, use_port, rdzv_endpoint)
    refuse_existing_state("notebook_launcher")
    print(f"Launching training on {num_processes} CPU processes.")
    for restart_count in range(max_restarts + 1):
        environments = _rank_environments(num_processes=num_processes, node_rank=node_rank, num_nodes=num_nodes,
                                          master_addr=master_addr, master_port=master_port,
                                          mixed_precision=mixed_precision, restart_count=restart_count)
        try:
            run_forked(function, args, environments)
            return
        except LaunchedProcessError as failure:
            if restart_count == max_restarts:
                raise
            print(f"notebook_launcher: {str(failure).splitlines()[0]}; starting all {num_processes} processes "
                  f"again (restart {restart_count + 1} of {max_restarts})", file=sys.stderr)


def _refuse_unsupported(rdzv_backend, rdzv_conf, log_line_prefix_template):
    """UnsupportedError naming what Accelerate's notebook_launcher can do and accel's cannot."""
    def refuse(what):
        raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, f"notebook_launcher: {what}")

    in_kaggle = any(key.startswith("KAGGLE") for key in os.environ)
    if os.environ.get("TPU_NAME") and (in_kaggle or "google.colab" in sys.modules):
        refuse("TPUs (TPU_NAME is set in this notebook): accel runs on CPUs and GPUs only")
    if rdzv_backend != "static":
        refuse(f"rdzv_backend={rdzv_backend!r}: accel's processes meet by the static rendezvous only "
               "(master_addr and use_port, or rdzv_endpoint)")
    if rdzv_conf:
        refuse(f"rdzv_conf={rdzv_conf!r}: the static rendezvous takes no configuration")
    if log_line_prefix_template is not None:
        refuse("log_line_prefix_template: the processes' output is not prefixed (they write to this "
               "process's own output)")


def _check_count(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, not {value!r}")


def _meeting_point(master_addr, use_port, rdzv_endpoint):
    """(address, port) where rank 0 listens: rdzv_endpoint's "host:port" when given, as the static
    rendezvous takes it, else master_addr and use_port."""
    address, port = master_addr, use_port
    if rdzv_endpoint:
        address, colon, port = rdzv_endpoint.rpartition(":")
        if not colon or not address:
            raise ValueError(f"rdzv_endpoint={rdzv_endpoint!r} is not \"host:port\"")
        address = address.strip("[]")  # an IPv6 address in brackets
    try:
        number = int(port)
    except ValueError:
        number = 0
    if not 1 <= number <= 65535:
        raise ValueError(f"port {port!r} is not a port number (1 to 65535)")
    return address, number


def _free_port():
    """A port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _rank_environments(num_processes, node_rank, num_nodes, master_addr, master_port, mixed_precision,
                       restart_count):
    """The launch environment of each of this machine's processes, as `accel launch --cpu` gives it."""
    job_key = os.environ.get("ACCEL_JOB_KEY")
    if not job_key:
        if num_nodes > 1:
            warnings.warn(f"no ACCEL_JOB_KEY: rank 0's store will serve anyone who reaches {master_addr}:"
                          f"{master_port}; export the same secret on every machine "
                          "(ACCEL_JOB_KEY=$(openssl rand -hex 16))", stacklevel=3)
        else:
            job_key = secrets.token_hex(16)
    common = {"WORLD_SIZE": str(num_nodes * num_processes), "LOCAL_WORLD_SIZE": str(num_processes),
              "GROUP_RANK": str(node_rank), "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port),
              "ACCEL_USE_CPU": "1", "ACCEL_MIXED_PRECISION": mixed_precision,
              "ACCEL_RESTART_COUNT": str(restart_count),
              "FORK_LAUNCHED": "1"}  # what Accelerate's forked processes are told
    if job_key:
        common["ACCEL_JOB_KEY"] = job_key
    return [{**common, "RANK": str(node_rank * num_processes + local_rank), "LOCAL_RANK": str(local_rank)}
            for local_rank in range(num_processes)]
