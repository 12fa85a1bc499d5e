// Checkpointing a TorchScript model's blocks by module path
// (offtune/samples/torchscript_checkpoint.hpp), on modules built in C++ the way torch.jit.script
// and torch.jit.trace lay them out: bit-identical loss and gradients to the same model without
// it over several steps (the executor changes plans after its first runs), with dropout, alone and
// under offloading; which blocks recompute under every:K; policy none restoring plain calls;
// blocks found in the model; one-line refusals; and the TorchScript workload's switch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "offtune/samples/registry.hpp"
#include "offtune/samples/torchscript_checkpoint.hpp"
#include "temp_dir.hpp"
#include "test_support.hpp"

namespace offtune::test {
namespace {

namespace jit = torch::jit;
using samples::TorchScriptBlocks;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kDim = 16;
constexpr int64_t kRows = 8;

// Modules of one compilation unit. Types are made once per name; mangle = a new type per call
// with the name plus a ___torch_mangle_N atom, as tracing makes one per instance.
class Builder {
 public:
  jit::Module module(const std::string& name, bool mangle = false) {
    const std::string qualified = "__torch__." + name;
    jit::Module m = (mangle || !types_.contains(qualified))
                        ? jit::Module(c10::QualifiedName(qualified), cu_, mangle)
                        : jit::Module(cu_, types_.at(qualified));
    types_.emplace(qualified, m.type());
    m.register_attribute("training", c10::BoolType::get(), true);
    return m;
  }
  bool defined(const jit::Module& m) const { return m.type()->findMethod("forward") != nullptr; }

  // A residual MLP block with dropout, x + fc2(dropout(gelu(fc1(x)))), its width per instance.
  jit::Module block(int64_t hidden, double dropout = 0.1, bool mangle = false) {
    jit::Module b = module("Block", mangle);
    param(b, "w1", {hidden, kDim});
    param(b, "b1", {hidden});
    param(b, "w2", {kDim, hidden});
    param(b, "b2", {kDim});
    if (!defined(b)) {
      b.define(
          "def forward(self, x):\n"
          "    h = torch.gelu(torch.linear(x, self.w1, self.b1))\n"
          "    h = torch.dropout(h, " +
          std::to_string(dropout) +
          ", self.training)\n"
          "    return x + torch.linear(h, self.w2, self.b2)\n");
    }
    return b;
  }

  // A container of blocks, as nn.ModuleList (children "0", "1", ...; no forward of its own).
  jit::Module list(const std::vector<jit::Module>& children) {
    jit::Module l = module("ModuleList" + std::to_string(lists_++));
    for (size_t i = 0; i < children.size(); ++i) l.register_module(std::to_string(i), children[i]);
    return l;
  }

  static void param(jit::Module& m, const std::string& name, at::IntArrayRef shape) {
    m.register_parameter(name, (torch::randn(shape) * 0.2).requires_grad_(true), false);
  }

 private:
  std::shared_ptr<jit::CompilationUnit> cu_ = std::make_shared<jit::CompilationUnit>();
  std::map<std::string, c10::ClassTypePtr> types_;
  int lists_ = 0;
};

// Calls of the blocks of `path` ("self.layers") in order, each output the next input.
std::string chain(const std::string& path, size_t n) {
  std::string src = "def forward(self, x):\n";
  for (size_t i = 0; i < n; ++i) {
    src += "    x = getattr(" + path + ", \"" + std::to_string(i) + "\").forward(x)\n";
  }
  return src + "    return x\n";
}

// Net: "layers" holds blocks of one type with hidden widths `hidden` (distinct widths make each
// block's recompute distinct in bytes); with `nested`, under "model" ("model.layers").
jit::Module make_net(const std::vector<int64_t>& hidden, bool nested = false, uint64_t seed = 7,
                     bool mangle = false) {
  torch::manual_seed(seed);
  Builder b;
  std::vector<jit::Module> blocks;
  for (int64_t h : hidden) blocks.push_back(b.block(h, 0.1, mangle));
  jit::Module layers = b.list(blocks);
  jit::Module inner = b.module(nested ? "Inner" : "Net");
  inner.register_module("layers", layers);
  inner.define(chain("self.layers", blocks.size()));
  if (!nested) return inner;
  jit::Module outer = b.module("Net");
  outer.register_module("model", inner);
  outer.define("def forward(self, x):\n    return self.model.forward(x)\n");
  return outer;
}

const std::vector<int64_t> kWidths{32, 48, 64, 80};

std::vector<at::Tensor> params_of(const jit::Module& m) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : m.parameters()) out.push_back(p);
  return out;
}

