// A TorchScript model, and what prepare makes of it: on the state's device, with parameters and buffers
// equal to rank 0's, wrapped for data parallelism, with forward under the state's mixed precision.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/named_tensors.hpp"
#include "distributed/state.hpp"
#include "train/ddp/reducer.hpp"
#include "train/ddp/sharded_units.hpp"

namespace accel::train {

// What forward returned: a tensor (one unnamed value), a tuple or list (unnamed values) or a dict.
struct ModelOutput {
  enum class Kind { Tensor, Tuple, Dict };
  Kind kind = Kind::Tensor;
  NamedTensors values;  // names empty except for a dict
};

struct PrepareConfig {
  ReducerConfig reducer;
  // Rank 0's buffers are sent to the other ranks before a forward when the forward before it synchronised
  // (the first forward included), as DDP 1.13 does: the first micro-step of each accumulation window,
  // never a later one inside no_sync, and the first evaluation after training (which makes the next
  // training forward send none).
  bool broadcast_buffers = true;
  bool keep_low_precision_outputs = false;  // else fp16/bf16 outputs come back as fp32
  // How save_state writes the model: in pieces, each process its own, in parallel (ckpt/model_pieces.hpp: FSDP's
  // SHARDED_STATE_DICT), or one whole file written by process 0; Auto: in pieces when its parameters are
  // sharded (zero_stage 3 on several processes), whole otherwise.
  enum class CheckpointModel { Auto, Whole, Pieces };
  CheckpointModel checkpoint_model = CheckpointModel::Whole;
};

class Model {
 public:
  // Throws Error(Io) for a missing file, Error(InvalidArgument) for one that is not TorchScript.
  static std::shared_ptr<Model> load_file(const std::string& path);
  static std::shared_ptr<Model> load_buffer(const std::string& bytes);
  // A model whose tensors are the caller's (model_body.hpp: eager_module_body): its forward and backward run
  // in the caller's runtime, which tells the model about them (begin_forward, grad_ready, end_backward).
  static std::shared_ptr<Model> from_tensors(const NamedTensors& parameters, const std::vector<bool>& trainable,
                                             const NamedTensors& buffers);
  ~Model();

  // Moves to the state's device, makes every rank start from rank 0's parameters and buffers, and with
  // several processes builds the reducer. Collective. Throws Error(InvalidState) when already prepared.
  // A model of the caller's tensors is checked to be on the device instead (Error(InvalidArgument)), and
  // gets accel's gradient storage: each trainable parameter's grad() is a tensor of accel's (with several
  // processes a view into its gradient bucket), which the caller's backward accumulates into.
  void prepare(std::shared_ptr<distributed::State> state, const PrepareConfig& config);
  bool prepared() const;

  // Forward with positional and named arguments, under autocast when the state asks for bf16 (or fp16
  // on CUDA). With grad_enabled false it runs without building a graph (evaluation). Prepared on several
  // processes, it may broadcast the buffers (PrepareConfig::broadcast_buffers): collective then, training
  // or evaluating, as DDP's forward; the unwrapped model's forward never is.
  ModelOutput forward(const std::vector<at::Tensor>& args, const NamedTensors& kwargs, bool grad_enabled);

  // The caller's runtime calls it before its own forward of a prepared model of its tensors: what DDP's
  // forward does before running the module (start_forward). Error(InvalidState) for a TorchScript model
  // (forward() does this itself) or one not prepared.
  void begin_forward(bool grad_enabled);

  // A model of the caller's tensors (from_tensors), whose backward runs in the caller's runtime.
  bool host_owned() const;
  // Its parameter index's gradient storage (set at prepare): what the caller installs as the gradient of
  // its own tensor, so that its backward accumulates there in place.
  at::Tensor grad_view(size_t index) const;
  // The caller's backward has accumulated parameter index's gradient into its storage: with several
  // processes, its bucket's all-reduce starts once every gradient of the bucket is in (a repeat is ignored).
  void grad_ready(size_t index);
  // The caller's backward is over: on a synchronising backward, waits for the all-reduces (every gradient
  // then holds the average over the ranks) and treats the parameters never marked as the reducer's
  // find_unused_parameters rule says (or fails naming them).
  void end_backward();
  // Whether no rank's backward reached parameter index in the last synchronising backward (with
  // find_unused_parameters or static_graph; false otherwise, and on one process): its gradient was left as
  // it was, which a runtime whose "no gradient" is not a zero tensor (torch's None) restores.
  bool grad_reached_by_no_rank(size_t index) const;
  // grad_view, grad_ready, grad_reached_by_no_rank: index out of range: Error(OutOfRange); a TorchScript model or an unprepared one:
  // Error(InvalidState); a frozen parameter: Error(InvalidArgument). end_backward: Error(InvalidState) for
  // a TorchScript model or an unprepared one, and the reducer's errors.

