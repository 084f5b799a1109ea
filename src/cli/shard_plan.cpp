#include "cli/shard_plan.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/epoch_plan.hpp"

namespace accel::cli {

namespace {

constexpr int kUsageExit = 2;
constexpr int kFailureExit = 1;

constexpr const char kUsage[] =
    "usage: accel shard-plan --dataset-len N --batch-size B --num-processes P [options]\n"
    "\n"
    "Prints, as one JSON object, the dataset indices each rank gets, batch by batch, in one epoch of a\n"
    "prepared DataLoader over a sequential sampler (0..N-1), exactly as Accelerate deals them:\n"
    "  {\"processes\": [{\"rank\": 0, \"len\": L, \"batches\": [[i, ...], ...]}, ...], \"remainder\": R}\n"
    "len is the number of batches the rank yields. remainder is what gather_for_metrics trims the last\n"
    "gathered batch to (-1 or 0: it trims nothing).\n"
    "\n"
    "options (--opt VALUE or --opt=VALUE):\n"
    "  --dataset-len N      samples in the dataset, N >= 0 (required)\n"
    "  --batch-size B       the DataLoader's batch size, B >= 1 (required)\n"
    "  --num-processes P    number of ranks, P >= 1 (required)\n"
    "  --split-batches      split each batch of B samples across the ranks (B must be a multiple of P)\n"
    "                       instead of giving each rank whole batches of B\n"
    "  --no-even-batches    even_batches=False: no padding from the start of the dataset, so ranks may\n"
    "                       get fewer batches; only map-style datasets read by every rank use it\n"
    "                       (Accelerate ignores it for the dispatcher and for iterable datasets)\n"
    "  --drop-last          drop the last incomplete batch\n"
    "  --iterable           an IterableDataset instead of a map-style dataset; like Accelerate's\n"
    "                       default (dispatch_batches=None), it is dispatched unless --no-dispatch\n"
    "  --dispatch           DataLoaderDispatcher: rank 0 reads the batches, every rank keeps its slice\n"
    "  --no-dispatch        every rank reads its own batches: BatchSamplerShard, or IterableDatasetShard\n"
    "                       with --iterable (the default for map-style datasets)\n"
    "  --already-sharded    with --iterable: each rank's dataset yields only its own share (N samples\n"
    "                       each); every rank batches its own stream, nothing is dispatched or padded\n"
    "  --skip-batches K     skip_first_batches(loader, K): K of this rank's batches, in every mode (the\n"
    "                       loader's rule; Accelerate skipped K base batches for a map-style dispatcher)\n"
    "  -h, --help           show this help\n"
    "\n"
    "The plan is held in memory and every rank walks the whole epoch, so it is refused when\n"
    "num_processes * (dataset_len + batch_size * num_processes) is more than 10000000.\n"
    "\n"
    "Exits with 2 for bad usage and settings that cannot work or are too large to plan.\n";

static_assert(data::kMaxPlanWork == 10'000'000, "the help text states the limit");

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Request {
  bool help = false;
  data::PlanOptions plan;
};

// An optionally negative decimal integer; ranges are the library's to check, with its messages.
int64_t parse_int64(const std::string& flag, const std::string& text) {
  const size_t first_digit = !text.empty() && text[0] == '-' ? 1 : 0;
  const bool digits =
      text.size() > first_digit && text.find_first_not_of("0123456789", first_digit) == std::string::npos;
  errno = 0;
  const long long value = digits ? std::strtoll(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno != 0) throw UsageError(flag + " expects an integer, got '" + text + "'");
  return value;
}

// Applies a flag without a value; returns false when `flag` is not one.
bool apply_switch(data::PlanOptions& plan, const std::string& flag) {
  if (flag == "--split-batches") {
    plan.split_batches = true;
  } else if (flag == "--no-even-batches") {
    plan.even_batches = false;
  } else if (flag == "--drop-last") {
    plan.drop_last = true;
  } else if (flag == "--iterable") {
    plan.iterable = true;
  } else if (flag == "--dispatch") {
    plan.dispatch_batches = true;
  } else if (flag == "--no-dispatch") {
    plan.dispatch_batches = false;
  } else if (flag == "--already-sharded") {
    plan.already_sharded = true;
  } else {
    return false;
  }
  return true;
}

Request parse_args(int argc, char** argv) {
  Request request;
  std::optional<int64_t> dataset_len, batch_size, num_processes;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      request.help = true;
      return request;
    }
    const auto eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    if (apply_switch(request.plan, flag)) {
      if (eq != std::string::npos) throw UsageError(flag + " takes no value");
      continue;
    }
    const bool takes_value =
        flag == "--dataset-len" || flag == "--batch-size" || flag == "--num-processes" || flag == "--skip-batches";
    if (!takes_value) throw UsageError("unknown option '" + arg + "'");
    if (eq == std::string::npos && i + 1 >= argc) throw UsageError(flag + " needs a value");
    const int64_t value = parse_int64(flag, eq != std::string::npos ? arg.substr(eq + 1) : argv[++i]);
    if (flag == "--dataset-len") dataset_len = value;
    if (flag == "--batch-size") batch_size = value;
    if (flag == "--num-processes") num_processes = value;
    if (flag == "--skip-batches") request.plan.skip_batches = value;
  }
  if (!dataset_len) throw UsageError("--dataset-len is required");
  if (!batch_size) throw UsageError("--batch-size is required");
  if (!num_processes) throw UsageError("--num-processes is required");
  request.plan.dataset_len = *dataset_len;
  request.plan.batch_size = *batch_size;
  request.plan.num_processes = *num_processes;
  return request;
}