// Loss and gradients of one step, the RNG seeded the same way before each (dropout's masks).
std::vector<at::Tensor> run_step(jit::Module& m, const at::Tensor& input, ActivationOffloader* off,
                                 uint64_t seed = 1234) {
  torch::manual_seed(seed);
  return step([&] { return m.forward({input}).toTensor().pow(2).mean(); }, params_of(m), off);
}

void expect_identical(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(a[i], b[i])) << (i == 0 ? "loss" : "gradient " + std::to_string(i));
  }
}

// The bytes of each recompute, in the order backward ran them (the last block first).
struct Recomputes : Observer {
  std::mutex mutex;
  std::vector<int64_t> bytes;
  void on_recompute(const RecomputeEvent& e) override {
    std::lock_guard<std::mutex> lock(mutex);
    bytes.push_back(e.bytes);
  }
  std::vector<int64_t> take() {
    std::lock_guard<std::mutex> lock(mutex);
    return std::exchange(bytes, {});
  }
};

// An offloader that moves nothing (a threshold no test tensor reaches) and reports recomputes.
struct Watch {
  std::shared_ptr<Recomputes> recomputes = std::make_shared<Recomputes>();
  ActivationOffloader off{host_sim_options(int64_t{1} << 40)};
  Watch() { off.set_observer(recomputes); }
};

void expect_one_line(const std::string& message) {
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_FALSE(message.empty());
}

// What a refusal says, or "" when nothing was thrown.
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "nothing was refused";
  return "";
}

// ---- gradients ---------------------------------------------------------------------------------

// Five steps each: the executor profiles a method's first runs and optimizes it afterwards, and
// neither the forward nor the recompute may notice.
TEST(TorchScriptCheckpoint, BitIdenticalLossAndGradientsOverSeveralStepsWithDropout) {
  const at::Tensor input = torch::randn({kRows, kDim});
  for (const auto& policy : {CheckpointPolicy::all(), CheckpointPolicy::every_k(2)}) {
    SCOPED_TRACE(to_string(policy));
    jit::Module plain = make_net(kWidths);
    jit::Module ckpt = make_net(kWidths);
    samples::checkpoint_blocks(ckpt, "layers", policy);
    Watch watch;
    for (int s = 0; s < 5; ++s) {
      SCOPED_TRACE("step " + std::to_string(s));
      const auto reference = run_step(plain, input, nullptr, 1234 + s);
      expect_identical(run_step(ckpt, input, &watch.off, 1234 + s), reference);
      EXPECT_EQ(watch.recomputes->take().size(), policy == CheckpointPolicy::all() ? 4u : 2u);
    }
  }
}

TEST(TorchScriptCheckpoint, EveryTwoRecomputesBlocksZeroAndTwoOnly) {
  const at::Tensor input = torch::randn({kRows, kDim});
  jit::Module net = make_net(kWidths);
  TorchScriptBlocks blocks(net, "layers");
  EXPECT_EQ(blocks.size(), 4);
  Watch watch;
  blocks.set_policy(CheckpointPolicy::all());
  run_step(net, input, &watch.off);
  const std::vector<int64_t> all = watch.recomputes->take();
  ASSERT_EQ(all.size(), 4u);
  // Backward order, blocks 3, 2, 1, 0: the widths make every block's bytes different.
  EXPECT_GT(all[0], all[1]);
  EXPECT_GT(all[1], all[2]);
  EXPECT_GT(all[2], all[3]);
  blocks.set_policy(CheckpointPolicy::every_k(2));
  for (int s = 0; s < 3; ++s) {
    run_step(net, input, &watch.off);
    EXPECT_EQ(watch.recomputes->take(), (std::vector<int64_t>{all[1], all[3]}));
  }
  blocks.set_policy(CheckpointPolicy::every_k(3));  // blocks 0 and 3
  run_step(net, input, &watch.off);
  EXPECT_EQ(watch.recomputes->take(), (std::vector<int64_t>{all[0], all[3]}));
}

