// ZeRO stage 3 (train/ddp/sharded_units.hpp) for a model accel runs itself (TorchScript): its trainable
// parameters become views of one buffer per unit, whose memory exists only while the unit is gathered.
// When the model's forward is a chain of its top-level children (train/model/module_chain.hpp) and each unit
// lies in one child, accel runs the children one at a time: a child's units are gathered just before its
// forward and freed after it, then gathered again just before autograd reaches its backward (a hook on its
// output), as FSDP does; the next child's gather is started ahead (prefetched) as a child's forward begins,
// and the previous child's as a child's backward begins. A forward that calls each child once in its own block
// is cut the same way, by calls from a copy of its graph (cut_forward.hpp). Any other TorchScript forward
// cannot be cut between its submodules from outside, so the whole model is gathered before it (its gathers
// started together).
// During backward each unit's gradients are handed over (Model::reduce_unit) as soon as autograd has
// accumulated all of them, and the unit is freed; an autograd callback at the end of backward hands over the
// units it did not reach (zeros) and runs the model's end-of-backward checks. An evaluation forward frees
// every unit it gathered. Between steps a process holds only its share.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

#include "core/named_tensors.hpp"
#include "train/ddp/sharded_units.hpp"

namespace accel::train {

class GatheredUnits {
 public:
  // reduce: Model::reduce_unit (false when the backward only accumulates); finish: the model's checks at the
  // end of a backward, after every unit was handed over. units and the callbacks must outlive this object.
  GatheredUnits(ShardedUnits& units, const NamedTensors& trainable,
                std::function<bool(size_t, const at::Tensor&)> reduce, std::function<void()> finish);
  ~GatheredUnits();
  GatheredUnits(const GatheredUnits&) = delete;
  GatheredUnits& operator=(const GatheredUnits&) = delete;

  // Gathers every unit (collective; with prefetching, every gather started before the first is waited for,
  // so that they travel one behind the other); with grad_enabled gives each trainable parameter its gradient
  // view.
  void before_forward(bool grad_enabled, bool prefetching);
  // After an evaluation forward (grad_enabled false): every unit freed.
  void after_forward(bool grad_enabled);

  // A forward run a child at a time: begin_chain first, then around each child's forward before_child and
  // after_child with the units that lie in it (collective: every process runs the same children). `ahead`:
  // the units whose gathers to start meanwhile (prefetch; empty for none): before_child's, the next child's;
  // after_child's, the previous child's, started when this child's backward begins.
  void begin_chain(bool grad_enabled);
  void before_child(const std::vector<size_t>& units, const std::vector<size_t>& ahead);
  // The units freed; with grad_enabled and an output that requires grad, gathered again (their gradient
  // views installed) when autograd reaches the output.
  void after_child(const std::vector<size_t>& units, const std::vector<size_t>& ahead, const at::Tensor& output,
                   bool grad_enabled);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace accel::train
