// The optimizer a training loop steps: torch::optim's SGD, Adam and AdamW behind a small interface that
// names parameters, splits off a no-weight-decay group, and serialises its state to bytes. torch::optim
// stays out of this header (pimpl) so users of the interface only need ATen's Tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace accel::train {

class CapturableOptimizer;
class ZeroShard;

struct OptimizerConfig {
  double lr = 1e-3;
  double momentum = 0;  // sgd
  double dampening = 0;  // sgd
  bool nesterov = false;  // sgd; needs momentum > 0 and dampening 0
  double weight_decay = 0;
  double beta1 = 0.9;  // adam, adamw
  double beta2 = 0.999;  // adam, adamw
  double eps = 1e-8;  // adam, adamw
  // zero_grad's way: gradients set to undefined (set_to_none, as Accelerate and torch 2.x), or zeroed where
  // they are, for gradient storage that must stay (a model of the caller's tensors: accel_model_grad_view).
  bool zero_grad_to_none = true;
  // Parameters whose name matches one of these glob patterns ('*' and '?', e.g. "*bias", "*norm*") go in
  // a second parameter group with weight_decay 0 (the usual "no decay for biases and norms").
  std::vector<std::string> no_decay_patterns;
  // Set: the caller's own optimizer (torch's, in Python) steps, over the elements this rank owns
  // (Optimizer::owned_elements): step() runs this instead of torch::optim's step, and under ZeRO then gathers
  // every rank's updated elements. The kind then only carries group options, and the optimizer keeps no
  // state of its own (save_state and load_state: Error(Unsupported)).
  std::function<void()> external_step;
};

// Elements of one parameter that this rank steps: the whole parameter without ZeRO, its piece under it.
struct OwnedElements {
  std::string name;
  int64_t begin = 0;  // the first of the parameter's (flattened) elements
  int64_t numel = 0;
};

// Whether `name` matches the whole glob `pattern` ('*': any run of characters, '?': one character).
bool glob_match(const std::string& pattern, const std::string& name);

// Refuses a momentum that an optimizer of `kind` cannot take, with Error(InvalidArgument) "<what> must be
// ...": below 0 for sgd, outside [0, 1) for adam and adamw (whose momentum is beta1).
void validate_momentum(const std::string& kind, double momentum, const std::string& what);

// kind: "sgd", "adam" or "adamw". Groups: the parameters that match no no_decay pattern (weight_decay from
// the config), then those that match one (weight_decay 0); an empty group is left out, so there is one
// group when no pattern is given or when every parameter falls on the same side.
class Optimizer {
 public:
  // Unknown kind, an empty or undefined parameter, a non-leaf parameter, a repeated name or a bad value
  // (lr < 0, momentum < 0, weight_decay < 0, eps < 0, betas outside [0, 1), nesterov without momentum or
  // with dampening): Error(InvalidArgument) naming it.
  Optimizer(const std::string& kind, const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
            const OptimizerConfig& config);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  void step();  // the plain torch::optim step; parameters without grad are left alone
  void zero_grad();  // see OptimizerConfig::zero_grad_to_none

  // Group accessors; a group index out of range is Error(OutOfRange).
  size_t num_groups() const;
  double lr(size_t group) const;
  void set_lr(size_t group, double lr);  // lr < 0, NaN or infinite: Error(InvalidArgument)
  // As torch's schedulers write param_group["lr"]: unchecked, since torch's own schedules can give a
  // negative lr (OneCycleLR's linear annealing at step total_steps, a negative gamma).
  void assign_lr(size_t group, double lr);
  double initial_lr(size_t group) const;  // the lr each group started with (schedulers scale from it)
  double weight_decay(size_t group) const;
  // What torch's OneCycleLR cycles: SGD's momentum, or beta1 for adam and adamw (its use_beta1).
  double momentum(size_t group) const;
  // Written as OneCycleLR writes it: unchecked (past its end, its linear annealing overshoots).
  void assign_momentum(size_t group, double momentum);
  // (beta1, beta2) of an adam or adamw group; sgd has none: Error(InvalidArgument).
  std::pair<double, double> betas(size_t group) const;
  std::vector<std::string> group_parameter_names(size_t group) const;
  std::vector<at::Tensor> parameters() const;  // every parameter, all groups, in group order
  const std::string& kind() const;

  // The torch::optim archive (per-parameter state and group options, as torch::save writes it) plus the
  // kind and the initial lrs. Loading restores the state, every group's options (lr included, as Python's
  // load_state_dict does) and the initial lrs, and drops any state the archive does not hold. Bytes that
  // are not such an archive, or one for another kind or other group sizes: Error(InvalidArgument), and
  // the optimizer is unchanged.
  std::string save_state() const;
  void load_state(const std::string& bytes);