TEST(TorchScriptCheckpoint, PolicyNoneAfterAllIsPlainAgain) {
  const at::Tensor input = torch::randn({kRows, kDim});
  jit::Module plain = make_net(kWidths);
  jit::Module net = make_net(kWidths);
  TorchScriptBlocks blocks(net, "layers");
  Watch watch;
  blocks.set_policy(CheckpointPolicy::all());
  for (int s = 0; s < 2; ++s) run_step(net, input, &watch.off);
  EXPECT_EQ(watch.recomputes->take().size(), 8u);
  for (int s = 0; s < 2; ++s) run_step(plain, input, nullptr);  // the same steps seen
  blocks.set_policy(CheckpointPolicy::none());
  for (int s = 0; s < 3; ++s) {
    expect_identical(run_step(net, input, &watch.off), run_step(plain, input, nullptr));
    EXPECT_TRUE(watch.recomputes->take().empty());
    EXPECT_GT(watch.off.stats().packed, 0);  // the blocks' tensors are saved as usual
  }
  blocks.set_policy(CheckpointPolicy::all());
  run_step(net, input, &watch.off);
  EXPECT_EQ(watch.recomputes->take().size(), 4u);
}

TEST(TorchScriptCheckpoint, UnderOffloadingEverySetGivesBitIdenticalGradients) {
  const at::Tensor input = torch::randn({kRows, kDim});
  for (const auto set : {OffloadSet::All, OffloadSet::Boundaries}) {
    for (const auto& policy : {CheckpointPolicy::all(), CheckpointPolicy::every_k(2)}) {
      SCOPED_TRACE(std::string(to_string(set)) + " " + to_string(policy));
      jit::Module plain = make_net(kWidths);
      jit::Module net = make_net(kWidths);
      samples::checkpoint_blocks(net, "layers", policy);
      OffloadOptions o = host_sim_options(0, /*window=*/1);
      o.offload = set;
      o.debug_copy_delay_ns = 200'000;  // room for a missing wait to show
      ActivationOffloader off(o);
      for (int s = 0; s < 4; ++s) {
        expect_identical(run_step(net, input, &off, 99 + s),
                         run_step(plain, input, nullptr, 99 + s));
      }
      EXPECT_GT(off.stats().offloaded, 0);
      off.synchronize();
      EXPECT_TRUE(off.resident().resting());
      expect_no_stream_races();
    }
  }
}

// A block of two tensors in, a tuple of two out; the other input has no gradient of its own.
TEST(TorchScriptCheckpoint, ATupleReturningBlockWithTwoInputs) {
  auto make = [] {
    torch::manual_seed(5);
    Builder b;
    std::vector<jit::Module> blocks;
    for (int i = 0; i < 3; ++i) {
      jit::Module blk = b.module("Pair");
      Builder::param(blk, "w", {kDim, kDim});
      if (!b.defined(blk)) {
        blk.define(
            "def forward(self, x, y):\n"
            "    h = torch.tanh(torch.matmul(x, self.w))\n"
            "    return h + torch.sigmoid(y), torch.dropout(h * y, 0.2, self.training)\n");
      }
      blocks.push_back(blk);
    }
    jit::Module net = b.module("PairNet");
    net.register_module("pairs", b.list(blocks));
    net.define(
        "def forward(self, x):\n"
        "    y = x * 0.5\n"
        "    x, y = getattr(self.pairs, \"0\").forward(x, y)\n"
        "    x, y = getattr(self.pairs, \"1\").forward(x, y)\n"
        "    x, y = getattr(self.pairs, \"2\").forward(x, y)\n"
        "    return x * y\n");
    return net;
  };
  const at::Tensor input = torch::randn({kRows, kDim});
  jit::Module plain = make();
  jit::Module net = make();
  EXPECT_EQ(samples::find_blocks(net), "pairs");
  samples::checkpoint_blocks(net, "", CheckpointPolicy::all());
  Watch watch;
  for (int s = 0; s < 4; ++s) {
    // The reference as eager would run it: after its first run the executor differentiates these
    // ops (tanh, sigmoid, matmul) with autodiff's formulas, not bit-identical to autograd's, which
    // a checkpointed block uses (it runs unoptimized: torchscript_checkpoint.cpp says why).
    std::vector<at::Tensor> reference;
    {
      const jit::GraphOptimizerEnabledGuard as_eager(false);
      reference = run_step(plain, input, nullptr, s);
    }
    expect_identical(run_step(net, input, &watch.off, s), reference);
    EXPECT_EQ(watch.recomputes->take().size(), 3u);
  }
}

