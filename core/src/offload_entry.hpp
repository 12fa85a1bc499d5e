// One offloaded copy as the engine tracks it (offloader.cpp's Context), shared with the disk
// tier's pump (disk_pump.hpp), which moves an entry's host copy to the arena file and back. Every
// field is read and written under the engine's lock.
#pragma once

#include <c10/core/Storage.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/SmallVector.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <cstdint>

#include "backend.hpp"
#include "disk_tier.hpp"
#include "host_pool.hpp"
#include "offtune/observer.hpp"
#include "verify.hpp"

namespace offtune::detail {

using StreamList = c10::SmallVector<Stream, 2>;

inline bool contains(const StreamList& list, const Stream& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

struct Entry {
  TensorId id;
  uint64_t generation = 0;      // forward scope it was packed in (prefetch stays within one)
  Entry* chain_prev = nullptr;  // entries of the same generation, in pack order
  Entry* chain_next = nullptr;
  Entry* live_prev = nullptr;  // every live entry
  Entry* live_next = nullptr;
  int64_t bytes = 0;    // span length
  int64_t span_lo = 0;  // span start, in bytes, in the source storage
  c10::StorageImpl* source_key = nullptr;
  c10::weak_intrusive_ptr<c10::StorageImpl> source{c10::intrusive_ptr<c10::StorageImpl>()};
  int64_t version = 0;
  HostBlock host;  // the host copy, from the pool
  bool pinned = true;
  FencePtr offload_fence;
  // Forward window: the source storage while the offload copy may still read it.
  bool in_fwd_stash = false;
  c10::Storage hold;
  Stream pack_stream = Stream(Stream::DEFAULT, c10::Device(c10::DeviceType::CPU));
  // Backward: the bytes unpack reads (a reload buffer, or the forward hold) ...
  c10::Storage device;
  int64_t device_offset = 0;  // where the span starts in `device`
  Stream device_stream = Stream(Stream::DEFAULT, c10::Device(c10::DeviceType::CPU));  // its owner
  bool device_reloaded = false;  // `device` came from a reload (else from the forward hold)
  bool prefetched = false;       // reload issued ahead of use, not yet consumed
  FencePtr reload_fence;
  StreamList ready_on;   // streams ordered after the reload
  StreamList consumers;  // streams other than device_stream that were handed `device`
  int task = -1;  // autograd graph task that brought `device` in (end-of-backward releases it)
  int slots = 0;
  uint64_t trl_key = 0;  // semantics trl with streams: its address key (see trl_keeps)
  // Disk tier.
  DiskExtent disk;  // its bytes in the arena file (reserved while the write runs)
  IoJobPtr io;      // the write or read in flight; a failed read stays until unpack reports it
  Entry* spill_prev = nullptr;  // host copies that may go to disk, in pack order
  Entry* spill_next = nullptr;
  bool spill_listed = false;
  bool on_disk = false;        // the write completed: `host`, if any, is a staging block for a read
  bool read_ahead = false;     // `host` was read ahead and not yet copied to the device
  uint64_t disk_checksum = 0;  // of the bytes written, which a read must find again
  Checksum verify_sum;         // OffloadOptions::verify: of the source's bytes at pack
};

}  // namespace offtune::detail