  void train(bool on);
  bool is_training() const;
  // Accelerate's no_sync(model): while set, the backward of a forward run meanwhile only accumulates
  // gradients locally (no all-reduce), whatever sync_gradients says.
  void set_no_sync(bool on);
  bool no_sync() const;
  // Registration order, each tensor once under its first name, as torch's named_parameters: a tensor that
  // several modules hold (tied weights, as an embedding and its output layer) is one parameter. Cached
  // (enumerating a TorchScript module walks it); prepare replaces the tensors but keeps the names, so the
  // names stay valid as long as the model.
  const NamedTensors& named_parameters() const;
  const NamedTensors& named_buffers() const;
  // Parameters, then buffers, under every name, as torch's state_dict (a tied tensor under each of its
  // names): what a saved model's names are checked against. Error(Unsupported) under stage 3, whose
  // trainable parameters have no whole values here (sharded_units()).
  // named_parameters' tensors under stage 3: the trainable ones hold no memory (their shapes, dtypes and
  // devices stay right; reading their elements is an error of the caller's).
  NamedTensors parameters_and_buffers() const;
  // The same slots whatever the stage: under stage 3 the sharded parameters' tensors hold no values (their
  // names, shapes, dtypes and devices are right): what a saved model is checked against.
  NamedTensors tensor_slots() const;
  // Under stage 3: the sharded parameters (named_parameters' tensors, which hold no values) in unit order,
  // and every unit gathered in turn (collective: every rank calls it): with keep, each(parameter, its whole
  // value) in that order, each unit's memory freed before the next; without, this rank only takes part.
  // What each throws is thrown once every unit has been gathered. Nothing (empty) without stage 3.
  std::vector<at::Tensor> sharded_parameters() const;
  void for_each_gathered_parameter(bool keep,
                                   const std::function<void(const at::Tensor&, const at::Tensor&)>& each) const;
  // Whether a tensor of tensor_slots() is a parameter sharded under stage 3; and loading one: ShardedUnits::assign
  // (fill writes this rank's elements; Error(InvalidArgument) for another tensor).
  bool is_sharded(const at::Tensor& parameter) const;
  void assign_sharded(const at::Tensor& parameter, const std::function<void(int64_t, const at::Tensor&)>& fill) const;
  // Writes a whole value (of the parameter's shape; converted to its dtype and device) into parameter index
  // (named_parameters' order): under stage 3 this rank's elements of it into its share (no collective, each
  // rank given the whole value), otherwise into the tensor. Error(OutOfRange), Error(ShapeMismatch),
  // Error(Dtype) for a complex value of a real parameter.
  void set_parameter(size_t index, const at::Tensor& value) const;
  // ShardedUnits::share_of: this rank's elements of a sharded parameter (where they start, and them).
  std::pair<int64_t, at::Tensor> sharded_share(const at::Tensor& parameter) const;
  // Whether save_state writes this model in pieces, each process its own (PrepareConfig::checkpoint_model),
  // and changing it after prepare (Error(InvalidState) before: the prepare option chooses it there).
  bool checkpoint_in_pieces() const;
  void set_checkpoint_in_pieces(bool in_pieces);
  // The parameters that require grad, each once: what optimizers, clipping and the reducer work on.
  NamedTensors trainable_parameters() const;
  // Gradient buckets, for inspection and tests; empty when not data-parallel.
  std::vector<std::vector<std::string>> bucket_names() const;
  // The split of the trainable parameters between the ranks under ZeRO (PrepareConfig's
  // reducer.zero_stage 1, 2 or 3 on several processes; on one process with reducer.cpu_offload, the one
  // process owning every element, one_process_offload); nullptr otherwise (on one process zero_stage alone
  // means nothing).
  const ZeroPartition* zero_partition() const;
  // ZeRO stage 3 (PrepareConfig's reducer.zero_stage 3), for a model of the caller's tensors on several
  // processes: each trainable parameter is held as this rank's elements only (train/ddp/sharded_units.hpp),
  // the caller holding a unit's full buffer while it uses the unit.
  // set_units, before prepare: per parameter (named_parameters' order), its unit, numbered from 0 (a frozen
  // parameter's entry is not read: frozen parameters stay whole in the caller's memory). Without it, every
  // trainable parameter is in unit 0. Error(InvalidState) after prepare; Error(InvalidArgument) for a count
  // other than the parameters'.
  void set_units(std::vector<int32_t> unit_of_parameter);
  // The units once prepared under stage 3 on several processes; nullptr otherwise (stage 3 on one process
  // shards nothing, as stages 1 and 2).
  const ShardedUnits* sharded_units() const;
  // ShardedUnits::gather and reduce for the caller: gather is collective; reduce is collective on a
  // synchronising backward and returns true, and returns false, doing nothing, on one that accumulates (the
  // caller keeps its full gradients and hands them over on the synchronising one). Error(InvalidState) when
  // the model is not sharded (sharded_units() is nullptr), and ShardedUnits' errors. prefetch_unit:
  // ShardedUnits::prefetch (collective); the end of every backward (end_backward) forgets the prefetches
  // not gathered by then, waiting for them.
  void gather_unit(size_t unit, const at::Tensor& full);
  // ShardedUnits::gather_gradients (collective), on any sharded model.
  bool gather_unit_gradients(size_t unit, const at::Tensor& full);
  void prefetch_unit(size_t unit, const at::Tensor& full);
  bool reduce_unit(size_t unit, const at::Tensor& full_gradients);
  // Parameter index's unit and first element in the unit's layout. Error(OutOfRange), Error(InvalidState) as
  // above, Error(InvalidArgument) for a frozen parameter.
  std::pair<size_t, int64_t> parameter_place(size_t index) const;
  // Called when accel's optimizer is made over this model: a model of the caller's tensors under ZeRO
  // refuses to synchronise a backward without one (Error(Unsupported) from end_backward), since the
  // caller's own optimizer would step every parameter with gradients that only their owners hold.
  // state_bytes: what the optimizer holds now (GradSyncReport::optimizer_state_bytes sums them; thread-safe).
  void note_accel_optimizer(std::function<int64_t()> state_bytes) const;
  // What the gradient all-reduces cost (train/ddp/grad_sync_stats.hpp); zeros when not data-parallel.
  GradSyncReport grad_sync_report() const;
  // The plain module (same parameters), without the data-parallel wrapper.
  std::shared_ptr<Model> unwrap() const;
  void save_torchscript(const std::string& path) const;
  // The state this model was prepared with; nullptr before prepare.
  const std::shared_ptr<distributed::State>& state() const;

