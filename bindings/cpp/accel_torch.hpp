// accel for a torch::nn::Module of LibTorch's C++ frontend, header only, over accel.hpp: the module's forward
// and autograd stay the program's; accel brings rank 0's weights on every rank, the gradient all-reduce
// overlapped with backward, accumulation and no_sync, clipping, the fp16 grad scaler, its optimizers and
// schedulers, and checkpoints of the module's own tensors.
//
// The module's parameters and buffers are shared with libaccel through DLPack (no copy), and each trainable
// parameter's .grad() becomes accel's gradient storage (with several processes a view into its gradient
// bucket, as DDP's gradient_as_bucket_view), so that autograd accumulates straight into it. A post hook on
// each parameter's gradient accumulator tells accel when that gradient is final, which starts its bucket's
// all-reduce while the rest of backward runs, as DDP's hooks do.
//
// The program and libaccel must use the same LibTorch (the one libaccel was built against): a tensor crosses
// as DLPack, but autograd's hooks run libaccel's calls on the program's tensors.
//
//   accel::State state;
//   Net net;                                            // a torch::nn::Module
//   accel::ModuleModel model(state, *net);              // prepared: rank 0's weights everywhere
//   accel::Optimizer optimizer(model.model(), "adamw"); // accel's optimizer on the module's tensors
//   for (...) {
//     state.accumulate();
//     model.begin_forward();
//     model.backward(torch::nn::functional::cross_entropy(net->forward(x), y));
//     optimizer.step();
//     optimizer.zero_grad();                            // zeroes the storage in place
//   }
//
// Under zero_stage 3 (the prepare option; FSDP's FULL_SHARD) each trainable parameter is held, between steps,
// as this process's share in libaccel only: the module's parameters keep their shapes and no memory. A C++
// module has no forward hooks, so either begin_forward gathers every unit (by default each top-level child
// module, and the parameters the module holds itself: DeepSpeed's cut; every gather started before the first
// is waited for, accel_model_unit_prefetch), and a process holds the whole parameters from its forward into
// its backward; or, with begin_forward(grad_enabled, /*by_child=*/true), the program runs each top-level
// child's forward through forward_child, which gathers that child's units around it and again when autograd
// reaches its output (FSDP's wrapping of the child, reshard_after_forward), so that a process holds one
// child's parameters at a time beside the module's own, and the next child's gather in flight (prefetch: in
// forward the child that came next in the last forward, in backward the one before in this forward). Either way the backward hands each unit's gradients
// over and releases the unit as soon as all of them are accumulated, the rest at the end of backward, and
// between steps a process holds only its share of parameters, gradients and optimizer state. After an
// evaluation forward (no backward), release_parameters() lets go of the gathered parameters.
//
// Thread safety: as accel.hpp's Model; the hooks run on the thread that runs backward (the caller's, on the
// CPU; autograd's device threads on a GPU), one at a time.
#pragma once

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "accel.hpp"

