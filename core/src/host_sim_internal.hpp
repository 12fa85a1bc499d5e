// What the host-sim backend and the engine tell the emulator (host_sim.cpp) about copies, stream
// waits and hand-outs, so that it can keep memory intact while a copy that is correctly ordered
// still has to run, and check stream order (offtune/host_sim.hpp says what is checked).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>

#include <atomic>
#include <cstdint>

#include "offtune/host_sim.hpp"

namespace offtune::detail::sim {

using host_sim::StreamId;

// One copy stream's progress. Copies get sequence numbers 1, 2, ... in issue order and complete in
// that order.
struct CopyStream {
  StreamId id = 0;
  std::atomic<uint64_t> issued{0};     // last sequence number handed out
  std::atomic<uint64_t> completed{0};  // last copy that ran (physically)
  std::atomic<uint64_t> observed{0};   // last copy the host saw complete (a query or a host wait):
                                       // every later host action is ordered after it
  // With a device model: when the last copy issued ends on the simulated clock (-1: none yet).
  std::atomic<int64_t> modelled_tail{-1};
};

// A new copy stream, registered with the emulator for the life of the process.
CopyStream& new_copy_stream();

// Whether `storage` is a block of host-sim's device allocator.
bool is_device_block(const c10::Storage& storage);

// Gives the allocator model the device's capacity less what the CUDA context takes outside the
// allocator (the device model's context_bytes), as a GPU has: set_capacity and set_device_model
// both call it, in whichever order a front end sets them.
void apply_capacity();

// A copy was issued on `cs` with number `seq`; it reads (D2H) or writes (H2D) `device`.
void note_copy(const c10::Storage& device, CopyStream& cs, uint64_t seq, bool writes_device);
// The copy `seq` ran. Blocks whose free waited for it are released.
void note_copy_done(CopyStream& cs, uint64_t seq);
// The host saw copy `seq` complete.
void note_observed(CopyStream& cs, uint64_t seq);
// Compute stream `stream` waits for copy `seq` of `cs`: its later work is ordered after it.
void note_stream_wait(StreamId stream, CopyStream& cs, uint64_t seq);
// `device`'s block may not be reused before `stream`'s work so far is done (CUDA's record_stream).
// On a copy stream this keeps the block intact until the copies issued so far have run.
void note_record_stream(const c10::Storage& device, StreamId stream);
// The engine hands `t` to autograd on the current stream (called after every unpack).
void check_handout(const at::Tensor& t);

// ---- the device model's clocks (sim_clock.cpp) --------------------------------------------------
// With a device model set, time on host-sim is simulated: the compute stream's clock advances by
// each op's modelled duration, each copy stream's by the link model's time per copy, and the two
// meet where the engine waits. Without one, these do nothing and modelled() is false.
bool modelled();
int64_t compute_clock();             // the compute stream's simulated time, ns
void compute_advance(int64_t ns);    // work on the compute stream (a single-stream copy)
void compute_wait_until(int64_t t);  // the compute stream (and the host with it) waits for t
void count_modelled_copy();          // for model_counters()

}  // namespace offtune::detail::sim
