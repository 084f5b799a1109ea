// ZeRO stage 3 (train/ddp/sharded_units.hpp) for a model accel runs itself (TorchScript): its trainable
// parameters become views of one buffer per unit, whose memory exists only while the unit is gathered.
// When the model's forward can be cut around submodules it calls (train/model/called_modules.hpp,
// cut_forward.hpp), accel runs it with a call around each: a child's units are gathered just before its
// forward and freed after it, then gathered again just before autograd reaches its backward (a hook on its
// output), as FSDP does; the next child's gather is started ahead (prefetched) as a child's forward begins,
// and the previous child's as a child's backward begins. The units of the parameters forward uses otherwise
// (the root's own, a submodule called twice or in a branch, a parameter read outside its forward, a weight
// tied across children) are held from the forward's start until backward hands them over, as FSDP holds its
// root unit; a forward that cannot be cut at all holds every unit so.
// During backward a cut child's units are handed over (Model::reduce_unit) as soon as autograd has accumulated
// all their gradients, and freed; an autograd callback at the end of backward hands over the held units and
// those backward did not reach (zeros), in unit order, and runs the model's end-of-backward checks. Held units
// wait for the end because a forward's branches may differ between processes (a held submodule called on some
// of them only): autograd would reach its units at different points, and the processes' reductions, which
// must come in one order, would part ways. An evaluation forward frees
// every unit it gathered. Between steps a process holds only its share.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

#include "core/named_tensors.hpp"
#include "train/ddp/sharded_units.hpp"

namespace accel::train {

// The tensor keeps its shape and loses the memory of its storage (every tensor on that storage does): a
// parameter between the uses of its unit.
void release_memory(const at::Tensor& tensor);

class GatheredUnits {
 public:
  // reduce: Model::reduce_unit (false when the backward only accumulates); reached_by_no_rank: given the
  // units this backward reached, those that keep no gradient, handed over to nobody
  // (Model::units_reached_by_no_rank); finish: the model's checks at the end of a backward, after every unit
  // was handed over. units and the callbacks must outlive this object.
  GatheredUnits(ShardedUnits& units, const NamedTensors& trainable,
                std::function<bool(size_t, const at::Tensor&)> reduce,
                std::function<std::vector<bool>(const std::vector<bool>&)> reached_by_no_rank,
                std::function<void()> finish);
  ~GatheredUnits();
  GatheredUnits(const GatheredUnits&) = delete;
  GatheredUnits& operator=(const GatheredUnits&) = delete;

  // A forward begins (with grad_enabled, every unit then waits for its backward); then hold gathers the units
  // kept through the forward (collective; with prefetching, every gather after the first started before the
  // first is waited for, so that they travel one behind the other), with grad_enabled giving their
  // parameters their gradient views; they are freed as backward hands them over. A forward run a child at a
  // time calls before_child and after_child around each child's forward with the units that lie in it
  // (collective: every process runs the same children). `ahead`: the units whose gathers to start meanwhile
  // (prefetch; empty for none): before_child's, the next child's; after_child's, the previous child's,
  // started when this child's backward begins. after_forward ends every forward: after an evaluation
  // (grad_enabled false) every unit is freed.
  void begin_forward(bool grad_enabled);
  void hold(const std::vector<size_t>& units, bool grad_enabled, bool prefetching);
  void before_child(const std::vector<size_t>& units, const std::vector<size_t>& ahead);
  // The units freed; with grad_enabled and an output that requires grad, gathered again (their gradient
  // views installed) when autograd reaches the output.
  void after_child(const std::vector<size_t>& units, const std::vector<size_t>& ahead, const at::Tensor& output,
                   bool grad_enabled);
  void after_forward(bool grad_enabled);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace accel::train
