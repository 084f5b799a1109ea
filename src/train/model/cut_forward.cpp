#include "train/model/cut_forward.hpp"

#include <ATen/core/stack.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "core/error.hpp"
#include "train/model/called_modules.hpp"

namespace accel::train {
namespace {

// What a run calls back, found by the token its graph carries; the first exception a callback threw, kept so
// that run() throws it as itself rather than as the interpreter rewords it.
struct Around {
  const std::function<void(size_t)>& before;
  const std::function<void(size_t, const at::Tensor&)>& after;
  std::exception_ptr failed;
};

std::mutex running_mutex;
std::unordered_map<int64_t, Around*>& running() {
  static std::unordered_map<int64_t, Around*> runs;
  return runs;
}

Around& around_of(int64_t token) {
  std::lock_guard<std::mutex> lock(running_mutex);
  const auto found = running().find(token);
  if (found == running().end()) fail(Code::Internal, "a cut forward's operator ran outside its run");
  return *found->second;
}

// Calls `call` on the run of `token`; an exception is kept and the interpreter given a plain one to unwind with.
template <typename Call>
void call_back(int64_t token, Call&& call) {
  Around& around = around_of(token);
  try {
    call(around);
  } catch (...) {
    around.failed = std::current_exception();
    throw std::runtime_error("accel: the call around a child's forward failed");
  }
}

// accel::enter_child(x, token, child) -> x and accel::leave_child(output, token, child) -> output.
void enter_child(torch::jit::Stack& stack) {
  const int64_t child = torch::jit::pop(stack).toInt();
  const int64_t token = torch::jit::pop(stack).toInt();
  call_back(token, [&](Around& around) { around.before(static_cast<size_t>(child)); });
}

void leave_child(torch::jit::Stack& stack) {
  const int64_t child = torch::jit::pop(stack).toInt();
  const int64_t token = torch::jit::pop(stack).toInt();
  const at::Tensor output = stack.back().toTensor();
  call_back(token, [&](Around& around) { around.after(static_cast<size_t>(child), output); });
}

const c10::Symbol& enter_symbol() {
  static const c10::Symbol symbol = c10::Symbol::fromQualString("accel::enter_child");
  return symbol;
}

const c10::Symbol& leave_symbol() {
  static const c10::Symbol symbol = c10::Symbol::fromQualString("accel::leave_child");
  return symbol;
}

// Once per process, on the first cut: the operators the graphs call. CONSERVATIVE: they may read and write
// anything, so the optimiser keeps every read of a child's parameters between them.
void register_operators() {
  static const torch::jit::RegisterOperators registered({
      torch::jit::Operator("accel::enter_child(Tensor x, int token, int child) -> Tensor", enter_child,
                           c10::AliasAnalysisKind::CONSERVATIVE),
      torch::jit::Operator("accel::leave_child(Tensor output, int token, int child) -> Tensor", leave_child,
                           c10::AliasAnalysisKind::CONSERVATIVE),
  });
}

// The root's own methods forward calls (self.helper(x)), inlined into the copy, so that the submodules they
// call are seen, and cut around, as forward's own calls; methods they call in turn are inlined too
// (TorchScript has no recursion, so this ends).
void inline_own_methods(const torch::jit::Module& module, torch::jit::Graph& graph) {
  torch::jit::Value* self = graph.inputs()[0];
  for (bool inlined = true; inlined;) {
    inlined = false;
    for (const torch::jit::Use& use : self->uses()) {
      torch::jit::Node* call = use.user;
      if (call->kind() != c10::prim::CallMethod || use.offset != 0) continue;
      const auto method = module.find_method(call->s(c10::attr::name));
      if (!method) continue;
      torch::jit::inlineCallTo(call, &torch::jit::toGraphFunction(method->function()));
      inlined = true;
      break;  // self's uses changed
    }
  }
}

}  // namespace

struct CutForward::Impl {
  int64_t token = 0;
  std::unique_ptr<torch::jit::GraphFunction> function;
};

CutForward::CutForward(std::vector<std::string> children, std::vector<std::string> held, std::unique_ptr<Impl> impl)
    : children_(std::move(children)), held_(std::move(held)), impl_(std::move(impl)) {}
CutForward::~CutForward() = default;

std::unique_ptr<CutForward> CutForward::make(const torch::jit::Module& module) {
  const auto method = module.find_method("forward");
  if (!method) return nullptr;
  std::shared_ptr<torch::jit::Graph> graph = method->graph()->copy();
  inline_own_methods(module, *graph);
  CalledModules analysed = called_modules(*graph);
  const std::vector<CalledModule>& calls = analysed.cut;
  if (calls.empty()) return nullptr;
  register_operators();
  static std::atomic<int64_t> next_token{1};
  auto impl = std::make_unique<Impl>();
  impl->token = next_token++;
  std::vector<std::string> children;
  for (size_t k = 0; k < calls.size(); ++k) {
    children.push_back(calls[k].path);
    torch::jit::Node* call = calls[k].call;
    torch::jit::Value* token = nullptr;
    torch::jit::Value* child = nullptr;
    {
      const torch::jit::WithInsertPoint point(call);
      token = graph->insertConstant(impl->token);
      child = graph->insertConstant(static_cast<int64_t>(k));
    }
    size_t first_tensor = 1;
    while (call->inputs()[first_tensor]->type()->kind() != c10::TypeKind::TensorType) ++first_tensor;
    torch::jit::Node* enter = graph->create(enter_symbol(), {call->inputs()[first_tensor], token, child});
    enter->output()->setType(call->inputs()[first_tensor]->type());
    enter->insertBefore(call);
    call->replaceInput(first_tensor, enter->output());
    torch::jit::Node* leave = graph->create(leave_symbol(), {call->output(), token, child});
    leave->output()->setType(call->output()->type());
    leave->insertAfter(call);
    call->output()->replaceAllUsesAfterNodeWith(leave, leave->output());
  }
  impl->function = std::make_unique<torch::jit::GraphFunction>(
      c10::QualifiedName("accel_cut_forward"), graph, nullptr);
  return std::unique_ptr<CutForward>(new CutForward(std::move(children), std::move(analysed.held), std::move(impl)));
}

c10::IValue CutForward::run(const torch::jit::Module& module, std::vector<c10::IValue> inputs,
                            const std::unordered_map<std::string, c10::IValue>& named,
                            const std::function<void(size_t)>& before,
                            const std::function<void(size_t, const at::Tensor&)>& after) {
  Around around{before, after, nullptr};
  {
    std::lock_guard<std::mutex> lock(running_mutex);
    running()[impl_->token] = &around;
  }
  struct Unregister {
    int64_t token;
    ~Unregister() {
      std::lock_guard<std::mutex> lock(running_mutex);
      running().erase(token);
    }
  } unregister{impl_->token};
  torch::jit::Stack stack;
  stack.reserve(inputs.size() + 1);
  stack.emplace_back(module._ivalue());
  for (auto& input : inputs) stack.push_back(std::move(input));
  try {
    impl_->function->getSchema().checkAndNormalizeInputs(stack, named);
    impl_->function->run(stack);
  } catch (...) {
    if (around.failed) std::rethrow_exception(around.failed);
    throw;
  }
  return stack.front();
}

}  // namespace accel::train