namespace accel {

// LibTorch's tensor as accel's, sharing its memory (a batch for a loader's dataset, say).
inline Tensor from_torch(const at::Tensor& tensor) {
  DLManagedTensor* managed = at::toDLPack(tensor.detach());
  try {
    return Tensor::from_dlpack(managed);
  } catch (...) {
    managed->deleter(managed);  // refused: still ours
    throw;
  }
}

// accel's tensor as LibTorch's, sharing its memory (a batch's field, a gradient view).
inline at::Tensor to_torch(const Tensor& tensor) { return at::fromDLPack(tensor.to_dlpack()); }

// A torch::nn::Module handed to accel. Construction is prepare(model): collective with several processes,
// it copies rank 0's parameters and buffers into every rank's module in place and installs the gradient
// storage. The module must stay alive as long as this object, and keep its tensors (do not replace a
// parameter); neither object may be copied or moved.
class ModuleModel {
 public:
  // Parameters with requires_grad false are frozen; a tensor registered under two names (tied weights)
  // is one parameter, under its first name. options: accel_state_prepare_model's (find_unused_parameters,
  // bucket_cap_mb, broadcast_buffers, zero_stage, ...). units: under zero_stage 3, each parameter's unit
  // (Model::set_units, in named_parameters' order without repeats); empty: by top-level child (above).
  // Meanwhile the trainable parameters lend their memory to libaccel (lend_parameters): nothing may read them
  // until it returns. On an error every parameter holds again what libaccel holds of it.
  ModuleModel(State& state, torch::nn::Module& module, const Options* options = nullptr,
              std::vector<int32_t> units = {})
      : state_(&state) {
    std::vector<std::string> names, buffer_names;
    std::vector<Tensor> shared, shared_buffers;
    std::vector<bool> trainable;
    std::set<const c10::TensorImpl*> seen;
    for (const auto& item : module.named_parameters()) {
      if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
      names.push_back(item.key());
      parameters_.push_back(item.value());
      shared.push_back(from_torch(item.value()));
      trainable.push_back(item.value().requires_grad());
    }
    for (const auto& item : module.named_buffers()) {
      buffer_names.push_back(item.key());
      shared_buffers.push_back(from_torch(item.value()));
    }
    model_ = std::make_shared<Model>(Model::from_tensors(named(names, shared), trainable, named(buffer_names, shared_buffers)));
    shared.clear();
    model_->set_units(units.empty() ? units_by_child(module, trainable) : units);
    lend_parameters(trainable);
    try {
      state.prepare(*model_, options);
    } catch (...) {
      take_back_parameters(trainable);
      throw;
    }
    if (model_->num_units() > 0) {
      sharded_ = std::make_shared<Sharded>(model_, parameters_, trainable, module);
      for (size_t index = 0; index < parameters_.size(); ++index) {
        if (trainable[index]) watch_sharded(index);
      }
      return;
    }
    take_back_parameters(trainable);
    for (size_t index = 0; index < parameters_.size(); ++index) {
      if (trainable[index]) install_storage(index);
    }
  }
  ModuleModel(const ModuleModel&) = delete;
  ModuleModel& operator=(const ModuleModel&) = delete;

  // Before each forward of the module (grad_enabled false under torch::NoGradGuard): with several processes
  // it may send rank 0's buffers (collective, on every rank alike) and decides whether the coming backward
  // synchronises (accumulate, no_sync).
  // Under zero_stage 3 it also gathers every unit (collective), and with grad_enabled gives each trainable
  // parameter its gradient view; with by_child, only the units that lie in no top-level child, the program
  // then running every child's forward through forward_child.
  void begin_forward(bool grad_enabled = true, bool by_child = false) {
    model_->begin_forward(grad_enabled);
    if (sharded_) sharded_->begin_forward(grad_enabled, by_child);
  }

