#include "cli/launch.hpp"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cli/config_file.hpp"
#include "cli/cpu_shares.hpp"
#include "cli/launch_flags.hpp"
#include "cli/launch_options.hpp"
#include "cli/launch_settings.hpp"
#include "cli/python_program.hpp"
#include "cli/rank_environment.hpp"
#include "core/env.hpp"
#include "core/files.hpp"
#include "distributed/shm/shm_names.hpp"

namespace accel::cli {

namespace {

constexpr int kUsageExit = 2;
constexpr int kLauncherErrorExit = 1;
constexpr int kExecFailedExit = 127;

constexpr const char kUsage[] =
    "usage: accel launch [options] PROGRAM [ARGS...]       (accelerate launch train.py --lr 3e-4)\n"
    "       accel launch [options] -m MODULE [ARGS...]\n"
    "       accel launch [options] -- PROGRAM [ARGS...]\n"
    "\n"
    "Starts the processes of a job on this node with the torch.distributed environment\n"
    "(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT).\n"
    "A PROGRAM ending in .py, and a MODULE, run with the Python of the accel package:\n"
    "$ACCEL_PYTHON, else the python3 on PATH when `import accel` works there, else\n"
    "/usr/bin/python3. Any other PROGRAM runs as it is.\n"
    "\n"
    "Each setting comes from, highest first: these options; the config file (--config-file,\n"
    "else $XDG_CONFIG_HOME/accel/default_config.yaml or ~/.config/accel/default_config.yaml,\n"
    "as `accel config` or Accelerate's `accelerate config` writes it); for the state's\n"
    "settings, the launcher's ACCEL_* variables; defaults. `accel env [options]` shows them.\n"
    "\n"
    "options (--opt VALUE or --opt=VALUE; '_' or '-' between words; Accelerate's name first):\n"
    "  --config-file FILE        the config file to read\n"
    "  --num-processes N         processes of the whole job, all machines together (default 1)\n"
    "  --nproc-per-node N        processes on this node, instead: a number, or as torchrun: auto (one\n"
    "                            per GPU, else one per CPU the launcher may use), cpu, gpu\n"
    "  --num-machines, --nnodes M          nodes in the job (default 1)\n"
    "  --machine-rank, --node-rank R       index of this node, 0 <= R < M (default 0)\n"
    "  --main-process-ip, --master-addr A  address of the node of rank 0 (default 127.0.0.1)\n"
    "  --main-process-port, --master-port P  its port (default 29500; 0 picks a free port,\n"
    "                            single node only)\n"
    "  --cpu                     run on the CPU (sets ACCEL_USE_CPU=1)\n"
    "  --multi-gpu               run on the GPUs (distributed_type MULTI_GPU: ACCEL_USE_CPU=0)\n"
    "  --mixed-precision MODE    no, fp16 or bf16 (sets ACCEL_MIXED_PRECISION)\n"
    "  --gradient-accumulation-steps N  (sets ACCEL_GRADIENT_ACCUMULATION_STEPS)\n"
    "  --gpu-ids LIST            the GPUs of this node the ranks see: all (default) or e.g. 0,1\n"
    "                            (sets CUDA_VISIBLE_DEVICES)\n"
    "  --dynamo-backend B        sets ACCEL_DYNAMO_BACKEND (accel refuses all but no)\n"
    "  --enable-cpu-affinity, --cpu-affinity\n"
    "                            bind each rank to a share of its own of the CPUs the\n"
    "                            launcher may use (as taskset would; default: every rank\n"
    "                            may run on all of them)\n"
    "  --timeout-s SECONDS       collective timeout (sets ACCEL_TIMEOUT_S)\n"
    "  --grace-period-s SECONDS  time ranks get after SIGTERM before SIGKILL (default 5)\n"
    "  --max-restarts N          start the job again up to N times when a rank fails (default 0)\n"
    "  -m, --module              PROGRAM is a Python module: run PYTHON -m MODULE\n"
    "  --no-python               run PROGRAM as it is, even when it ends in .py\n"
    "  -h, --help                show this help\n"
    "\n"
    "When a rank fails, the other ranks are stopped. With restarts left, every rank is\n"
    "started again (on a new free port with --master-port 0), ACCEL_RESTART_COUNT telling\n"
    "them how many restarts came before (0 on the first attempt) so that they can resume\n"
    "from their latest checkpoint. Otherwise accel launch exits with the failing rank's\n"
    "exit code (128+N when it was killed by signal N).\n"
    "\n"
    "Rank 0's store listens only on the master address, and serves only processes that\n"
    "present the job's key, ACCEL_JOB_KEY: made up for a job on one node; with several\n"
    "nodes, export the same secret on each (e.g. ACCEL_JOB_KEY=$(openssl rand -hex 16)).\n";

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// ---- signals ----

// Blocks the signals the launcher waits for, for the lifetime of the object, so that they are
// taken synchronously with sigtimedwait instead of by handlers.
class SignalScope {
 public:
  SignalScope() {
    sigemptyset(&waited_);
    sigaddset(&waited_, SIGCHLD);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      // A signal ignored on entry (nohup, `cmd &` in a script) stays ignored, as in any program.
      struct sigaction current {};
      if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler != SIG_IGN) sigaddset(&waited_, sig);
    }
    // With SIGCHLD ignored the kernel would reap the ranks itself and waitpid could not see them.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &dfl, &saved_sigchld_);
    sigprocmask(SIG_BLOCK, &waited_, &saved_mask_);
  }
  ~SignalScope() {
    sigprocmask(SIG_SETMASK, &saved_mask_, nullptr);
    sigaction(SIGCHLD, &saved_sigchld_, nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  const sigset_t& waited() const { return waited_; }
  // The mask the ranks must start with: the one the launcher was started with.
  const sigset_t& original_mask() const { return saved_mask_; }

 private:
  sigset_t waited_;
  sigset_t saved_mask_;
  struct sigaction saved_sigchld_ {};
};

using Clock = std::chrono::steady_clock;

constexpr Clock::time_point kNoDeadline = Clock::time_point::max();

// The next waited-for signal, or 0 once `deadline` has passed.
int next_signal(const sigset_t& waited, Clock::time_point deadline) {
  for (;;) {
    int sig = -1;
    if (deadline == kNoDeadline) {
      sig = sigwaitinfo(&waited, nullptr);
    } else {
      const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now());
      if (left.count() <= 0) return 0;
      const timespec timeout{static_cast<time_t>(left.count() / 1000000000),
                             static_cast<long>(left.count() % 1000000000)};
      sig = sigtimedwait(&waited, nullptr, &timeout);
      if (sig < 0 && errno == EAGAIN) return 0;
    }
    if (sig > 0) return sig;
  }
}

std::string signal_text(int sig) {
  const char* name = strsignal(sig);
  return std::to_string(sig) + " (" + (name != nullptr ? name : "unknown") + ")";
}

// ---- the ranks ----

struct Rank {
  int rank;
  int local_rank;
  pid_t pid;  // also the id of the rank's process group
  bool running;
};

// Runs in the forked child, where another thread of the launcher may have held the allocator's lock
// at fork time: so nothing here allocates.
// `cpus`, when not null, is the rank's share of the CPUs (--cpu-affinity).
[[noreturn]] void become_rank(char* const* argv, char* const* envp, const sigset_t& mask, pid_t launcher,
                              const cpu_set_t* cpus) {
  // Its own group lets the launcher signal the rank together with everything it started.
  setpgid(0, 0);
  // If the launcher dies without cleaning up, the rank must not run on unsupervised ...
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // ... including when it died before prctl took effect.
  if (getppid() != launcher) _exit(kLauncherErrorExit);
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  char prefix[] = "accel launch: cannot run ";
  char affinity_prefix[] = "accel launch: cannot bind to its CPUs ";
  const bool bound = cpus == nullptr || sched_setaffinity(0, sizeof *cpus, cpus) == 0;
  if (bound) execvpe(argv[0], argv, envp);
  char* error = std::strerror(errno);
  char separator[] = ": ";
  char newline[] = "\n";
  // One writev keeps the line whole when several ranks fail at once.
  const iovec parts[] = {bound ? iovec{prefix, sizeof prefix - 1} : iovec{affinity_prefix, sizeof affinity_prefix - 1},
                         {argv[0], std::strlen(argv[0])},
                         {separator, sizeof separator - 1},
                         {error, std::strlen(error)},
                         {newline, 1}};
  [[maybe_unused]] const ssize_t written = writev(STDERR_FILENO, parts, 5);
  _exit(bound ? kExecFailedExit : kLauncherErrorExit);
}

// Starts one rank; returns its pid, or -1 with errno set.
pid_t spawn(char* const* argv, char* const* envp, const sigset_t& mask, const cpu_set_t* cpus) {
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid == 0) become_rank(argv, envp, mask, launcher, cpus);
  // Also set here, so the group exists before fork returns, whichever process runs first.
  if (pid > 0) setpgid(pid, pid);
  return pid;
}

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

