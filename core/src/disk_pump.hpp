// The disk tier's pump: which host copies go on to the arena file and when, the writes and reads in
// flight, read-ahead in backward, and the failures a step must hear of. The engine (offloader.cpp)
// keeps the hooks and the forward window and calls the pump under its lock; the pump drives the
// DiskTier (disk_tier.hpp), whose own threads do the I/O. It exists only while the tier is on (tier
// disk, or tier auto on a disk fast enough).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "disk_tier.hpp"
#include "host_pool.hpp"
#include "offload_entry.hpp"
#include "offtune/observer.hpp"
#include "offtune/options.hpp"

namespace offtune::detail {

class DiskPump {
 public:
  // What the pump needs of the engine that owns it. Every call is made under the engine's lock.
  class Engine {
   public:
    virtual bool observed() const = 0;  // an observer is attached: events are worth making
    virtual void emit_disk_copy(bool completed, const CopyEvent& event) = 0;
    // A host block for a read from disk (the engine's pool); throws when there is no memory.
    virtual HostBlock allocate_staging(int64_t bytes, bool& pinned) = 0;
    // The host copy goes back to the pool once the copies that may still read it ran.
    virtual void free_host_when_done(Entry& e) = 0;
    virtual void add_host_bytes(int64_t delta) = 0;
    virtual int64_t host_bytes_in_use() const = 0;
    virtual OffloadStats& disk_stats() = 0;

   protected:
    ~Engine() = default;
  };

  // `tier` is open and fast enough. The host budget is options.host_budget_bytes, or, when 0, a
  // staging allowance (tier disk) or half the available RAM (tier auto).
  DiskPump(std::unique_ptr<DiskTier> tier, const OffloadOptions& options, Engine& engine);

  DiskTier& tier() { return *tier_; }
  const DiskTier& tier() const { return *tier_; }

  // A host copy that may go to disk once its offload copy completed (oldest first).
  void list_spill(Entry& e);
  // Finishes the transfers that ended and starts the writes the budget asks for. Never throws.
  void pump() noexcept;
  // Reads `e` back from disk into a staging block (ahead: before backward needs it).
  void start_read(Entry& e, bool ahead);
  // Starts reads of the entries backward needs next (the ones before `e` in its forward), within
  // disk_read_ahead_bytes.
  void read_ahead_before(const Entry& e);
  // A staging block read ahead is consumed (its reload issued): it no longer counts as ahead.
  void end_read_ahead(Entry& e);
  // Backward has reached `e`: a write not started yet is dropped (a running one finishes).
  void withdraw_write(Entry& e);
  // `e` goes: out of the spill list and the transfers, a queued transfer cancelled.
  void release(Entry& e);

  // The first disk failure of a forward (by generation), thrown (EngineError) once.
  void throw_error(uint64_t generation);
  // The last entry of a forward went with a failure nobody was told of: said once, as a warning.
  void warn_unraised_error(uint64_t generation);

  // What forward waits for while the host copies alive pass the budget: a write in flight, else
  // the offload copy of the oldest copy waiting to be written. Pumps and throws a pending failure
  // of `generation` first. Neither (both null) when the budget is met or nothing is on its way.
  struct SpillWait {
    IoJobPtr job;
    FencePtr fence;
    TensorId id;
  };
  SpillWait spill_wait(uint64_t generation);

 private:
  void unlist_spill(Entry& e);
  void forget_io(Entry& e);  // out of in_io_
  void finish_io(Entry& e);
  void start_write(Entry& e);

  std::unique_ptr<DiskTier> tier_;
  const OffloadOptions& options_;
  Engine& engine_;
  int64_t host_limit_ = 0;       // host_budget_bytes, resolved
  Entry* spill_head_ = nullptr;  // host copies that may go to disk, oldest first
  Entry* spill_tail_ = nullptr;
  std::vector<Entry*> in_io_;     // entries with a transfer in flight
  int64_t writing_bytes_ = 0;     // host bytes whose write is in flight
  int64_t read_ahead_bytes_ = 0;  // staging bytes read (or being read) ahead, not yet consumed
  std::map<uint64_t, std::string> errors_;  // generation -> first failure not yet thrown
  bool warned_write_failure_ = false;       // a failed write is said once per offloader
};

}  // namespace offtune::detail