  // forward(), a forward of `child`, one of the module's top-level children (a module of its own: one whose
  // parameters it alone uses), after begin_forward(grad_enabled, true): under zero_stage 3 the child's units
  // are gathered for it (collective: every process runs the same children in the same order) and released
  // after it; when forward's output requires grad, a hook on it gathers them again before autograd runs the
  // child's backward and gives their parameters their gradient views. Meanwhile the gather of the child
  // expected next is started (FSDP's forward_prefetch and BACKWARD_PRE): in forward the child that followed
  // this one in the last forward, in backward the one before it in this forward; a guess not taken is waited
  // for and released by end_backward or release_parameters. Returns forward's output. Otherwise
  // (no stage 3, or begin_forward without by_child) just forward(). Error(ACCEL_ERR_INVALID_ARGUMENT) for a
  // module that is not a top-level child.
  at::Tensor forward_child(const torch::nn::Module& child, const std::function<at::Tensor()>& forward) {
    if (!sharded_ || !sharded_->by_child) return forward();
    const auto found = sharded_->child_units.find(&child);
    if (found == sharded_->child_units.end()) {
      throw Error(ACCEL_ERR_INVALID_ARGUMENT, "ACCEL_ERR_INVALID_ARGUMENT: forward_child: the module '" + child.name() +
                                                  "' is not one of the prepared module's top-level children");
    }
    const std::vector<size_t> units = found->second;
    Sharded& sharded = *sharded_;
    if (std::find(sharded.order_now.begin(), sharded.order_now.end(), &child) == sharded.order_now.end()) {
      sharded.order_now.push_back(&child);
    }
    sharded.gather(units);
    const auto last = std::find(sharded.last_order.begin(), sharded.last_order.end(), &child);
    if (last != sharded.last_order.end() && last + 1 != sharded.last_order.end()) {
      sharded.prefetch(sharded.child_units.at(*(last + 1)), /*for_backward=*/false);
    }
    at::Tensor output = forward();
    if (at::GradMode::is_enabled() && output.defined() && output.requires_grad()) {
      std::weak_ptr<Sharded> weak = sharded_;
      const torch::nn::Module* key = &child;
      output.register_hook([weak, key, units](const at::Tensor&) {
        if (const auto sharded = weak.lock()) sharded->before_backward(key, units);
      });
    }
    for (const size_t unit : units) sharded_->release(sharded_->units[unit]);
    return output;
  }

  // Accelerate's backward: (loss / gradient_accumulation_steps).backward(), times the loss scale under fp16
  // (which accel's optimizers and unscale_gradients undo), then end_backward.
  void backward(const at::Tensor& loss) {
    at::Tensor scaled = loss;
    if (const int64_t steps = state_->gradient_accumulation_steps(); steps > 1) scaled = scaled / static_cast<double>(steps);
    if (state_->mixed_precision() == "fp16") scaled = scaled * to_torch(state_->grad_scale());
    scaled.backward();
    end_backward();
  }

  // For a backward the program runs itself (several losses, retain_graph): after it, on a synchronising
  // step, every gradient holds the average over the ranks.
  // Under zero_stage 3 it first hands over the units the backward did not finish (zeros for those it did not
  // reach; collective) and releases every unit.
  void end_backward() {
    if (sharded_) sharded_->finish_backward();
    model_->end_backward();
  }

  // Under zero_stage 3, after a forward no backward follows (evaluation): the gathered parameters released
  // (the module's parameters then have no memory until the next begin_forward). Nothing otherwise.
  void release_parameters() {
    if (sharded_) sharded_->release_all();
  }

  // accel's handle on the module's tensors: for accel::Optimizer, clip_grad_norm, save_model, grad_sync_stat, ...
  Model& model() { return *model_; }

 private:
  static std::vector<std::pair<std::string, const Tensor*>> named(const std::vector<std::string>& names,
                                                                  const std::vector<Tensor>& tensors) {
    std::vector<std::pair<std::string, const Tensor*>> out;
    for (size_t i = 0; i < names.size(); ++i) out.emplace_back(names[i], &tensors[i]);
    return out;
  }

  // For prepare, the trainable parameters hold one element expanded to their shapes (what a process that
  // never reads its values may hand over), so that the library's handles are the only ones on their memory:
  // under zero_stage 3 each unit's memory goes as soon as the library has taken its share of it, rather than
  // the process keeping the whole model beside its shares until prepare ends.
  void lend_parameters(const std::vector<bool>& trainable) {
    at::NoGradGuard no_grad;
    for (size_t index = 0; index < parameters_.size(); ++index) {
      if (!trainable[index]) continue;
      at::Tensor& parameter = parameters_[index];
      parameter.set_data(at::empty({}, parameter.options().requires_grad(false)).expand(parameter.sizes()));
    }
  }

  // After a prepare that failed or sharded nothing: each trainable parameter holds again what the library holds
  // of it (nothing of a unit a failed prepare had taken: its values were in the shares of a job that cannot
  // go on).
  void take_back_parameters(const std::vector<bool>& trainable) {
    at::NoGradGuard no_grad;
    for (size_t index = 0; index < parameters_.size(); ++index) {
      if (!trainable[index]) continue;
      at::Tensor held;
      try {
        held = to_torch(model_->parameter(index));
      } catch (const Error&) {
        return;  // sharded already
      }
      if (held.numel() == 0 || held.data_ptr() != nullptr) parameters_[index].set_data(held);
    }
  }