// Tracing gives every instance a type of its own (Block, ___torch_mangle_1.Block, ...): each is
// rewritten, and they still count as one type when looking for the blocks.
TEST(TorchScriptCheckpoint, ATypePerInstanceAsTracingMakes) {
  const at::Tensor input = torch::randn({kRows, kDim});
  jit::Module plain = make_net(kWidths, false, 7, /*mangle=*/true);
  jit::Module net = make_net(kWidths, false, 7, /*mangle=*/true);
  std::set<std::string> types;
  for (const auto& child : net.attr("layers").toModule().named_children()) {
    types.insert(child.value.type()->name()->qualifiedName());
  }
  EXPECT_EQ(types.size(), 4u);
  EXPECT_EQ(samples::find_blocks(net), "layers");
  TorchScriptBlocks blocks(net, "");
  blocks.set_policy(CheckpointPolicy::every_k(2));
  Watch watch;
  for (int s = 0; s < 4; ++s) {
    expect_identical(run_step(net, input, &watch.off, s), run_step(plain, input, nullptr, s));
    EXPECT_EQ(watch.recomputes->take().size(), 2u);
  }
}

// Blocks that call submodules of one shared type (a decoder layer's projections): under every:2
// the plain blocks' calls optimize the submodules' executors after their first runs, which a
// region must not run into between its forward and its recompute.
TEST(TorchScriptCheckpoint, BlocksCallingSubmodulesSharedWithPlainBlocks) {
  auto make = [] {
    torch::manual_seed(8);
    Builder b;
    auto linear = [&](int64_t out, int64_t in) {
      jit::Module l = b.module("Lin");
      Builder::param(l, "weight", {out, in});
      Builder::param(l, "bias", {out});
      if (!b.defined(l)) {
        l.define("def forward(self, x):\n    return torch.linear(x, self.weight, self.bias)\n");
      }
      return l;
    };
    std::vector<jit::Module> layers;
    for (int i = 0; i < 4; ++i) {
      jit::Module layer = b.module("Layer");
      layer.register_module("up", linear(4 * kDim, kDim));
      layer.register_module("down", linear(kDim, 4 * kDim));
      if (!b.defined(layer)) {
        layer.define(
            "def forward(self, x):\n"
            "    h = torch.dropout(torch.gelu(self.up.forward(x)), 0.1, self.training)\n"
            "    return x + self.down.forward(h)\n");
      }
      layers.push_back(layer);
    }
    jit::Module net = b.module("Decoder");
    net.register_module("layers", b.list(layers));
    net.define(chain("self.layers", layers.size()));
    return net;
  };
  const at::Tensor input = torch::randn({kRows, kDim});
  jit::Module plain = make();
  jit::Module net = make();
  samples::checkpoint_blocks(net, "", CheckpointPolicy::every_k(2));
  Watch watch;
  for (int s = 0; s < 5; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    expect_identical(run_step(net, input, &watch.off, s), run_step(plain, input, nullptr, s));
    EXPECT_EQ(watch.recomputes->take().size(), 2u);
  }
}

TEST(TorchScriptCheckpoint, NoGradModeAndEvalAreCallsThrough) {
  const at::Tensor input = torch::randn({kRows, kDim});
  jit::Module plain = make_net(kWidths);
  jit::Module net = make_net(kWidths);
  samples::checkpoint_blocks(net, "layers", CheckpointPolicy::all());
  plain.eval();
  net.eval();
  at::NoGradGuard no_grad;
  for (int s = 0; s < 3; ++s) {
    EXPECT_TRUE(bitwise_equal(net.forward({input}).toTensor(), plain.forward({input}).toTensor()));
  }
}

