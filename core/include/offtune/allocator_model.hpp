// CUDA's caching allocator as host-sim models it (torch 2.15.0's rules: core/src/alloc_model.hpp),
// for a caller that replays a sequence of allocations and frees without a device, such as the
// what-if predictor (profiler/predict.hpp): what the allocator would reserve for them, segments,
// rounding, splitting, caching and per-stream pools included. The settings are those in force
// (PYTORCH_CUDA_ALLOC_CONF and the others host-sim reads); there is no capacity, so it never runs
// out of memory. Not thread-safe: one replay at a time per model.
#pragma once

#include <cstdint>
#include <memory>

namespace offtune {

class AllocatorModel {
 public:
  AllocatorModel();
  ~AllocatorModel();
  AllocatorModel(const AllocatorModel&) = delete;
  AllocatorModel& operator=(const AllocatorModel&) = delete;

  // A block of `bytes` (> 0) on `stream` (0: the compute stream); its handle, unique in the model.
  int64_t allocate(int64_t bytes, int64_t stream = 0);
  // The block is used on `stream` too (record_stream): once freed, it is reused only after
  // complete_stream(stream).
  void record_stream(int64_t handle, int64_t stream);
  // Frees a block (an unknown or freed handle: nothing happens).
  void free(int64_t handle);
  // Work on `stream` done: blocks freed while recorded on it become reusable.
  void complete_stream(int64_t stream);

  int64_t allocated() const;  // bytes of blocks handed out, rounded as the allocator rounds them
  int64_t reserved() const;   // bytes of segments held from the device
  int64_t peak_reserved() const;
  int64_t peak_allocated() const;
  // The peaks start over from the current figures.
  void reset_peak();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace offtune