  // The parameter's .grad() becomes accel's storage, and its gradient accumulator's post hook marks it
  // ready. A zero_grad that set the gradient to none (torch's default since 2.0) leaves autograd a fresh
  // tensor: the hook copies it into the storage and installs the storage again, as DDP does.
  void install_storage(size_t index) {
    at::Tensor parameter = parameters_[index];
    const at::Tensor storage = to_torch(model_->grad_view(index));
    parameter.mutable_grad() = storage;
    auto accumulator = torch::autograd::impl::grad_accumulator(parameter);
    // The hook holds the model (not this object), so a backward after this object is gone stays safe.
    std::shared_ptr<Model> model = model_;
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [model, parameter, storage, index](const torch::autograd::variable_list& outputs,
                                           const torch::autograd::variable_list&) mutable {
          at::Tensor& grad = parameter.mutable_grad();
          if (!grad.defined() || grad.data_ptr() != storage.data_ptr()) {
            if (grad.defined()) storage.copy_(grad);
            grad = storage;
          }
          model->grad_ready(index);
          return outputs;
        }));
    accumulators_.push_back(std::move(accumulator));  // the parameter holds its accumulator only weakly
  }

  // DeepSpeed's ZeRO-3 cut: the trainable parameters of each top-level child one unit (a tensor two children
  // share goes with the first), then those the module registers itself; entries of frozen ones are unread.
  std::vector<int32_t> units_by_child(torch::nn::Module& module, const std::vector<bool>& trainable) const {
    std::map<const c10::TensorImpl*, int32_t> unit_of;
    int32_t next = 0;
    const auto assign = [&](const std::vector<at::Tensor>& tensors) {
      bool used = false;
      for (const at::Tensor& tensor : tensors) {
        if (tensor.requires_grad() && unit_of.emplace(tensor.unsafeGetTensorImpl(), next).second) used = true;
      }
      next += used ? 1 : 0;
    };
    for (const auto& child : module.children()) assign(child->parameters());
    assign(module.parameters(/*recurse=*/false));
    std::vector<int32_t> units;
    for (size_t index = 0; index < parameters_.size(); ++index) {
      units.push_back(trainable[index] ? unit_of.at(parameters_[index].unsafeGetTensorImpl()) : 0);
    }
    return units;
  }

  // Stage 3's units on the module's side: one buffer per unit, of which the unit's parameters are views, its
  // memory allocated while the unit is gathered and freed when it is released; one gradient buffer per unit
  // likewise. Held by the hooks too (a backward may outlive the ModuleModel).
  struct Sharded {
    struct Unit {
      at::Tensor flat;
      at::Tensor grads;  // undefined between a reduction and the next forward
      std::vector<size_t> members;
      size_t waiting = 0;  // members whose gradient this backward has not accumulated
      bool done = true;    // handed over in this backward
      bool gathered = false;
      bool prefetched = false;  // its gather in flight: libaccel writes into flat until unit_gather
    };

    Sharded(std::shared_ptr<Model> model, const std::vector<at::Tensor>& all, const std::vector<bool>& trainable,
            torch::nn::Module& module)
        : model(std::move(model)), parameters(all), unit_of(all.size(), 0), units(this->model->num_units()) {
      for (size_t index = 0; index < all.size(); ++index) {
        if (!trainable[index]) continue;
        const auto [unit, offset] = this->model->parameter_place(index);
        unit_of[index] = unit;
        Unit& owner = units[unit];
        if (!owner.flat.defined()) {
          owner.flat = at::empty({this->model->unit_numel(unit)}, all[index].options().requires_grad(false));
          owner.gathered = true;
        }
        owner.members.push_back(index);
        at::NoGradGuard no_grad;
        parameters[index].set_data(owner.flat.narrow(0, offset, all[index].numel()).view(all[index].sizes()));
      }
      release_all();
      // Each top-level child's units: those all of whose parameters are the child's.
      std::map<const c10::TensorImpl*, size_t> index_of;
      for (size_t index = 0; index < all.size(); ++index) index_of.emplace(all[index].unsafeGetTensorImpl(), index);
      for (const auto& child : module.children()) {
        std::set<size_t> mine;
        for (const at::Tensor& tensor : child->parameters()) mine.insert(index_of.at(tensor.unsafeGetTensorImpl()));
        std::vector<size_t>& lying = child_units[child.get()];
        for (size_t unit = 0; unit < units.size(); ++unit) {
          const auto& members = units[unit].members;
          if (std::all_of(members.begin(), members.end(), [&](size_t member) { return mine.count(member) != 0; })) {
            lying.push_back(unit);
          }
        }
      }
      in_child.assign(units.size(), false);
      for (const auto& [child, lying] : child_units) {
        for (const size_t unit : lying) in_child[unit] = true;
      }
    }

    void release(Unit& unit) {
      if (unit.prefetched) wait_for(static_cast<size_t>(&unit - units.data()));
      if (!unit.gathered) return;
      c10::StorageImpl* storage = unit.flat.storage().unsafeGetStorageImpl();
      storage->set_data_ptr_noswap(at::DataPtr(nullptr, unit.flat.device()));
      storage->set_nbytes(0);
      unit.gathered = false;
    }
    void release_all() {
      for (Unit& unit : units) release(unit);
    }

    // The unit's gather started (prefetch) or done, into fresh memory.
    void start_gather(size_t index, bool prefetch) {
      Unit& unit = units[index];
      release(unit);  // whatever it held may be from before a step
      const size_t bytes = static_cast<size_t>(unit.flat.numel()) * unit.flat.element_size();
      c10::StorageImpl* storage = unit.flat.storage().unsafeGetStorageImpl();
      storage->set_data_ptr_noswap(c10::GetAllocator(unit.flat.device().type())->allocate(bytes));
      storage->set_nbytes(bytes);
      Tensor full = from_torch(unit.flat);
      if (prefetch) {
        model->unit_prefetch(index, full);
        unit.prefetched = true;
      } else {
        model->unit_gather(index, full);
        unit.gathered = true;
      }
    }

    // A prefetched unit's gather waited for.
    void wait_for(size_t index) {
      Unit& unit = units[index];
      Tensor full = from_torch(unit.flat);
      model->unit_gather(index, full);
      unit.prefetched = false;
      unit.gathered = true;
    }

    // The unit's gradient buffer (zeros when new), its views the members' gradients.
    void install_grads(Unit& unit) {
      if (!unit.grads.defined()) unit.grads = at::zeros_like(unit.flat);
      for (size_t member : unit.members) {
        at::Tensor& grad = parameters[member].mutable_grad();
        const at::Tensor view = view_of(unit, unit.grads, member);
        if (!grad.defined() || grad.data_ptr() != view.data_ptr()) {
          if (grad.defined()) view.add_(grad);  // what autograd put elsewhere (after a grad set to none)
          grad = view;
        }
      }
    }

    at::Tensor view_of(const Unit& unit, const at::Tensor& buffer, size_t member) const {
      const at::Tensor& parameter = parameters[member];
      const int64_t offset = parameter.storage_offset() - unit.flat.storage_offset();
      return buffer.narrow(0, offset, parameter.numel()).view(parameter.sizes());
    }

    // Every unit (by_child false), or those in no top-level child, gathered: every gather after the first
    // started before the first is waited for, so that they travel one behind another.
    void begin_forward(bool grad_enabled, bool by_child_now) {
      by_child = by_child_now;
      if (!order_now.empty()) last_order = std::move(order_now);
      order_now.clear();
      std::vector<size_t> now;
      for (size_t index = 0; index < units.size(); ++index) {
        if (!by_child || !in_child[index]) now.push_back(index);
      }
      gather(now);
      if (!grad_enabled) return;
      for (Unit& unit : units) {
        unit.waiting = unit.members.size();
        unit.done = false;
      }
      for (const size_t index : now) install_grads(units[index]);
    }

    // The units gathered: one prefetched only waited for; of the others, every gather after the first started
    // before the first is waited for, so that they travel one behind another.
    void gather(const std::vector<size_t>& indices) {
      std::vector<size_t> fresh;
      for (const size_t index : indices) {
        if (units[index].prefetched) {
          wait_for(index);
        } else {
          fresh.push_back(index);
        }
      }
      for (size_t k = 1; k < fresh.size(); ++k) start_gather(fresh[k], /*prefetch=*/true);
      if (!fresh.empty()) start_gather(fresh[0], /*prefetch=*/false);
      for (size_t k = 1; k < fresh.size(); ++k) wait_for(fresh[k]);
    }

    // The gathers of these units started, but of those gathered or on their way (and, for a backward, of those
    // it has handed over).
    void prefetch(const std::vector<size_t>& indices, bool for_backward) {
      for (const size_t index : indices) {
        const Unit& unit = units[index];
        if (!unit.gathered && !unit.prefetched && !(for_backward && unit.done)) start_gather(index, /*prefetch=*/true);
      }
    }

    // A child's units before autograd runs its backward: gathered again, their gradient views installed; the
    // gather of the child before it in this forward started.
    void before_backward(const torch::nn::Module* child, const std::vector<size_t>& indices) {
      std::vector<size_t> needed;
      for (const size_t index : indices) {
        if (!units[index].done && !units[index].gathered) needed.push_back(index);
      }
      gather(needed);
      const auto place = std::find(order_now.begin(), order_now.end(), child);
      if (place != order_now.end() && place != order_now.begin()) prefetch(child_units.at(*(place - 1)), /*for_backward=*/true);
      for (const size_t index : indices) {
        if (!units[index].done) install_grads(units[index]);
      }
    }

    void accumulated(size_t index) {
      Unit& unit = units[unit_of[index]];
      if (unit.done) return;
      install_grads(unit);
      if (--unit.waiting == 0) reduce(unit_of[index]);
    }

    void reduce(size_t index) {
      Unit& unit = units[index];
      unit.done = true;
      Tensor gradients = from_torch(unit.grads);
      if (model->unit_reduce(index, gradients)) {
        for (size_t member : unit.members) parameters[member].mutable_grad() = at::Tensor();
        unit.grads = at::Tensor();
      }
      release(unit);
    }

    void finish_backward() {
      for (size_t index = 0; index < units.size(); ++index) {
        if (units[index].done) continue;
        install_grads(units[index]);
        reduce(index);
      }
      release_all();
    }

    std::shared_ptr<Model> model;
    std::vector<at::Tensor> parameters;
    std::vector<size_t> unit_of;
    std::vector<Unit> units;
    std::map<const torch::nn::Module*, std::vector<size_t>> child_units;
    std::vector<bool> in_child;  // per unit: whether it lies in a top-level child
    bool by_child = false;       // this forward's begin_forward's
    // The children forward_child ran, in order: in this forward and in the last one (what prefetch guesses by).
    std::vector<const torch::nn::Module*> order_now, last_order;
  };

  // Under stage 3, the gradient accumulator's post hook counts the parameter's unit's gradients in.
  void watch_sharded(size_t index) {
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters_[index]);
    std::shared_ptr<Sharded> sharded = sharded_;
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [sharded, index](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          sharded->accumulated(index);
          return outputs;
        }));
    accumulators_.push_back(std::move(accumulator));
  }

  State* state_;
  std::shared_ptr<Model> model_;
  std::vector<at::Tensor> parameters_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::shared_ptr<Sharded> sharded_;
};

}  // namespace accel
