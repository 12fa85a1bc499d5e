// Device memory an offloader can give back on demand. Prefetched reloads that backward has not used
// yet are only an optimisation: when a device allocation would fail, the allocator (host-sim's, or
// CUDA's through its free-memory callback) asks every offloader to drop them, and they are reloaded
// when asked for. That is what makes "a step that fits with prefetch 0 fits with any prefetch"
// hold.
#pragma once

#include <cstdint>
#include <memory>

namespace offtune::detail {

// A device index that stands for every device: host-sim's one emulated device, a reclaimer that
// holds memory of no particular device, a caller that does not know which device is short.
inline constexpr int kAnyDevice = -1;

class Reclaimer {
 public:
  virtual ~Reclaimer() = default;
  // Gives back what can be given back now without blocking; returns the bytes freed. Never throws.
  virtual int64_t reclaim_device_memory() noexcept = 0;
  // The device whose memory it gives back (kAnyDevice: host-sim, or any).
  virtual int device() const noexcept { return kAnyDevice; }
};

// Registered for as long as the reclaimer lives.
void register_reclaimer(const std::weak_ptr<Reclaimer>& reclaimer);

// Asks every live reclaimer of `device` (and those of kAnyDevice; every one for kAnyDevice);
// returns the bytes freed. Returns 0 at once inside a NoReclaimScope.
//
// Why only the short device's: CUDA's caching allocator calls its free-memory callbacks while it
// holds that device's (recursive) lock, and a reclaimer frees memory through the allocator of the
// memory's own device (the free, and record_stream, take that device's lock). Asked for every
// device, a callback on device 0 would wait for device 1's lock while a callback on device 1 waits
// for device 0's: two GPUs in one process could deadlock. Asked for its own device only, a thread
// inside one device's allocator takes no other device's allocator lock (and the engines' locks
// are only tried, never waited for), so no two callbacks can wait on each other.
int64_t reclaim_device_memory(int device = kAnyDevice) noexcept;

// What "real pressure" means where the allocator does not say how much it needs (CUDA's free-memory
// callback runs at every cache miss, with no size): the driver's free memory is below this margin.
// It is twice the largest span an offloader has moved in this process (an activation and its
// gradient come and go together in backward, and they are the step's usual large allocations), and
// at least 20 MiB (the caching allocator's segment for requests of 1 to 10 MiB). A prefetch is
// affordable when it leaves at least this much (backend_cuda.cpp's headroom()).
int64_t pressure_margin() noexcept;
// Called when an offloader moves a span of `bytes`.
void note_offloaded_bytes(int64_t bytes) noexcept;

// On this thread, allocations do not reclaim (a prefetch's own allocation must fail rather than
// drop other prefetches).
class NoReclaimScope {
 public:
  NoReclaimScope();
  ~NoReclaimScope();
  NoReclaimScope(const NoReclaimScope&) = delete;
  NoReclaimScope& operator=(const NoReclaimScope&) = delete;
};

}  // namespace offtune::detail
