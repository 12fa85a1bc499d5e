// The SQLite store's schema: its version numbers, the ordered migrations that bring a file from
// any older version to the current one, and the identity check (an empty file, or an offtune store
// of a version this build reads) that runs before anything is trusted or migrated. docs/store.md
// describes the schema.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "sqlite_db.hpp"

namespace offtune::profiler::detail {

constexpr int kSchemaVersion = 11;
// The oldest schema that a read-only open can read as is (a read-only open never migrates).
constexpr int kOldestReadableSchema = 1;
// The first schema with each of these.
constexpr int kOwnersSchema = 2;      // run_owners and claims
constexpr int kCiSchema = 3;          // the step-time confidence interval; the engine semantics
constexpr int kVariantSchema = 4;     // the engine variants (checkpoint, offload set, tier)
constexpr int kLayerSchema = 5;       // layer offloading; the workload's LoRA rank
constexpr int kPredictionSchema = 5;  // the predictions table (predict-first sweeps)
constexpr int kVerifySchema = 6;      // the verify flag (the correctness sentinel)
constexpr int kRanksSchema = 7;       // each run's rank, world size and job (distributed training)
constexpr int kSegmentsSchema = 8;    // the device allocator's segments (knob alloc_segments)
constexpr int kHoldingsSchema = 9;    // device memory outside the allocator; the host's peak
constexpr int kMemoryHistorySchema = 10;  // memory_events and memory_blocks (--memory-history)
// Reserved and host bytes in each occupancy sample; each prediction's peak reserved.
constexpr int kMemoryCurvesSchema = 11;
// PRAGMA application_id, so that tools like file(1) can tell an offtune store ("OFTN").
constexpr int32_t kApplicationId = 0x4f46544e;
constexpr std::string_view kAppName = "offtune";

// Wall-clock time, for the *_unix_ns columns.
inline int64_t now_unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What the file says it is, read from a connection.
struct Identity {
  int version = 0;     // PRAGMA user_version
  bool empty = false;  // no schema objects at all: a new file, version 0
};

// Throws unless the connection holds an empty database or an offtune store of a version this build
// can open; `writable` says whether the caller would migrate an older one.
Identity read_identity(const Connection& c, bool writable);

// Brings a writable connection's schema to kSchemaVersion. Inspects again under the write lock: the
// file may have changed since it was checked (another process migrated it, or created it).
void migrate(const Connection& c);

}  // namespace offtune::profiler::detail