void append_batches(std::string& out, const std::vector<data::Batch>& batches) {
  out += '[';
  for (size_t b = 0; b < batches.size(); ++b) {
    if (b > 0) out += ", ";
    out += '[';
    for (size_t i = 0; i < batches[b].size(); ++i) {
      if (i > 0) out += ", ";
      out += std::to_string(batches[b][i]);
    }
    out += ']';
  }
  out += ']';
}

std::string to_json(const data::EpochPlan& plan) {
  std::string out = "{\"processes\": [";
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const auto& rank = plan.ranks[r];
    if (r > 0) out += ", ";
    out += "{\"rank\": " + std::to_string(rank.rank) + ", \"len\": " + std::to_string(rank.length) + ", \"batches\": ";
    append_batches(out, rank.batches);
    out += '}';
  }
  out += "], \"remainder\": " + std::to_string(plan.remainder) + "}\n";
  return out;
}

}  // namespace

int run_shard_plan(int argc, char** argv) {
  Request request;
  try {
    request = parse_args(argc, argv);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "accel shard-plan: %s\nrun 'accel shard-plan --help' for usage\n", error.what());
    return kUsageExit;
  }
  if (request.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  try {
    const std::string json = to_json(data::plan_epoch(request.plan));
    if (std::fwrite(json.data(), 1, json.size(), stdout) != json.size() || std::fflush(stdout) != 0) {
      std::fprintf(stderr, "accel shard-plan: cannot write the plan to stdout\n");
      return kFailureExit;
    }
  } catch (const Error& error) {
    std::fprintf(stderr, "accel shard-plan: %s\n", error.what());
    return error.code() == Code::InvalidArgument ? kUsageExit : kFailureExit;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "accel shard-plan: the plan is too large to hold in memory\n");
    return kFailureExit;
  } catch (const std::exception& error) {
    // Sharding is plain C++ (no LibTorch error, hence no backtrace in what()); nothing may abort the CLI.
    std::fprintf(stderr, "accel shard-plan: %s\n", error.what());
    return kFailureExit;
  }
  return 0;
}

}  // namespace accel::cli