std::string how_it_failed(int status) {
  return WIFSIGNALED(status) ? "was killed by signal " + signal_text(WTERMSIG(status))
                             : "failed with exit code " + std::to_string(WEXITSTATUS(status));
}

// Watches the ranks of one attempt and decides its exit code: the first failure's, or 128+signal
// when the launcher was told to stop first. Once either happens the job is stopping: the rest get
// SIGTERM (or the forwarded signal), then SIGKILL after the grace period.
class Supervisor {
 public:
  explicit Supervisor(double grace_period_s) : grace_(std::chrono::duration<double>(grace_period_s)) {}

  void add(const Rank& rank) { ranks_.push_back(rank); }

  bool finished() const {
    return std::none_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
  }
  Clock::time_point kill_deadline() const { return kill_deadline_; }
  int exit_code() const { return exit_code_.value_or(0); }
  // "rank R failed with ...", once a rank's failure has stopped the attempt.
  const std::optional<std::string>& failure() const { return failure_; }
  // A job that failed by itself may run again; one the launcher was told to stop (or could not
  // start) must not, even when a rank had failed first.
  bool restartable() const { return failure_ && !interrupted_; }

  void on_launcher_error() {
    interrupted_ = true;
    if (!exit_code_) stop(kLauncherErrorExit, SIGTERM);
  }