  struct Impl;

 private:
  explicit Model(std::shared_ptr<Impl> impl);
  // What DDP's forward does before running the module: on several processes, rank 0's buffers sent when the
  // forward before synchronised (collective then), and whether the coming backward synchronises decided.
  void start_forward(bool grad_enabled);
  // Error(InvalidState) naming `what` unless this is a prepared model of the caller's tensors.
  void require_prepared_host_model(const char* what) const;
  // The index among the trainable parameters of parameter index, checked for what (grad_view, ...).
  size_t trainable_index(size_t index, const char* what) const;
  void list_tensors() const;
  void refresh_cached_tensors();
  // Whether note_accel_optimizer was called.
  bool has_accel_optimizer() const;
  // Error(Unsupported) unless it was: ZeRO's ranks each step a share only.
  void require_optimizer_for(const ZeroPartition& zero) const;
  void shard_parameters(const std::shared_ptr<distributed::State>& state);
  // Stage 3: every unit reduced on a synchronising backward and every rank through the same units; what names
  // the caller in the error.
  void check_units_after_backward(const char* what);
  void refuse_gathered_units(const char* what) const;
  void refuse_caller_protocol(const char* what) const;
  // reduce_unit's work: the caller's through it, accel's own for a TorchScript model (GatheredUnits).
  bool hand_over_unit(size_t unit, const at::Tensor& full_gradients);
  // A TorchScript model's backward ends having reached `reached`'s units: on a synchronising backward with
  // find_unused_parameters, the units no rank reached since the last one (collective), which keep no
  // gradient (as DDP leaves a parameter no rank used); none otherwise.
  std::vector<bool> units_reached_by_no_rank(const std::vector<bool>& reached);
  ShardedUnits& require_units(const char* what) const;
  // Error(InvalidState) naming `what` under stage 3, whose gradients are not kept per parameter.
  void refuse_under_units(const char* what) const;
  std::shared_ptr<Impl> impl_;
};

}  // namespace accel::train
