#include "train/model/gathered_units.hpp"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <utility>

namespace accel::train {

void release_memory(const at::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, tensor.device()));
  storage->set_nbytes(0);
}

struct GatheredUnits::Impl : std::enable_shared_from_this<GatheredUnits::Impl> {
  struct Unit {
    at::Tensor flat;   // the parameters' values while gathered; no memory otherwise
    at::Tensor grads;  // undefined between a reduction and the next forward
    std::vector<size_t> members;
    size_t waiting = 0;  // members whose gradient this backward has not accumulated
    bool done = true;    // handed over in this backward
    bool gathered = false;
    bool prefetched = false;  // its gather in flight, into flat
    bool held = false;        // gathered by hold(): handed over when backward ends, in unit order
    bool reached = false;     // by this backward
  };

  ShardedUnits* sharded = nullptr;
  std::vector<at::Tensor> parameters;  // the trainable ones, views of their unit's flat
  std::vector<size_t> unit_of;
  std::vector<Unit> units;
  std::function<bool(size_t, const at::Tensor&)> reduce;
  std::function<std::vector<bool>(const std::vector<bool>&)> reached_by_no_rank;
  std::function<void()> finish;
  bool finishing_queued = false;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<uintptr_t> hook_keys;

  void release(Unit& unit) {
    if (unit.prefetched) gather(static_cast<size_t>(&unit - units.data()));  // the library writes into flat until then
    if (!unit.gathered) return;
    release_memory(unit.flat);
    unit.gathered = false;
  }

  void release_all() {
    for (Unit& unit : units) release(unit);
  }

  void allocate(Unit& unit) {
    const size_t bytes = static_cast<size_t>(unit.flat.numel()) * unit.flat.element_size();
    c10::StorageImpl* storage = unit.flat.storage().unsafeGetStorageImpl();
    storage->set_data_ptr_noswap(c10::GetAllocator(unit.flat.device().type())->allocate(bytes));
    storage->set_nbytes(bytes);
  }

  // A prefetched unit's gather only waits for the prefetch.
  void gather(size_t index) {
    Unit& unit = units[index];
    if (!unit.prefetched) {
      release(unit);  // what it held may be from before a step
      allocate(unit);
    }
    unit.prefetched = false;
    unit.gathered = true;
    sharded->gather(index, unit.flat);
  }

  // The gathers of units not gathered or on their way started (collective); in backward, not of those
  // handed over already either.
  void prefetch(const std::vector<size_t>& indices, bool in_backward) {
    for (const size_t index : indices) {
      Unit& unit = units[index];
      if (unit.gathered || unit.prefetched || (in_backward && unit.done)) continue;
      allocate(unit);
      unit.prefetched = true;
      sharded->prefetch(index, unit.flat);
    }
  }

  // The unit's gradient buffer (zeros when new), its views the members' gradients; a gradient autograd put
  // elsewhere (after a zero_grad that set it to none) is added in.
  void install_grads(Unit& unit) {
    if (!unit.grads.defined()) unit.grads = at::zeros_like(unit.flat);
    for (size_t member : unit.members) {
      at::Tensor& grad = parameters[member].mutable_grad();
      const at::Tensor& parameter = parameters[member];
      const at::Tensor view = unit.grads.narrow(0, parameter.storage_offset(), parameter.numel()).view(parameter.sizes());
      if (!grad.defined() || grad.data_ptr() != view.data_ptr()) {
        if (grad.defined()) view.add_(grad);
        grad = view;
      }
    }
  }

  // Every unit waits for its members' gradients from the coming backward.
  void expect_backward() {
    for (Unit& unit : units) {
      unit.waiting = unit.members.size();
      unit.done = false;
    }
  }

  void drop_grads(Unit& unit) {
    for (size_t member : unit.members) parameters[member].mutable_grad() = at::Tensor();
    unit.grads = at::Tensor();
  }

  void hand_over(size_t index) {
    Unit& unit = units[index];
    unit.done = true;
    if (reduce(index, unit.grads)) drop_grads(unit);
    release(unit);
  }

  void accumulated(size_t member) {
    if (!finishing_queued) {
      finishing_queued = true;
      auto self = shared_from_this();
      torch::autograd::Engine::get_default_engine().queue_callback([self] { self->finish_backward(); });
    }
    Unit& unit = units[unit_of[member]];
    unit.reached = true;
    if (unit.done) return;
    install_grads(unit);
    if (--unit.waiting == 0 && !unit.held) hand_over(unit_of[member]);
  }