  void on_signal(int sig) {
    interrupted_ = true;
    if (exit_code_) {
      signal_running(sig);
      return;
    }
    std::fprintf(stderr, "accel launch: got signal %s, passing it on to the ranks\n", signal_text(sig).c_str());
    stop(128 + sig, sig);
  }

  void on_deadline() {
    signal_running(SIGKILL);
    kill_deadline_ = kNoDeadline;
  }

  void reap() {
    std::vector<std::pair<Rank, int>> failed;
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      const auto it = std::find_if(ranks_.begin(), ranks_.end(), [&](const Rank& r) { return r.pid == pid; });
      if (it == ranks_.end()) continue;
      it->running = false;
      // What the rank started is orphaned now; its group id stays reserved while any of it lives.
      kill(-pid, SIGKILL);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed.emplace_back(*it, status);
    }
    if (failed.empty() || exit_code_) return;
    // A rank killed by a signal (the OOM killer, say) takes its peers down with it within milliseconds,
    // and they exit with an error of their own: among ranks that ended together, it is the cause.
    const auto signaled =
        std::find_if(failed.begin(), failed.end(), [](const auto& ended) { return WIFSIGNALED(ended.second); });
    const auto& [rank, how] = signaled != failed.end() ? *signaled : failed.front();
    failure_ = "rank " + std::to_string(rank.rank) + " " + how_it_failed(how);
    std::fprintf(stderr, "accel launch: rank %d (local rank %d, pid %d) %s\n", rank.rank, rank.local_rank,
                 static_cast<int>(rank.pid), how_it_failed(how).c_str());
    stop(exit_code_of(how), SIGTERM);
  }

 private:
  void stop(int exit_code, int sig) {
    exit_code_ = exit_code;
    signal_running(sig);
    kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(grace_);
  }

  void signal_running(int sig) {
    for (const Rank& r : ranks_) {
      if (r.running) kill(-r.pid, sig);
    }
  }

  std::chrono::duration<double> grace_;
  std::vector<Rank> ranks_;
  std::optional<int> exit_code_;
  std::optional<std::string> failure_;
  bool interrupted_ = false;
  Clock::time_point kill_deadline_ = kNoDeadline;
};

// Starts every rank of this node (local rank i bound to cpu_shares[i], when there are shares) and supervises
// them until all have ended.
Supervisor run_attempt(const LaunchOptions& options, const SignalScope& signals, int port, int restart,
                       const std::vector<cpu_set_t>& cpu_shares) {
  Supervisor supervisor(options.grace_period_s);
  std::vector<std::string> command = options.command;
  const std::vector<char*> argv = c_strings(command);
  const Variables common = common_variables(options, port, restart);
  for (int local = 0; local < options.nproc_per_node; ++local) {
    const int rank = options.node_rank * options.nproc_per_node + local;
    Variables vars = common;
    vars.emplace_back("RANK", std::to_string(rank));
    vars.emplace_back("LOCAL_RANK", std::to_string(local));
    std::vector<std::string> env = environment_with(vars);
    const std::vector<char*> envp = c_strings(env);
    const cpu_set_t* cpus = cpu_shares.empty() ? nullptr : &cpu_shares[static_cast<size_t>(local)];
    const pid_t pid = spawn(argv.data(), envp.data(), signals.original_mask(), cpus);
    if (pid < 0) {
      std::fprintf(stderr, "accel launch: cannot start rank %d: %s\n", rank, std::strerror(errno));
      supervisor.on_launcher_error();
      break;
    }
    supervisor.add(Rank{rank, local, pid, true});
  }
  while (!supervisor.finished()) {
    const int sig = next_signal(signals.waited(), supervisor.kill_deadline());
    if (sig == 0) {
      supervisor.on_deadline();
    } else if (sig == SIGCHLD) {
      supervisor.reap();
    } else {
      supervisor.on_signal(sig);
    }
  }
  return supervisor;
}