// Setting up twice (a second TorchScriptBlocks, or checkpoint_blocks again) rewrites nothing more.
TEST(TorchScriptCheckpoint, SettingUpTwiceIsHarmless) {
  const at::Tensor input = torch::randn({kRows, kDim});
  jit::Module plain = make_net(kWidths);
  jit::Module net = make_net(kWidths);
  samples::checkpoint_blocks(net, "layers", CheckpointPolicy::all());
  samples::checkpoint_blocks(net, "layers", CheckpointPolicy::every_k(2));
  Watch watch;
  expect_identical(run_step(net, input, &watch.off), run_step(plain, input, nullptr));
  EXPECT_EQ(watch.recomputes->take().size(), 2u);
}

// The recompute runs with the executor's optimizer off on whichever thread runs it: the switch
// must be per thread in the pinned torch, or one region's guard would change another thread's
// plans.
TEST(TorchScriptCheckpoint, TheExecutorsOptimizerSwitchIsPerThread) {
  ASSERT_TRUE(jit::getGraphExecutorOptimize());
  const jit::GraphOptimizerEnabledGuard off(false);
  bool other = false;
  std::thread([&] { other = jit::getGraphExecutorOptimize(); }).join();
  EXPECT_TRUE(other);
  EXPECT_FALSE(jit::getGraphExecutorOptimize());
}

// ---- finding the blocks ------------------------------------------------------------------------

TEST(TorchScriptBlocksFind, TheContainerOfTheBlocksFlatOrNested) {
  EXPECT_EQ(samples::find_blocks(make_net(kWidths)), "layers");
  jit::Module nested = make_net(kWidths, /*nested=*/true);
  EXPECT_EQ(samples::find_blocks(nested), "model.layers");
  // And nested checkpointing works from there.
  const at::Tensor input = torch::randn({kRows, kDim});
  jit::Module plain = make_net(kWidths, true);
  TorchScriptBlocks blocks(nested, "");
  EXPECT_EQ(blocks.path(), "model.layers");
  blocks.set_policy(CheckpointPolicy::all());
  Watch watch;
  for (int s = 0; s < 4; ++s) {
    expect_identical(run_step(nested, input, &watch.off, s), run_step(plain, input, nullptr, s));
    EXPECT_EQ(watch.recomputes->take().size(), 4u);
  }
}

// Two decoder-like blocks, each with a pair of projections of one type, next to an embedding pair
// of three: the blocks win over the pairs inside them (nested) and over the leaves (the tiny LM
// of export_torchscript.py has exactly this shape with 2 layers).
TEST(TorchScriptBlocksFind, OuterStructuredBlocksWinOverPairsInsideAndLeaves) {
  Builder b;
  auto proj = [&] {
    jit::Module p = b.module("Linear", /*mangle=*/true);
    Builder::param(p, "weight", {kDim, kDim});
    p.define("def forward(self, x):\n    return torch.matmul(x, self.weight)\n");
    return p;
  };
  std::vector<jit::Module> layers;
  for (int i = 0; i < 2; ++i) {
    jit::Module layer = b.module("Layer", /*mangle=*/true);
    layer.register_module("up", proj());
    layer.register_module("down", proj());
    layer.define("def forward(self, x):\n    return x + self.down.forward(self.up.forward(x))\n");
    layers.push_back(layer);
  }
  jit::Module emb = b.module("Embeddings");
  for (const char* name : {"word", "position", "kind"}) emb.register_module(name, proj());
  jit::Module model = b.module("Model");
  model.register_module("embeddings", emb);
  model.register_module("layers", b.list(layers));
  jit::Module root = b.module("ForLM");
  root.register_module("model", model);
  EXPECT_EQ(samples::find_blocks(root), "model.layers");
}