  // For a checkpoint that every process writes its part of. Without ZeRO, `shared` is save_state()'s bytes
  // and `own` is empty. Under ZeRO, `shared` is the kind, initial lrs and group options (what every rank
  // holds alike) and `own` the state of this rank's pieces: nothing is gathered, no rank holds more than its
  // share, and the call is not collective.
  struct PerProcessState {
    std::string shared;
    std::string own;
    std::string own_index;  // what `own` holds, readable without parsing it (train/optim/zero_state.hpp)
  };
  PerProcessState save_state_per_process() const;
  // load_state() from save_state_per_process()'s bytes: `shared` and the `own` of every process that saved
  // (in rank order, as many as there were: any stage and number of processes loads them). The errors of
  // load_state(), and Error(InvalidArgument) naming the process or parameter when the parts do not hold
  // every parameter's state once; the optimizer is then unchanged.
  void load_state(const std::string& shared, const std::vector<std::string>& process_parts);

  // A saved state read and checked against this optimizer, not yet in use: load_state(PendingState) puts it
  // in and cannot fail, so a checkpoint reads every object before changing any.
  class PendingState {
   public:
    PendingState();
    PendingState(PendingState&&) noexcept;
    PendingState& operator=(PendingState&&) noexcept;
    ~PendingState();

   private:
    friend class Optimizer;
    struct Impl;
    std::unique_ptr<Impl> impl_;
  };
  // Reads the part process `process` saved (save_state_per_process()'s `own`).
  using PartReader = std::function<std::string(size_t process)>;
  // Reads the `own_index` process `process` saved with it, std::nullopt where there is none.
  using PartIndexReader = std::function<std::optional<std::string>(size_t process)>;
  // load_state(shared, process_parts)'s reading and checks, the `num_parts` parts read one at a time through
  // read_part and dropped once used: under ZeRO this rank keeps only its pieces' elements, so it holds its
  // share and one saved part at most, whatever the number of processes that saved, and with read_index it
  // reads only the parts that hold some of them. The optimizer is unchanged (its state is set aside while
  // torch::optim parses the archive, and put back). Not thread-safe.
  PendingState read_state(const std::string& shared, const PartReader& read_part, size_t num_parts,
                          const PartIndexReader& read_index = {});
  void load_state(PendingState state);

  // ZeRO (train/optim/zero_optimizer.hpp), attached once after construction: step() then steps this rank's
  // pieces only (with an optimizer of the same kind and group options over them) and gathers the rest from
  // their owners, the state of other ranks' elements is not kept, save_state() is collective and returns
  // the whole state gathered (the bytes zero_stage 0 would write, so any stage and world size can load
  // them), load_state() keeps this rank's pieces, zero_grad() drops the pieces' gradients too, and
  // capturable() is Error(Unsupported). nullptr without ZeRO.
  void attach_zero(std::shared_ptr<ZeroShard> shard);
  ZeroShard* zero_shard() const;
  // What this rank steps, parameter by parameter in the groups' order (under ZeRO, bucket by bucket): every
  // trainable element without ZeRO, this rank's pieces with it. What a caller's optimizer
  // (OptimizerConfig::external_step) must step.
  const std::vector<OwnedElements>& owned_elements() const;
  // The tensor of owned_elements()[index]: the parameter without ZeRO; under it the piece's 1-d view (of the
  // parameter's memory, or under stage 3 of this rank's chunk), whose gradient is set for the length of a
  // step. Error(OutOfRange).
  at::Tensor owned_tensor(size_t index) const;
  // The tensors whose gradients the fp16 scaler unscales for a step: parameters(), or under ZeRO stage 2
  // this rank's pieces (each with its gradient), since a rank holds no other gradients.
  std::vector<at::Tensor> gradient_holders();
  // Whether the fp16 scaler's overflow (this rank's found_inf) holds on any rank: found_inf itself without
  // ZeRO stage 2; collective with it.
  bool overflow_on_any_rank(bool found_inf);
  // The bytes of the per-parameter state (momentum buffers, Adam's moments) this rank holds, as of the last
  // step() or load_state(). Thread-safe.
  int64_t state_bytes() const;

  // The step in the form a CUDA graph captures (train/optim/capturable_optimizer.hpp), made on first use, over
  // this optimizer's own state; step() and save_state() keep the two in agreement.
  CapturableOptimizer& capturable();
  // Changes when load_state() replaces the state tensors, which a captured step would still be using.
  int64_t state_generation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::train