  void finish_backward() {
    finishing_queued = false;
    std::vector<bool> reached;
    for (Unit& unit : units) reached.push_back(std::exchange(unit.reached, false));
    const std::vector<bool> skipped = reached_by_no_rank(reached);
    for (size_t index = 0; index < units.size(); ++index) {
      Unit& unit = units[index];
      if (unit.done) continue;
      if (skipped[index]) {
        unit.done = true;
        drop_grads(unit);
        continue;
      }
      install_grads(unit);
      hand_over(index);
    }
    release_all();
    finish();
  }
};

GatheredUnits::GatheredUnits(ShardedUnits& units, const NamedTensors& trainable,
                             std::function<bool(size_t, const at::Tensor&)> reduce,
                             std::function<std::vector<bool>(const std::vector<bool>&)> reached_by_no_rank,
                             std::function<void()> finish)
    : impl_(std::make_shared<Impl>()) {
  Impl& impl = *impl_;
  impl.sharded = &units;
  impl.reduce = std::move(reduce);
  impl.reached_by_no_rank = std::move(reached_by_no_rank);
  impl.finish = std::move(finish);
  impl.units.resize(units.unit_count());
  for (size_t index = 0; index < trainable.size(); ++index) {
    const at::Tensor& parameter = trainable[index].second;
    const auto [unit, offset] = units.place(index);
    Impl::Unit& owner = impl.units[unit];
    if (!owner.flat.defined()) {
      owner.flat = at::empty({units.unit_numel(unit)}, parameter.options().device(units.device(unit)).requires_grad(false));
      owner.gathered = true;
    }
    owner.members.push_back(index);
    impl.parameters.push_back(parameter);
    impl.unit_of.push_back(unit);
    at::NoGradGuard no_grad;
    impl.parameters.back().set_data(owner.flat.narrow(0, offset, parameter.numel()).view(parameter.sizes()));
  }
  impl.release_all();
  // The hooks hold the parameters' accumulators (which hold them only weakly) and this object's state
  // through a weak pointer: a backward after the model is gone does nothing.
  std::weak_ptr<Impl> weak = impl_;
  for (size_t index = 0; index < impl.parameters.size(); ++index) {
    auto accumulator = torch::autograd::impl::grad_accumulator(impl.parameters[index]);
    impl.hook_keys.push_back(accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [weak, index](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          if (auto state = weak.lock()) state->accumulated(index);
          return outputs;
        })));
    impl.accumulators.push_back(std::move(accumulator));
  }
}

GatheredUnits::~GatheredUnits() {
  for (size_t i = 0; i < impl_->accumulators.size(); ++i) impl_->accumulators[i]->del_post_hook(impl_->hook_keys[i]);
}

void GatheredUnits::begin_forward(bool grad_enabled) {
  // A cut child's gradient views are installed as its backward begins (after_child), so that gradient
  // buffers, too, exist one child at a time.
  if (grad_enabled) impl_->expect_backward();
}

void GatheredUnits::hold(const std::vector<size_t>& units, bool grad_enabled, bool prefetching) {
  Impl& impl = *impl_;
  if (prefetching && units.size() > 1) {
    for (const size_t unit : units) impl.release(impl.units[unit]);  // what they held may be from before a step
    impl.prefetch(std::vector<size_t>(units.begin() + 1, units.end()), false);
  }
  for (const size_t unit : units) {
    impl.gather(unit);
    impl.units[unit].held = true;
  }
  if (!grad_enabled) return;
  for (const size_t unit : units) impl.install_grads(impl.units[unit]);
}

void GatheredUnits::after_forward(bool grad_enabled) {
  if (!grad_enabled) impl_->release_all();
}

void GatheredUnits::before_child(const std::vector<size_t>& units, const std::vector<size_t>& ahead) {
  for (const size_t unit : units) {
    impl_->gather(unit);
    impl_->units[unit].held = false;
  }
  impl_->prefetch(ahead, false);
}

void GatheredUnits::after_child(const std::vector<size_t>& units, const std::vector<size_t>& ahead,
                                const at::Tensor& output, bool grad_enabled) {
  for (const size_t unit : units) impl_->release(impl_->units[unit]);
  if (!grad_enabled || units.empty() || !output.requires_grad()) return;
  std::weak_ptr<Impl> weak = impl_;
  output.register_hook([weak, units, ahead](const at::Tensor&) {
    auto state = weak.lock();
    if (!state) return;
    bool began = false;
    for (const size_t unit : units) {
      if (state->units[unit].done) continue;
      state->gather(unit);
      state->install_grads(state->units[unit]);
      began = true;
    }
    if (began) state->prefetch(ahead, true);
  });
}

}  // namespace accel::train
