// The host-sim device: an emulated accelerator on the CPU, a documented mode of offtune, not a test
// double. "Device" tensors are ordinary CPU tensors; offtune replaces c10's CPU allocator with an
// accounting allocator that counts their bytes (current and peak). Offloaded copies live in
// offtune's host pool, which that counter does not see, so the device figures behave as a GPU's
// would.
//
// install() is idempotent and process-wide; the first host-sim ActivationOffloader calls it. Call
// it yourself before building the model if parameter bytes should count from the start.
#pragma once

#include <cstdint>

namespace offtune::host_sim {

void install();
bool installed();

struct Counters {
  int64_t allocated = 0;  // bytes in live CPU ("device") allocations
  int64_t peak = 0;       // since reset_peak()
  int64_t allocations = 0;
};
Counters counters();
void reset_peak();

// Device capacity in bytes (0 = unlimited). Allocations beyond it throw c10::OutOfMemoryError, as
// the CUDA allocator does, so that memory budgets and out-of-memory handling can be exercised.
void set_capacity(int64_t bytes);
int64_t capacity();

// Debug (process-wide, stays on once set): fill freed device memory with 0xFF (NaN for floating
// types) before it is returned.
void set_poison(bool on);
bool poison();

}  // namespace offtune::host_sim
