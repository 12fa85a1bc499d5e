// The disk tier: one arena file per offloader, preallocated and reused step after step, that
// offloaded copies go on to from host memory when host memory is short (tier auto) or by choice
// (tier disk). Not a file per tensor: extents of the one file, first-fit over offsets aligned to
// 4 KiB, so that O_DIRECT can move them without the page cache.
//
// - Crash safety: the file has no name from the start (O_TMPFILE, else created and unlinked at
//   once), so nothing is left behind however the process ends, SIGKILL included.
// - Threads: one writer and one reader thread, each fed by a queue, so that reads ahead in backward
//   are not stuck behind writes still draining from forward. Jobs carry raw host pointers (staging
//   blocks from the host pool, 4 KiB aligned, that the engine keeps alive until the job finished).
// - Errors: a failed job keeps its errno; the engine turns it into one EngineError on the thread
//   that needs the data (a failed write only when no host copy is left: see offloader.cpp). Every
//   waiter wakes when its job ends, however it ends (done, failed, cancelled, or the tier shut
//   down).
// - Checksums: the writer hashes each copy's bytes (XXH3, 64 bits) before writing them; the reader
//   hashes what it read and fails the job on a mismatch, so that bytes changed on the medium (a
//   bad disk, a stray write to the file) become an error naming the tensor, never wrong gradients.
//   Both run on the I/O threads, at memory speed (tens of GB/s), beside transfers of a few GB/s.
// - The bandwidth check (disk_min_gbps) runs once per process and directory: later offloaders
//   there take its figures, so that making one costs nothing.
// - O_DIRECT where the file system takes it, else buffered I/O; if a direct transfer is refused
//   later (EINVAL: an alignment the file system wants beyond 4 KiB) the file drops O_DIRECT once,
//   with a warning, and the transfer is retried.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "offtune/offloader.hpp"
#include "offtune/options.hpp"

namespace offtune::detail {

// Offsets, lengths and host buffers of disk transfers are multiples of this (O_DIRECT's rule on
// every common file system; the logical block size is 512 or 4096).
constexpr int64_t kDiskAlign = 4096;
inline int64_t disk_round(int64_t n) { return (n + kDiskAlign - 1) / kDiskAlign * kDiskAlign; }

// XXH3 (64 bits) of `bytes` bytes: the disk tier's extent checksums and OffloadOptions::verify on
// CPU memory.
uint64_t checksum(const void* data, int64_t bytes);

class DiskArena;

// An extent of the arena file, given back to the arena when reset or destroyed. Move-only.
class DiskExtent {
 public:
  DiskExtent() = default;
  DiskExtent(DiskExtent&& other) noexcept { *this = std::move(other); }
  DiskExtent& operator=(DiskExtent&& other) noexcept;
  DiskExtent(const DiskExtent&) = delete;
  DiskExtent& operator=(const DiskExtent&) = delete;
  ~DiskExtent() { reset(); }

  int64_t offset() const { return offset_; }
  int64_t length() const { return length_; }  // a multiple of kDiskAlign
  explicit operator bool() const { return length_ > 0; }
  void reset();

 private:
  friend class DiskArena;
  std::shared_ptr<DiskArena> arena_;
  int64_t offset_ = 0, length_ = 0;
};

// First-fit allocator over the file's offsets, coalescing freed ranges. Thread-safe.
class DiskArena : public std::enable_shared_from_this<DiskArena> {
 public:
  explicit DiskArena(int64_t limit) : limit_(limit) {}
  // `bytes` rounded up to kDiskAlign; an empty extent when that would pass the limit (0 = none).
  DiskExtent allocate(int64_t bytes);
  int64_t in_use() const;
  int64_t end() const;  // one past the highest offset in use: what the file must hold now

 private:
  friend class DiskExtent;
  void release(int64_t offset, int64_t length);

  const int64_t limit_;
  mutable std::mutex mutex_;
  std::map<int64_t, int64_t> free_;  // offset -> length, below end_
  int64_t end_ = 0;
  int64_t in_use_ = 0;
};

// One write or read of the arena file.
struct IoJob {
  enum State : int { Queued, Running, Done, Failed, Cancelled };
  bool write = true;
  void* buffer = nullptr;  // host memory with room for `length` bytes, kDiskAlign aligned
  int64_t offset = 0;
  int64_t length = 0;  // the extent's length (a multiple of kDiskAlign)
  int64_t bytes = 0;   // the copy's own bytes (<= length)
  int64_t issued_ns = 0;
  // A read: the checksum its bytes must have (the write's).
  uint64_t expected = 0;
  // Set by the I/O thread before `state` leaves Running (the release store publishes them).
  int64_t done_ns = 0;
  uint64_t checksum = 0;   // of the bytes written, or read
  bool mismatch = false;   // a read whose bytes do not match `expected` (Failed, error EBADMSG)
  int error = 0;           // errno, when Failed
  int64_t file_bytes = 0;  // the arena file's size when it failed
  std::atomic<int> state{Queued};