// A rank killed while its node's shared-memory segment was being set up (before every rank of the node had
// mapped it, when the node's leader unlinks it) leaves the segment in /dev/shm; the node's part of the job
// is over, so whatever bears its name goes.
void remove_shared_memory_of(int port, int node) {
  const std::string prefix = distributed::shm_segment_prefix(static_cast<uint16_t>(port), node);
  std::vector<std::string> names;
  try {
    names = list_directory("/dev/shm");
  } catch (const std::exception&) {
    return;  // no /dev/shm: the job could not have made a segment either
  }
  for (const auto& name : names) {
    if (name.rfind(prefix, 0) == 0) shm_unlink(("/" + name).c_str());
  }
}

// Runs the job, and runs it again after a rank's failure while restarts remain, as torchrun's elastic
// agent does with --max-restarts: the whole job, since the survivors' process group died with the rank.
int launch(const LaunchOptions& options) {
  std::vector<cpu_set_t> cpu_shares;
  if (options.cpu_affinity) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    try {
      if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        throw std::runtime_error(std::string("--cpu-affinity: cannot read the launcher's CPUs: ") + std::strerror(errno));
      }
      cpu_shares = split_cpus(allowed, options.nproc_per_node);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "accel launch: %s\n", error.what());
      return kLauncherErrorExit;
    }
  }
  SignalScope signals;
  for (int restart = 0;; ++restart) {
    // Picked again for each attempt: the last one's port may still be held by its connections in
    // TIME_WAIT, or taken by another program since.
    int port = options.master_port;
    if (port == 0) {
      const auto picked = pick_free_port(options.master_addr);
      if (!picked) {
        std::fprintf(stderr, "accel launch: cannot find a free port on %s\n", options.master_addr.c_str());
        return kLauncherErrorExit;
      }
      port = *picked;
    }
    const Supervisor supervisor = run_attempt(options, signals, port, restart, cpu_shares);
    remove_shared_memory_of(port, options.node_rank);
    if (!supervisor.restartable()) return supervisor.exit_code();
    if (restart == options.max_restarts) {
      if (options.max_restarts > 0) {
        std::fprintf(stderr, "accel launch: %s; no restart left (%d used)\n", supervisor.failure()->c_str(),
                     options.max_restarts);
      }
      return supervisor.exit_code();
    }
    std::fprintf(stderr, "accel launch: %s; restarting the job (restart %d of %d)\n", supervisor.failure()->c_str(),
                 restart + 1, options.max_restarts);
  }
}

}  // namespace

int run_launch(int argc, char** argv) {
  LaunchOptions options;
  try {
    const CommandLine line = parse_command_line(argc, argv, FlagSet::Launch);
    if (line.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const EnvLookup env = process_env();
    const auto config = find_config_file(line.flags, env);
    const ResolvedLaunch resolved = resolve_launch(line.flags, config ? &*config : nullptr, env);
    options = resolved.options;
    options.command = rank_command(line.program, line.flags.count("module") != 0, line.flags.count("no_python") != 0,
                                   env);
    if (resolved.process_count_defaulted) {
      std::fprintf(stderr,
                   "accel launch: no --num_processes (or --nproc-per-node) and no config file saying how many: "
                   "starting 1 process per node; pass one, or write a config file with 'accel config'\n");
    }
  } catch (const UsageError& error) {
    std::fprintf(stderr, "accel launch: %s\nrun 'accel launch --help' for usage\n", error.what());
    return kUsageExit;
  } catch (const ConfigError& error) {
    std::fprintf(stderr, "accel launch: %s\n", error.what());
    return kUsageExit;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "accel launch: %s\n", error.what());
    return kLauncherErrorExit;
  }
  try {
    options.job_key = job_key_for(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "accel launch: %s\n", error.what());
    return kLauncherErrorExit;
  }
  return launch(options);
}

}  // namespace accel::cli
