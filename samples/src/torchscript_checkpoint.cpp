// Checkpointing a TorchScript model's blocks (offtune/samples/torchscript_checkpoint.hpp).
//
// How: each block type gets two copies of its forward, kPlainMethod (as it was) and kRegionMethod
// (with every method it calls inlined), and forward's graph becomes a call of one operator,
// offtune::checkpoint_block(block, inputs), that runs the plain copy directly or the region copy
// inside offtune::checkpoint, as the block instance's flag attribute (kFlag) says. The parent's
// graph still calls the block's forward, so it is untouched; the executor inlines the new forward,
// and the operator is an opaque call that it neither differentiates (autodiff has no formula for
// it: autograd sees the ops inside) nor moves (conservative alias analysis).
//
// Why two copies: a checkpointed region runs twice, in the forward and in the recompute (maybe
// on an autograd worker thread), and both runs must save the same tensors. The profiling executor
// does not promise that. It runs a method's first call(s) profiled, then compiles a plan of its
// own (autodiff differentiable graphs, fusion groups) that saves other tensors, and from then on
// it returns that plan whatever the caller asks; so a region whose forward ran before the switch
// and whose recompute ran after it would fail checkpoint()'s check, or compute other gradients.
// Only its optimizer switch (GraphOptimizerEnabledGuard) keeps it on one fixed plan, the graph as
// written with each op's own autograd formula (what eager runs), and only for an executor that
// has not compiled an optimized plan yet. So the region copy is only ever run with the optimizer
// off, and it calls no other method: what it calls is inlined into it here, as the executor would
// do only when it optimizes, so that no executor but its own (which never compiles an optimized
// plan) runs inside a region. The plain copy keeps the executor's optimizations for blocks that
// are not checkpointed.
//
// Why libtorch's jit internals (GraphFunction, Graph, ClassType, Inline, registerOperator, the
// executor's optimizer switch): a compiled graph has no public seam where a C++ caller can wrap
// one submodule's call, and torch.utils.checkpoint has no TorchScript counterpart. They are not a
// stable API; everything used here is kept to this file and was checked against the pinned torch
// (2.15, the PyPI wheel's headers and libtorch_cpu.so, and the executor's behaviour described
// above); tests/test_torchscript_checkpoint.cpp covers each of them.
#include "offtune/samples/torchscript_checkpoint.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

