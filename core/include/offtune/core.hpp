// offtune core: activation offloading for libtorch training loops. During forward, tensors that
// autograd saves for backward are copied to pinned host memory on a side stream; during backward
// they come back ahead of use; gradient checkpointing recomputes regions instead of keeping their
// activations. Works on CUDA and on host-sim, an emulated device on the CPU.
#pragma once

#include "offtune/checkpoint.hpp"
#include "offtune/ids.hpp"
#include "offtune/layer_offload.hpp"
#include "offtune/observer.hpp"
#include "offtune/offloader.hpp"
#include "offtune/options.hpp"
