// OffloadOptions::verify: the checksum of a saved tensor's bytes, taken at pack from the tensor
// autograd saved and at unpack from the bytes handed back, by the same function on the same kind of
// memory, so that any difference between the two (a copy that read or wrote the wrong bytes, host
// memory or the disk changing them, a block freed and reused too early) shows.
//
// - CPU memory (host-sim's device): XXH3 of the bytes, on the calling thread.
// - CUDA memory: hashing on the host would need a copy of its own, through the very path under
//   test; a checksum computed on the device instead, by torch ops on the current stream (so it is
//   ordered after what produced the bytes, and at unpack after the reload), kept there as a 0-dim
//   tensor until compared: pack adds work on the device but no sync; the comparison at unpack
//   syncs. The function is a position-weighted sum of the bytes modulo 2^64 (odd weights, so any
//   one changed byte changes it; integer sums are exact in any reduction order, so it is
//   deterministic), taken in pieces so that its temporaries stay at a few tens of MiB.
#pragma once

#include <c10/core/Storage.h>

#include <ATen/core/Tensor.h>
#include <cstdint>

namespace offtune::detail {

struct Checksum {
  uint64_t value = 0;  // CPU memory: the checksum itself
  at::Tensor device;   // device memory: a 0-dim int64 tensor on the device, still to be read
};

// The checksum of `bytes` bytes of `storage` from byte `offset`.
Checksum checksum_of(const c10::Storage& storage, int64_t offset, int64_t bytes);
// Its value (for a device checksum: waits for the device).
uint64_t value_of(const Checksum& sum);

}  // namespace offtune::detail
