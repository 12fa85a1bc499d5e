#include "disk_pump.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "offtune/options.hpp"  // EngineError
#include "sysmem.hpp"

namespace offtune::detail {

DiskPump::DiskPump(std::unique_ptr<DiskTier> tier, const OffloadOptions& options, Engine& engine)
    : tier_(std::move(tier)), options_(options), engine_(engine) {
  host_limit_ = options_.host_budget_bytes;
  if (host_limit_ == 0) {
    if (options_.tier == Tier::Disk) {
      host_limit_ = int64_t{256} << 20;  // staging: a few large activations in flight
    } else {
      const HostRam ram = read_host_ram();
      host_limit_ = ram.available > 0 ? ram.available / 2 : int64_t{8} << 30;
    }
  }
}

void DiskPump::list_spill(Entry& e) {
  e.spill_listed = true;
  e.spill_prev = spill_tail_;
  e.spill_next = nullptr;
  if (spill_tail_) {
    spill_tail_->spill_next = &e;
  } else {
    spill_head_ = &e;
  }
  spill_tail_ = &e;
}

void DiskPump::unlist_spill(Entry& e) {
  if (e.spill_prev) {
    e.spill_prev->spill_next = e.spill_next;
  } else {
    spill_head_ = e.spill_next;
  }
  if (e.spill_next) {
    e.spill_next->spill_prev = e.spill_prev;
  } else {
    spill_tail_ = e.spill_prev;
  }
  e.spill_prev = e.spill_next = nullptr;
  e.spill_listed = false;
}

void DiskPump::forget_io(Entry& e) {
  auto it = std::find(in_io_.begin(), in_io_.end(), &e);
  if (it == in_io_.end()) return;
  *it = in_io_.back();
  in_io_.pop_back();
  if (e.io->write) writing_bytes_ -= e.bytes;
}

void DiskPump::pump() noexcept {
  try {
    for (size_t i = 0; i < in_io_.size();) {
      Entry& e = *in_io_[i];
      if (!e.io->finished()) {
        ++i;
        continue;
      }
      forget_io(e);  // swaps the last one into i
      finish_io(e);
    }
    // Tier disk: every host copy goes on to disk; tier auto: the oldest, while the host copies not
    // already on their way pass the budget. Only once the offload copy is known complete (they
    // complete in issue order on the copy stream).
    while (spill_head_ != nullptr && (options_.tier == Tier::Disk ||
                                      engine_.host_bytes_in_use() - writing_bytes_ > host_limit_)) {
      Entry& e = *spill_head_;
      if (e.offload_fence && !e.offload_fence->query()) break;
      unlist_spill(e);
      start_write(e);
    }
  } catch (const std::exception& ex) {
    // Only an allocation can throw here; the entries stay consistent (a copy not written stays in
    // host memory).
    TORCH_WARN("offtune: disk tier: ", ex.what());
  }
}

void DiskPump::finish_io(Entry& e) {
  IoJob& job = *e.io;
  const bool done = job.state.load(std::memory_order_acquire) == IoJob::Done;
  if (done && engine_.observed()) {
    CopyEvent ce{e.id,        job.write ? CopyDirection::HostToDisk : CopyDirection::DiskToHost,
                 e.bytes,     e.pinned,
                 true,        !job.write && e.read_ahead,
                 job.done_ns, job.issued_ns};
    engine_.emit_disk_copy(true, ce);
  }
  OffloadStats& stats = engine_.disk_stats();
  if (job.write) {
    if (done) {
      e.on_disk = true;
      e.disk_checksum = job.checksum;
      ++stats.spilled;
      stats.disk_written_bytes += e.bytes;
      e.io.reset();
      engine_.free_host_when_done(e);  // after a reload that may still read it
    } else {
      // The host copy is intact: the entry stays in host memory (tier disk: its staging block,
      // past host_budget_bytes if need be) and the step goes on from it. Failing the step would
      // throw away a good copy; a full disk would fail every step. Said once, counted always.
      if (job.failed()) {
        ++stats.disk_write_failures;
        if (!warned_write_failure_) {
          warned_write_failure_ = true;
          TORCH_WARN(tier_->failure_message(job),
                     "; the copy stays in host memory and the step goes on (later failures are "
                     "counted in OffloadStats::disk_write_failures, not said again)");
        }
      }
      e.disk.reset();
      e.io.reset();
    }
    return;
  }
  if (done) {
    ++stats.disk_reads;
    stats.disk_read_bytes += e.bytes;
    e.io.reset();
    return;
  }
  // A failed read: the staging block goes; the job stays for unpack to report (then a later
  // backward of a retained graph may try again).
  end_read_ahead(e);
  engine_.add_host_bytes(-e.bytes);
  e.host.reset();
}

void DiskPump::start_write(Entry& e) {
  DiskExtent extent = tier_->allocate(e.bytes);
  if (!extent) {
    errors_.try_emplace(e.generation, tier_->arena_full_message(e.bytes));
    return;  // stays in host memory
  }
  const bool observed = engine_.observed();
  const int64_t issued = observed ? now_ns() : 0;
  e.io = tier_->write(extent, e.host.data(), e.bytes);
  e.disk = std::move(extent);
  in_io_.push_back(&e);
  writing_bytes_ += e.bytes;
  if (observed) {
    CopyEvent ce{e.id, CopyDirection::HostToDisk, e.bytes, e.pinned, true, false, issued, issued};
    engine_.emit_disk_copy(false, ce);
  }
}

void DiskPump::start_read(Entry& e, bool ahead) {
  bool pinned = true;
  HostBlock block = engine_.allocate_staging(e.bytes, pinned);
  const bool observed = engine_.observed();
  const int64_t issued = observed ? now_ns() : 0;
  e.host = std::move(block);
  e.pinned = pinned;
  engine_.add_host_bytes(e.bytes);
  e.io = tier_->read(e.disk, e.host.data(), e.bytes, /*urgent=*/!ahead, e.disk_checksum);
  in_io_.push_back(&e);
  if (ahead) {
    e.read_ahead = true;
    read_ahead_bytes_ += e.bytes;
    ++engine_.disk_stats().disk_read_ahead;
  }
  if (observed) {
    CopyEvent ce{e.id, CopyDirection::DiskToHost, e.bytes, e.pinned, true, ahead, issued, issued};
    engine_.emit_disk_copy(false, ce);
  }
}

// Backward order is the reverse of pack order: the entries before `e` in its forward come next.
// Reads start for those on disk within the next disk_read_ahead_bytes of backward's copies (a copy
// in host memory counts too: it is part of the time the read has), and while the staging blocks
// read ahead stay under the same bound.
void DiskPump::read_ahead_before(const Entry& e) {
  const int64_t limit = options_.disk_read_ahead_bytes;
  if (limit == 0) return;
  int64_t ahead = 0;
  for (Entry* p = e.chain_prev; p != nullptr; p = p->chain_prev) {
    ahead += p->bytes;
    if (ahead > limit) break;
    if (!p->on_disk || p->host || p->io || p->device) continue;
    if (read_ahead_bytes_ + p->bytes > limit) break;
    try {
      start_read(*p, /*ahead=*/true);
    } catch (const std::exception&) {
      break;  // no host memory for it now: it is read when used
    }
  }
}

void DiskPump::end_read_ahead(Entry& e) {
  if (!e.read_ahead) return;
  read_ahead_bytes_ -= e.bytes;
  e.read_ahead = false;
}

void DiskPump::withdraw_write(Entry& e) {
  if (e.spill_listed) unlist_spill(e);
  if (e.io && e.io->write && tier_->cancel(e.io)) {
    forget_io(e);
    e.io.reset();
    e.disk.reset();
  }
}

void DiskPump::release(Entry& e) {
  if (e.spill_listed) unlist_spill(e);
  end_read_ahead(e);
  if (e.io) {
    forget_io(e);
    if (!e.io->finished()) tier_->cancel(e.io);  // a running one is waited for as the block's
  }
}

void DiskPump::throw_error(uint64_t generation) {
  if (errors_.empty()) return;
  auto it = errors_.find(generation);
  if (it == errors_.end()) return;
  std::string message = std::move(it->second);
  errors_.erase(it);
  throw EngineError(message);
}

void DiskPump::warn_unraised_error(uint64_t generation) {
  if (errors_.empty()) return;
  if (auto it = errors_.find(generation); it != errors_.end()) {
    TORCH_WARN(it->second, " (the graph was freed before offtune could raise it)");
    errors_.erase(it);
  }
}

DiskPump::SpillWait DiskPump::spill_wait(uint64_t generation) {
  pump();
  throw_error(generation);
  SpillWait wait;
  if (engine_.host_bytes_in_use() <= host_limit_) return wait;
  for (Entry* e : in_io_) {
    if (e->io->write) {
      wait.job = e->io;
      wait.id = e->id;
      break;
    }
  }
  if (!wait.job && spill_head_ != nullptr && spill_head_->offload_fence) {
    wait.fence = spill_head_->offload_fence;
    wait.id = spill_head_->id;
  }
  return wait;
}

}  // namespace offtune::detail
