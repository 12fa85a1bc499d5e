// The factory that wraps a torch::nn model the way get_act_offloading_ctx_manager does in Python:
// it finds the output head (`output`, `output.linear`, `lm_head`, `decoder.output`,
// `decoder.lm_head`, `final_layer_norm`/`ln_f`, `head`, in that order) and excludes it (offloading
// its input and getting it straight back costs more than it saves), excludes modules whose name
// contains "liger", and registers every parameter and buffer storage of the model so that none is
// ever offloaded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "offtune/offloader.hpp"

namespace torch::nn {
class Module;
}

namespace offtune {

struct ModelOffloadSetup {
  std::unique_ptr<ActivationOffloader> offloader;
  std::vector<std::string> excluded;  // qualified names of excluded modules ("lm_head", ...)
  bool head_found = false;
};

// warn_if_no_head: print one warning (through c10's warning handler) when no output head is found.
ModelOffloadSetup make_offloader_for(torch::nn::Module& model, OffloadOptions options = {},
                                     bool warn_if_no_head = true);

// The same head search, exposed for tests and tools: the qualified name of the head, or "".
std::string find_output_head(torch::nn::Module& model);

}  // namespace offtune