TEST(TorchScriptBlocksFind, ATieOrNothingIsAOneLineRefusal) {
  Builder b;
  jit::Module root = b.module("EncDec");
  root.register_module("encoder", b.list({b.block(8), b.block(8)}));
  root.register_module("decoder", b.list({b.block(8), b.block(8)}));
  std::string why = refusal([&] { samples::find_blocks(root); });
  expect_one_line(why);
  EXPECT_THAT(why, HasSubstr("encoder (2 x Block)"));
  EXPECT_THAT(why, HasSubstr("decoder (2 x Block)"));
  EXPECT_THAT(why, HasSubstr("pass --blocks PATH"));

  jit::Module lonely = b.module("Lonely");
  lonely.register_module("body", b.list({b.block(8)}));
  lonely.register_module("head", b.block(8));
  why = refusal([&] { samples::find_blocks(lonely); });
  expect_one_line(why);
  EXPECT_THAT(why, HasSubstr("pass --blocks PATH"));
  EXPECT_THAT(why, HasSubstr("top-level children: body, head"));
  // Auto-detection through the constructor refuses the same way.
  EXPECT_THAT(refusal([&] { TorchScriptBlocks(lonely, ""); }), HasSubstr("pass --blocks PATH"));
}

// ---- refusals ----------------------------------------------------------------------------------

TEST(TorchScriptBlocksRefuse, APathThatDoesNotExistOrHasNoChildren) {
  jit::Module net = make_net(kWidths, /*nested=*/true);
  for (const char* path : {"model.blocks", "layers", "model.layers.9", "model..layers", "model."}) {
    SCOPED_TRACE(path);
    const std::string why = refusal([&] { TorchScriptBlocks(net, path); });
    expect_one_line(why);
    EXPECT_THAT(why, HasSubstr(std::string("blocks path '") + path + "' does not exist"));
    EXPECT_THAT(why, HasSubstr("top-level children: model"));
  }
  const std::string why = refusal([&] { TorchScriptBlocks(net, "model.layers.0"); });
  expect_one_line(why);
  EXPECT_THAT(why, HasSubstr("'model.layers.0' has no children"));
  // A child without a forward (the container, when the path names its parent).
  const std::string no_forward = refusal([&] { TorchScriptBlocks(net, "model"); });
  expect_one_line(no_forward);
  EXPECT_THAT(no_forward, HasSubstr("block 'model.layers'"));
  EXPECT_THAT(no_forward, HasSubstr("no TorchScript forward"));
}

// Blocks taking or returning anything but tensors are refused, naming the type and the argument,
// and the model is left as it was (its blocks of other types too).
TEST(TorchScriptBlocksRefuse, NonTensorArgumentsOrResults) {
  struct Case {
    const char* source;
    const char* says;
  };
  const Case cases[] = {
      {"def forward(self, x, scale: float):\n    return x * scale\n", "argument 'scale' is float"},
      {"def forward(self, x, mask: Optional[Tensor]):\n    return x\n",
       "argument 'mask' is Optional[Tensor]"},
      {"def forward(self, x, sizes: List[int]):\n    return x\n", "argument 'sizes' is List[int]"},
      {"def forward(self, x):\n    return x, 3\n", "result is Tuple[Tensor, int]"},
      {"def forward(self, x):\n    return None\n", "result is NoneType"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.source);
    Builder b;
    torch::manual_seed(1);
    jit::Module odd = b.module("Odd");
    odd.define(c.source);
    jit::Module good = b.block(8);
    jit::Module root = b.module("Mixed");
    root.register_module("layers", b.list({good, odd}));
    const std::string why = refusal([&] { TorchScriptBlocks(root, "layers"); });
    expect_one_line(why);
    EXPECT_THAT(why, HasSubstr("cannot checkpoint block 'layers.1' (Odd)"));
    EXPECT_THAT(why, HasSubstr(c.says));
    EXPECT_EQ(good.type()->findMethod("__offtune_region_forward"), nullptr);  // untouched
    EXPECT_FALSE(good.hasattr("__offtune_checkpoint"));
  }
}

// ---- the TorchScript workload ------------------------------------------------------------------

samples::WorkloadSpec dense_spec(const std::string& model) {
  samples::WorkloadSpec w;
  w.model = model;
  w.batch = kRows;
  w.seq = 1;
  w.input_spec = "x:float32[B,16]";
  return w;
}

