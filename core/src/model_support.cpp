#include "offtune/model_support.hpp"

#include <c10/util/Exception.h>
#include <torch/nn/module.h>

namespace offtune {
namespace {

std::shared_ptr<torch::nn::Module> child(torch::nn::Module& m, const std::string& name) {
  auto children = m.named_children();
  auto* found = children.find(name);
  return found ? *found : nullptr;
}

// DataParallel-style wrappers keep the model in `module`; PEFT-style ones in `base_model`.
torch::nn::Module& unwrap(torch::nn::Module& model) {
  torch::nn::Module* m = &model;
  if (auto inner = child(*m, "module")) m = inner.get();
  if (auto inner = child(*m, "base_model")) m = inner.get();
  return *m;
}

struct Head {
  std::string name;
  torch::nn::Module* module = nullptr;
};

Head find_head(torch::nn::Module& model) {
  torch::nn::Module& m = unwrap(model);
  const std::string prefix = &m == &model ? "" : (child(model, "module") ? "module." : "");
  if (auto out = child(m, "output")) {
    // A composite `output` whose projection is `output.linear` is excluded as a whole: its only
    // saved tensors are the projection's.
    return {prefix + "output", out.get()};
  }
  if (auto head = child(m, "lm_head")) return {prefix + "lm_head", head.get()};
  if (auto decoder = child(m, "decoder")) {
    if (auto out = child(*decoder, "output")) return {prefix + "decoder.output", out.get()};
    if (auto head = child(*decoder, "lm_head")) return {prefix + "decoder.lm_head", head.get()};
  }
  if (auto norm = child(m, "final_layer_norm")) return {prefix + "final_layer_norm", norm.get()};
  if (auto norm = child(m, "ln_f")) return {prefix + "ln_f", norm.get()};
  if (auto head = child(m, "head")) return {prefix + "head", head.get()};
  return {};
}

}  // namespace

std::string find_output_head(torch::nn::Module& model) { return find_head(model).name; }

ModelOffloadSetup make_offloader_for(torch::nn::Module& model, OffloadOptions options,
                                     bool warn_if_no_head) {
  ModelOffloadSetup setup;
  setup.offloader = std::make_unique<ActivationOffloader>(std::move(options));
  ActivationOffloader& off = *setup.offloader;

  const Head head = find_head(model);
  if (head.module) {
    off.exclude_module(head.module);
    setup.excluded.push_back(head.name);
    setup.head_found = true;
  } else if (warn_if_no_head) {
    TORCH_WARN(
        "offtune: no output head found (looked for output, lm_head, decoder.output, "
        "decoder.lm_head, final_layer_norm, ln_f, head); its input will be offloaded and "
        "immediately reloaded, which is slow for large vocabularies. Name the head one of "
        "these, or pass warn_if_no_head=false.");
  }
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    std::string lower = item.key();
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("liger") != std::string::npos) {
      off.exclude_module(item.value().get());
      setup.excluded.push_back(item.key());
    }
  }
  for (const auto& p : model.parameters(/*recurse=*/true)) off.never_offload(p);
  for (const auto& b : model.buffers(/*recurse=*/true)) off.never_offload(b);
  return setup;
}

}  // namespace offtune