  bool finished() const { return state.load(std::memory_order_acquire) >= Done; }
  bool failed() const { return state.load(std::memory_order_acquire) == Failed; }
};
using IoJobPtr = std::shared_ptr<IoJob>;

// Tests only (tests/test_disk_tier.cpp), to make a race between threads happen on demand: each
// write is held this long once running, and `after_await_while_writing` is called (on the
// unpacking thread, no lock held) when a reload is about to go ahead from a host copy whose write
// to the arena file is still running. Never set outside tests; the hot paths read one relaxed
// atomic each.
struct DiskTestHooks {
  std::atomic<int64_t> write_delay_ns{0};
  std::atomic<void (*)()> after_await_while_writing{nullptr};
};
DiskTestHooks& disk_test_hooks();

class DiskTier {
 public:
  // Opens the arena file in options.disk_dir ($TMPDIR or /tmp when empty) and, with disk_min_gbps
  // > 0, measures the disk unless this process measured that directory before. Throws
  // EngineError when the directory cannot hold the file, or when the measurement cannot write.
  explicit DiskTier(const OffloadOptions& options);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  const DiskTierInfo& info() const { return info_; }
  // Measured below disk_min_gbps: the message says so, with the figures and what to do.
  bool too_slow() const { return !slow_message_.empty(); }
  const std::string& slow_message() const { return slow_message_; }

  // Empty when the arena's limit (disk_arena_bytes) would be passed.
  DiskExtent allocate(int64_t bytes) { return arena_->allocate(bytes); }
  // Queues a transfer of `bytes` between `buffer` and the extent. `urgent` reads go first. A write
  // leaves its bytes' checksum in the job once done; a read fails (mismatch) unless its bytes have
  // the checksum `expected`.
  IoJobPtr write(const DiskExtent& extent, const void* buffer, int64_t bytes);
  IoJobPtr read(const DiskExtent& extent, void* buffer, int64_t bytes, bool urgent,
                uint64_t expected);
  // Queued -> Cancelled (true); false once it started (it will finish on its own).
  bool cancel(const IoJobPtr& job);
  // Blocks until the job finished (done, failed or cancelled).
  void wait(const IoJob& job);
  // Blocks until every job queued so far finished.
  void drain();

  int64_t in_flight() const { return in_flight_.load(std::memory_order_acquire); }
  int64_t arena_in_use() const { return arena_->in_use(); }
  int64_t file_bytes() const { return file_bytes_.load(std::memory_order_acquire); }
  // One line for a failed job: what failed, where (directory, file system, free space), the
  // errno, and the bytes the arena needs, with what to do.
  std::string failure_message(const IoJob& job) const;
  // One line for a read whose bytes did not match their write's: `tensor` names the copy.
  std::string corruption_message(const IoJob& job, const std::string& tensor) const;
  // One line for an arena that reached disk_arena_bytes.
  std::string arena_full_message(int64_t bytes) const;

 private:
  struct Worker {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<IoJobPtr> queue;
    bool stop = false;
    std::thread thread;
  };
  IoJobPtr submit(Worker& w, bool write, const DiskExtent& extent, void* buffer, int64_t bytes,
                  bool urgent, uint64_t expected);
  void run(Worker& w);
  int execute(IoJob& job);
  int transfer(bool write, char* buffer, int64_t offset, int64_t length);
  int ensure_size(int64_t bytes);
  void drop_direct();
  void finish(IoJob& job, int state);
  void measure(int64_t bytes);
  void check_speed();

  const OffloadOptions options_;
  DiskTierInfo info_;
  std::string slow_message_;
  int fd_ = -1;
  std::atomic<bool> direct_{false};
  std::atomic<int64_t> file_bytes_{0};  // grown by the writer thread only
  std::shared_ptr<DiskArena> arena_;
  std::atomic<int64_t> writes_{0}, reads_{0};  // transfers run, for the fault injection
  std::atomic<int64_t> in_flight_{0};
  std::mutex done_mutex_;  // waiters sleep on done_cv_; finish() notifies under it
  std::condition_variable done_cv_;
  Worker writer_, reader_;
};

}  // namespace offtune::detail