// Steps of the workload; the recomputes of the last.
std::vector<int64_t> workload_steps(WorkloadInstance& w, ActivationOffloader& off,
                                    Recomputes& recomputes, int steps) {
  StepPhases phases;
  recomputes.take();
  for (int s = 0; s < steps; ++s) {
    recomputes.take();
    w.step(&off, s, phases);
  }
  return recomputes.take();
}

TEST(TorchScriptWorkloadCheckpoint, PoliciesSwitchBetweenStepsOfOneWorkload) {
  TempDir dir;
  make_net(kWidths, /*nested=*/true).save(dir.file("net.pt"));
  auto w = samples::make_workload(dense_spec(dir.file("net.pt")), at::kCPU);
  auto recomputes = std::make_shared<Recomputes>();
  auto off = w->make_offloader(host_sim_options(int64_t{1} << 40));
  off->set_observer(recomputes);
  // Plain steps first (a sweep's baseline): the plan they compile must not stop checkpointing.
  w->set_checkpoint(CheckpointPolicy::none());
  EXPECT_TRUE(workload_steps(*w, *off, *recomputes, 2).empty());
  w->set_checkpoint(CheckpointPolicy::all());
  EXPECT_EQ(workload_steps(*w, *off, *recomputes, 3).size(), 4u);
  w->set_checkpoint(CheckpointPolicy::every_k(2));
  EXPECT_EQ(workload_steps(*w, *off, *recomputes, 2).size(), 2u);
  w->set_checkpoint(CheckpointPolicy::none());
  EXPECT_TRUE(workload_steps(*w, *off, *recomputes, 2).empty());
}

TEST(TorchScriptWorkloadCheckpoint, AnExplicitPathAndItsRefusals) {
  TempDir dir;
  make_net(kWidths, /*nested=*/true).save(dir.file("net.pt"));
  samples::WorkloadSpec spec = dense_spec(dir.file("net.pt"));
  spec.blocks = "model.layers";
  auto w = samples::make_workload(spec, at::kCPU);
  w->set_checkpoint(CheckpointPolicy::all());
  auto recomputes = std::make_shared<Recomputes>();
  auto off = w->make_offloader(host_sim_options(int64_t{1} << 40));
  off->set_observer(recomputes);
  EXPECT_EQ(workload_steps(*w, *off, *recomputes, 2).size(), 4u);

  spec.blocks = "model.nosuch";
  std::string why = refusal([&] { samples::make_workload(spec, at::kCPU); });
  expect_one_line(why);
  EXPECT_THAT(why, HasSubstr("blocks path 'model.nosuch' does not exist"));

  samples::WorkloadSpec builtin;
  builtin.model = "tiny";
  builtin.blocks = "layers";
  why = refusal([&] { samples::make_workload(builtin, at::kCPU); });
  expect_one_line(why);
  EXPECT_THAT(why, HasSubstr("--blocks applies to TorchScript models"));
}

// A model without blocks to find runs as before and refuses checkpointing in one line.
TEST(TorchScriptWorkloadCheckpoint, AModelWithoutBlocksRefusesAnEnabledPolicyOnly) {
  TempDir dir;
  torch::manual_seed(2);
  Builder b;
  jit::Module flat = b.module("Flat");
  Builder::param(flat, "w", {kDim, kDim});
  flat.define("def forward(self, x):\n    return torch.tanh(torch.matmul(x, self.w))\n");
  flat.save(dir.file("flat.pt"));
  auto w = samples::make_workload(dense_spec(dir.file("flat.pt")), at::kCPU);
  w->set_checkpoint(CheckpointPolicy::none());
  const std::string why = refusal([&] { w->set_checkpoint(CheckpointPolicy::every_k(2)); });
  expect_one_line(why);
  EXPECT_THAT(why, HasSubstr("--checkpoint every:2: cannot find the blocks to checkpoint"));
  EXPECT_THAT(why, HasSubstr("pass --blocks PATH"));
  EXPECT_THAT(why, Not(HasSubstr("cannot run as checkpointed regions")));
  auto off = w->make_offloader(host_sim_options());
  StepPhases phases;
  w->step(off.get(), 0, phases);
  EXPECT_GT(off->stats().packed, 0);
}

}  // namespace
}  // namespace offtune::test