namespace offtune::samples {
namespace {

namespace jit = torch::jit;
using ObjectPtr = c10::intrusive_ptr<c10::ivalue::Object>;

// The two copies of forward, and the per-instance switch (a bool attribute of the block type; an
// instance without it, e.g. of a shared type outside the blocks' container, runs plainly).
constexpr const char* kPlainMethod = "__offtune_plain_forward";
constexpr const char* kRegionMethod = "__offtune_region_forward";
constexpr const char* kFlag = "__offtune_checkpoint";
constexpr const char* kOperator = "offtune::checkpoint_block";

// ---- names -------------------------------------------------------------------------------------

// A module's type name without the `___torch_mangle_N` atoms that jit adds to keep two types of
// one Python class apart (tracing makes one type per instance).
std::string type_name(const jit::Module& m) {
  const auto& name = m.type()->name();
  if (!name) return "?";
  std::string out;
  for (const std::string& atom : name->atoms()) {
    if (atom.starts_with("___torch_mangle_")) continue;
    if (!out.empty()) out += '.';
    out += atom;
  }
  return out;
}

std::string short_type_name(const jit::Module& m) {
  const std::string full = type_name(m);
  return full.substr(full.rfind('.') + 1);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string top_level_children(const jit::Module& module) {
  std::vector<std::string> names;
  for (const auto& child : module.named_children()) names.push_back(child.name);
  return names.empty() ? "none" : join(names);
}

std::string child_path(const std::string& parent, const std::string& name) {
  return parent.empty() ? name : parent + "." + name;
}

// ---- the operator ------------------------------------------------------------------------------

bool checkpoint_on(const c10::ivalue::Object& block) {
  const auto slot = block.type()->findAttributeSlot(kFlag);
  if (!slot || *slot >= block.slots().size()) return false;
  const c10::IValue& flag = block.getSlot(*slot);
  return flag.isBool() && flag.toBool();
}

std::vector<at::Tensor> call_method(const ObjectPtr& block, const std::string& method,
                                    const std::vector<at::Tensor>& inputs) {
  jit::Function& fn = block->type()->getMethod(method);
  jit::Stack stack;
  stack.reserve(inputs.size() + 1);
  stack.emplace_back(block);
  for (const at::Tensor& t : inputs) stack.emplace_back(t);
  fn.run(stack);
  const c10::IValue out = std::move(stack.back());
  if (out.isTensor()) return {out.toTensor()};
  std::vector<at::Tensor> outputs;  // a tuple of tensors: checked when the type was rewritten
  for (const c10::IValue& v : out.toTupleRef().elements()) outputs.push_back(v.toTensor());
  return outputs;
}

// offtune::checkpoint_block(Any block, Tensor[] inputs) -> Tensor[]
void run_checkpoint_block(jit::Stack& stack) {
  const std::vector<at::Tensor> inputs = jit::pop(stack).toTensorList().vec();
  const ObjectPtr block = jit::pop(stack).toObject();
  std::vector<at::Tensor> outputs;
  if (checkpoint_on(*block) && at::GradMode::is_enabled()) {
    // The region copy with the optimizer off, in the forward and in the recompute (the file's
    // header says why). The switch is thread-local (in 2.15 a thread_local in
    // update_graph_executor_opt.cpp), hence set inside the function, on the thread that runs it.
    outputs = checkpoint(
        [block](const std::vector<at::Tensor>& in) {
          const jit::GraphOptimizerEnabledGuard one_fixed_plan(false);
          return call_method(block, kRegionMethod, in);
        },
        inputs);
  } else {
    outputs = call_method(block, kPlainMethod, inputs);
  }
  c10::List<at::Tensor> list;
  list.reserve(outputs.size());
  for (at::Tensor& t : outputs) list.push_back(std::move(t));
  stack.emplace_back(std::move(list));
}

// Registered on first use rather than by a static initializer, which a static library's linker
// may drop. CONSERVATIVE: the operator calls arbitrary code, so no pass may reorder, merge or
// drop it.
void ensure_operator_registered() {
  static const jit::RegisterOperators registered(
      std::vector<std::optional<jit::Operator>>{jit::Operator(
          std::string(kOperator) + "(Any block, Tensor[] inputs) -> Tensor[]",
          [](jit::Stack& stack) { run_checkpoint_block(stack); },
          c10::AliasAnalysisKind::CONSERVATIVE)});
}

// ---- rewriting a block type --------------------------------------------------------------------

bool rewritten(const c10::ClassType& type) { return type.findMethod(kRegionMethod) != nullptr; }

// A block type checked and its region copy made, before anything is changed.
struct Prepared {
  c10::ClassTypePtr type;
  size_t results = 0;  // 1 for a Tensor, N for a tuple of N tensors
  std::shared_ptr<jit::Graph> region;
};

bool calls_a_function(const jit::Block& block) {
  return std::any_of(block.nodes().begin(), block.nodes().end(), [](const jit::Node* n) {
    return n->kind() == c10::prim::CallMethod || n->kind() == c10::prim::CallFunction ||
           std::any_of(n->blocks().begin(), n->blocks().end(),
                       [](const jit::Block* b) { return calls_a_function(*b); });
  });
}

// Refuses, in one line, a block that takes or returns anything but tensors, or whose forward
// calls something that cannot be inlined (an interface's method).
Prepared prepare(const jit::Module& block, const std::string& path) {
  const std::string who = "cannot checkpoint block '" + path + "' (" + short_type_name(block) + ")";
  jit::Function* forward = block.type()->findMethod("forward");
  jit::GraphFunction* graph_forward = forward ? jit::tryToGraphFunction(*forward) : nullptr;
  if (graph_forward == nullptr) {
    throw std::invalid_argument(who + ": it has no TorchScript forward");
  }
  graph_forward->ensure_defined();
  const c10::FunctionSchema& schema = forward->getSchema();
  const auto refuse = [&](const std::string& what, const c10::TypePtr& type) {
    throw std::invalid_argument(who + ": its forward " + what + " is " + type->annotation_str() +
                                "; a checkpointed block takes and returns tensors only");
  };
  for (size_t i = 1; i < schema.arguments().size(); ++i) {  // 0 is self
    const c10::Argument& arg = schema.arguments()[i];
    if (!arg.type()->cast<c10::TensorType>()) refuse("argument '" + arg.name() + "'", arg.type());
  }
  Prepared p;
  p.type = block.type();
  const c10::TypePtr& result = schema.returns().at(0).type();
  if (result->cast<c10::TensorType>()) {
    p.results = 1;
  } else {
    const auto tuple = result->cast<c10::TupleType>();
    if (!tuple || tuple->elements().empty()) refuse("result", result);
    for (const c10::TypePtr& element : tuple->elements()) {
      if (!element->cast<c10::TensorType>()) refuse("result", result);
    }
    p.results = tuple->elements().size();
  }
  p.region = graph_forward->graph()->copy();
  jit::Inline(*p.region);
  if (calls_a_function(*p.region->block())) {
    throw std::invalid_argument(who + ": its forward calls a method or function that cannot be " +
                                "inlined (an interface's), which a recompute could run otherwise");
  }
  return p;
}

// forward(self, a, b) -> (y, z) becomes
//   %outs = offtune::checkpoint_block(%self, [%a, %b])
//   %y, %z = prim::ListUnpack(%outs)
//   return (%y, %z)
// with the original body in kPlainMethod and, inlined, in kRegionMethod. forward's Graph is
// edited in place (its GraphFunction has no setter, and whatever points at the function stays
// valid); the graph inputs, hence the schema, stay as they were.
void rewrite(const Prepared& p) {
  const c10::ClassTypePtr& type = p.type;
  jit::GraphFunction& forward = jit::toGraphFunction(type->getMethod("forward"));
  const std::shared_ptr<jit::Graph> graph = forward.graph();
  const bool one_tensor =
      forward.getSchema().returns().at(0).type()->cast<c10::TensorType>() != nullptr;
  const auto cu = type->compilation_unit();
  type->addMethod(
      cu->create_function(c10::QualifiedName(*type->name(), kPlainMethod), graph->copy()));
  type->addMethod(cu->create_function(c10::QualifiedName(*type->name(), kRegionMethod), p.region));

  jit::Graph& g = *graph;
  const std::vector<jit::Node*> body(g.nodes().begin(), g.nodes().end());
  while (!g.outputs().empty()) g.eraseOutput(g.outputs().size() - 1);
  for (auto it = body.rbegin(); it != body.rend(); ++it) (*it)->destroy();  // users first

  const jit::WithInsertPoint at_return(g.return_node());
  const std::vector<jit::Value*> args(g.inputs().begin() + 1, g.inputs().end());
  jit::Value* list = g.insertNode(g.createList(c10::TensorType::get(), args))->output();
  jit::Node* call =
      g.insertNode(g.create(c10::Symbol::fromQualString(kOperator), {g.inputs()[0], list}, 1));
  call->output()->setType(c10::ListType::ofTensors());
  jit::Node* unpack = g.insertNode(g.createListUnpack(call->output(), p.results));
  if (one_tensor) {
    g.registerOutput(unpack->output());
  } else {
    g.registerOutput(g.insertNode(g.createTuple(unpack->outputs()))->output());
  }
  g.lint();
  forward.clear_optimized_graphs();  // a copy made for inlining before now holds the old body
}

// ---- finding the blocks ------------------------------------------------------------------------

struct Candidate {
  std::string path;
  int64_t count = 0;                 // children of the most common type
  std::string type;                  // that type's short name
  std::vector<std::string> members;  // the children of the most common type(s)
  bool structured = false;           // some member has submodules of its own

  std::string describe() const { return path + " (" + std::to_string(count) + " x " + type + ")"; }
  bool contains(const std::string& other) const {
    return std::any_of(members.begin(), members.end(), [&](const std::string& m) {
      const std::string block = child_path(path, m);
      return other == block || other.starts_with(block + ".");
    });
  }
};

std::vector<Candidate> candidates_of(const jit::Module& module) {
  std::vector<Candidate> out;
  for (const auto& item : module.named_modules()) {
    if (item.name.empty()) continue;  // the model itself: a path names a submodule
    std::map<std::string, std::vector<jit::NameModule>> by_type;
    for (const auto& child : item.value.named_children()) {
      by_type[type_name(child.value)].push_back(child);
    }
    Candidate c;
    c.path = item.name;
    for (const auto& [name, children] : by_type) {
      c.count = std::max(c.count, static_cast<int64_t>(children.size()));
    }
    if (c.count < 2) continue;
    for (const auto& [name, children] : by_type) {
      if (static_cast<int64_t>(children.size()) != c.count) continue;
      c.type = short_type_name(children.front().value);
      for (const auto& child : children) {
        c.members.push_back(child.name);
        c.structured = c.structured || child.value.named_children().size() > 0;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

// The child `name` of `parent`, if it has one.
std::optional<jit::Module> child_named(const jit::Module& parent, std::string_view name) {
  for (const auto& child : parent.named_children()) {
    if (child.name == name) return child.value;
  }
  return std::nullopt;
}

}  // namespace

std::string find_blocks(const torch::jit::Module& module) {
  std::vector<Candidate> all = candidates_of(module);
  // Blocks inside blocks (a decoder layer's pair of projections) are covered by the outer ones.
  std::vector<Candidate> outer;
  for (const Candidate& c : all) {
    const bool nested = std::any_of(all.begin(), all.end(), [&](const Candidate& other) {
      return &other != &c && other.contains(c.path);
    });
    if (!nested) outer.push_back(c);
  }
  if (std::any_of(outer.begin(), outer.end(), [](const Candidate& c) { return c.structured; })) {
    std::erase_if(outer, [](const Candidate& c) { return !c.structured; });
  }
  if (outer.empty()) {
    throw std::invalid_argument(
        "cannot find the blocks to checkpoint: no submodule of the model has 2 or more children "
        "of one type; pass --blocks PATH, the module path of the blocks' container (the model's "
        "top-level children: " +
        top_level_children(module) + ")");
  }
  int64_t most = 0;
  for (const Candidate& c : outer) most = std::max(most, c.count);
  std::vector<std::string> best;
  for (const Candidate& c : outer) {
    if (c.count == most) best.push_back(c.describe());
  }
  if (best.size() > 1) {
    throw std::invalid_argument("cannot tell which submodule holds the blocks to checkpoint (" +
                                join(best) + "); pass --blocks PATH");
  }
  for (const Candidate& c : outer) {
    if (c.count == most) return c.path;
  }
  return {};  // not reached: best has one entry
}

TorchScriptBlocks::TorchScriptBlocks(torch::jit::Module module, std::string_view path)
    : module_(std::move(module)), path_(path.empty() ? find_blocks(module_) : std::string(path)) {
  const auto bad_path = [&](const std::string& why) {
    throw std::invalid_argument("blocks path '" + path_ + "' " + why +
                                " (the model's top-level children: " + top_level_children(module_) +
                                ")");
  };
  jit::Module container = module_;
  std::string walked;
  for (size_t begin = 0; begin <= path_.size();) {
    const size_t end = std::min(path_.find('.', begin), path_.size());
    const std::string name = path_.substr(begin, end - begin);
    auto child = child_named(container, name);
    if (!child) {
      bad_path("does not exist: " + (walked.empty() ? "the model" : "'" + walked + "'") +
               " has no submodule '" + name + "'");
    }
    container = *child;
    walked = child_path(walked, name);
    begin = end + 1;
  }
  std::vector<std::string> names;
  for (const auto& child : container.named_children()) {
    names.push_back(child_path(path_, child.name));
    blocks_.push_back(child.value);
  }
  if (blocks_.empty()) bad_path("has no children to checkpoint as blocks");

  // Every type is checked before any is changed: a refusal leaves the module as it was.
  std::vector<Prepared> to_rewrite;
  std::set<const c10::ClassType*> seen;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const c10::ClassTypePtr type = blocks_[i].type();
    if (!seen.insert(type.get()).second || rewritten(*type)) continue;
    to_rewrite.push_back(prepare(blocks_[i], names[i]));
  }
  ensure_operator_registered();
  for (const Prepared& p : to_rewrite) rewrite(p);
  // Every instance of a rewritten type gets the flag, off.
  for (jit::Module m : module_.modules()) {
    if (rewritten(*m.type())) m.register_attribute(kFlag, c10::BoolType::get(), false);
  }
}

void TorchScriptBlocks::set_policy(const CheckpointPolicy& policy) {
  for (size_t i = 0; i < blocks_.size(); ++i) {
    blocks_[i].setattr(kFlag, policy.applies(static_cast<int64_t>(i)));
  }
}

void checkpoint_blocks(torch::jit::Module& module, std::string_view blocks_path,
                       const CheckpointPolicy& policy) {
  TorchScriptBlocks(module, blocks_path).set_policy(policy);
}

}  // namespace offtune::samples
