#include "disk_tier.hpp"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <utility>

// xxHash (Debian libxxhash-dev) inlined: the hash compiles into the I/O loop, and the installed
// static core asks its consumers for no library beyond libtorch.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace offtune::detail {

int64_t now_ns();  // backend_host_sim.cpp: the engine's clock

namespace {

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// "<bytes> bytes (<human>)": the exact figure for scripts, the readable one for people.
std::string bytes_text(int64_t bytes) {
  return std::to_string(bytes) + " bytes (" + human_bytes(bytes) + ")";
}

std::string errno_text(int error) {
  return std::string(std::strerror(error)) + " (errno " + std::to_string(error) + ")";
}

std::string fs_name(int64_t magic) {
  switch (static_cast<uint64_t>(magic) & 0xffffffffU) {
    case 0xEF53:
      return "ext4";
    case 0x01021994:
      return "tmpfs";
    case 0x858458f6:
      return "ramfs";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x794c7630:
      return "overlayfs";
    case 0x6969:
      return "nfs";
    case 0x2fc12fc1:
      return "zfs";
    case 0xF2F52010:
      return "f2fs";
    case 0x65735546:
      return "fuse";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "fs 0x%llx", static_cast<unsigned long long>(magic));
      return buf;
    }
  }
}

std::string default_dir() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? std::string(tmp) : std::string("/tmp");
}

double gbps(int64_t bytes, int64_t ns) {
  return ns > 0 ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0;
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The disk check's figures, per directory (its canonical path, and the file system's device so
// that another one mounted there is measured anew; not its inode, which a directory made after one
// removed may reuse) and I/O mode, for the life of the process.
struct Measured {
  double write_gbps = 0.0, read_gbps = 0.0;
};
using MeasureKey = std::tuple<std::string, dev_t, bool>;
std::mutex
    g_measured_mutex;  // held through a measurement: two offloaders made at once measure once
std::map<MeasureKey, Measured> g_measured;

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

uint64_t checksum(const void* data, int64_t bytes) {
  return XXH3_64bits(data, static_cast<size_t>(bytes));
}

// ---- extents
// -------------------------------------------------------------------------------------

DiskExtent& DiskExtent::operator=(DiskExtent&& other) noexcept {
  if (this != &other) {
    reset();
    arena_ = std::move(other.arena_);
    offset_ = std::exchange(other.offset_, 0);
    length_ = std::exchange(other.length_, 0);
  }
  return *this;
}

void DiskExtent::reset() {
  if (length_ == 0) return;
  arena_->release(offset_, length_);
  arena_.reset();
  offset_ = length_ = 0;
}

DiskExtent DiskArena::allocate(int64_t bytes) {
  const int64_t length = disk_round(std::max<int64_t>(bytes, 1));
  DiskExtent extent;
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t offset = -1;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second >= length) {
      offset = it->first;
      const int64_t rest = it->second - length;
      free_.erase(it);
      if (rest > 0) free_.emplace(offset + length, rest);
      break;
    }
  }
  if (offset < 0) {
    // A free range at the end is merged into end_ by release(): none is left to extend here.
    if (limit_ > 0 && end_ + length > limit_) return extent;
    offset = end_;
    end_ += length;
  }
  in_use_ += length;
  extent.arena_ = shared_from_this();
  extent.offset_ = offset;
  extent.length_ = length;
  return extent;
}

void DiskArena::release(int64_t offset, int64_t length) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_use_ -= length;
  auto [it, inserted] = free_.emplace(offset, length);
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
      it = prev;
    }
  }
  // The last range gives its space back to the end, so that the next step starts low again.
  if (it->first + it->second == end_) {
    end_ = it->first;
    free_.erase(it);
  }
}

int64_t DiskArena::in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}
int64_t DiskArena::end() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return end_;
}

// ---- the tier
// ------------------------------------------------------------------------------------

DiskTier::DiskTier(const OffloadOptions& options)
    : options_(options), arena_(std::make_shared<DiskArena>(options.disk_arena_bytes)) {
  info_.directory = options.disk_dir.empty() ? default_dir() : options.disk_dir;
  const std::string& dir = info_.directory;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    const int error = errno;
    throw EngineError("offtune: disk tier: disk_dir '" + dir + "' is not a usable directory: " +
                      (S_ISDIR(st.st_mode) ? errno_text(error) : std::string("not a directory")));
  }
  // No name from the start: nothing is left behind, however the process ends.
  fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  info_.tmpfile = fd_ >= 0;
  if (fd_ < 0) {
    // No O_TMPFILE here (an old kernel, or a file system without it): a name for an instant.
    std::string path = dir + "/offtune-arena-XXXXXX";
    fd_ = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd_ < 0) {
      const int error = errno;
      throw EngineError("offtune: disk tier: cannot create the arena file in '" + dir +
                        "': " + errno_text(error));
    }
    ::unlink(path.c_str());
  }
  struct statfs fs {};
  if (::fstatfs(fd_, &fs) == 0) info_.file_system = fs_name(static_cast<int64_t>(fs.f_type));
  // O_DIRECT where the file system takes it: F_SETFL checks that it supports direct I/O.
  if (!options.debug_disk_faults.refuse_direct) {
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0 && ::fcntl(fd_, F_SETFL, flags | O_DIRECT) == 0) direct_ = true;
  }
  info_.direct_io = direct_;
  info_.enabled = true;
  try {
    if (options.disk_min_gbps > 0.0) {
      std::lock_guard<std::mutex> lock(g_measured_mutex);
      char* real = ::realpath(dir.c_str(), nullptr);
      const MeasureKey key{real != nullptr ? std::string(real) : dir, st.st_dev, direct_.load()};
      std::free(real);
      if (auto it = g_measured.find(key); it != g_measured.end()) {
        info_.write_gbps = it->second.write_gbps;
        info_.read_gbps = it->second.read_gbps;
      } else {
        int64_t probe = int64_t{64} << 20;
        if (options.disk_arena_bytes > 0) {
          probe = std::min(probe, options.disk_arena_bytes / kDiskAlign * kDiskAlign);
        }
        if (probe > 0) {
          measure(probe);
          g_measured.emplace(key, Measured{info_.write_gbps, info_.read_gbps});
        }
      }
      check_speed();
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
  writer_.thread = std::thread([this] { run(writer_); });
  reader_.thread = std::thread([this] { run(reader_); });
}

DiskTier::~DiskTier() {
  for (Worker* w : {&writer_, &reader_}) {
    {
      std::lock_guard<std::mutex> lock(w->mutex);
      w->stop = true;
    }
    w->cv.notify_all();
  }
  // Queued jobs are cancelled (their waiters wake); a running one finishes first.
  for (Worker* w : {&writer_, &reader_}) {
    if (w->thread.joinable()) w->thread.join();
  }
  ::close(fd_);
}

// Writes `bytes` in 8 MiB pieces, synced, then reads them back from the medium (O_DIRECT, or with
// the page cache dropped for the range): the figures a step's spills and reads will see.
void DiskTier::measure(int64_t bytes) {
  constexpr int64_t kPiece = int64_t{8} << 20;
  const int64_t piece = std::min(kPiece, bytes);
  void* raw = std::aligned_alloc(kDiskAlign, static_cast<size_t>(piece));
  if (raw == nullptr) throw EngineError("offtune: disk tier: out of memory for the disk check");
  std::unique_ptr<void, decltype(&std::free)> buffer(raw, &std::free);
  std::memset(raw, 0x5A, static_cast<size_t>(piece));
  auto fail = [&](const char* what, int error) {
    throw EngineError("offtune: disk tier: the bandwidth check could not " + std::string(what) +
                      " " + bytes_text(bytes) + " in '" + info_.directory + "' (" +
                      info_.file_system + "): " + errno_text(error) +
                      "; free space there, set disk_dir elsewhere, or disk_min_gbps 0 to skip the "
                      "check");
  };
  if (const int error = ensure_size(bytes)) fail("preallocate", error);
  const int64_t w0 = steady_ns();
  for (int64_t off = 0; off < bytes; off += piece) {
    if (const int error =
            transfer(true, static_cast<char*>(raw), off, std::min(piece, bytes - off)))
      fail("write", error);
  }
  if (::fdatasync(fd_) != 0) fail("sync", errno);
  const int64_t w1 = steady_ns();
  if (!direct_) (void)::posix_fadvise(fd_, 0, bytes, POSIX_FADV_DONTNEED);
  const int64_t r0 = steady_ns();
  for (int64_t off = 0; off < bytes; off += piece) {
    if (const int error =
            transfer(false, static_cast<char*>(raw), off, std::min(piece, bytes - off)))
      fail("read", error);
  }
  const int64_t r1 = steady_ns();
  info_.write_gbps = gbps(bytes, w1 - w0);
  info_.read_gbps = gbps(bytes, r1 - r0);
}

void DiskTier::check_speed() {
  if (info_.write_gbps <= 0.0 && info_.read_gbps <= 0.0) return;  // not measured (no room)
  const double slowest = std::min(info_.write_gbps, info_.read_gbps);
  if (slowest < options_.disk_min_gbps) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "offtune: disk tier: '%s' (%s%s) writes at %.2f GB/s and reads at %.2f GB/s, "
                  "below disk_min_gbps %.2f: spilling activations there would cost more than it "
                  "saves; use a faster disk (disk_dir), tier host, or lower disk_min_gbps",
                  info_.directory.c_str(), info_.file_system.c_str(),
                  direct_ ? ", O_DIRECT" : ", buffered", info_.write_gbps, info_.read_gbps,
                  options_.disk_min_gbps);
    slow_message_ = buf;
  }
}

IoJobPtr DiskTier::write(const DiskExtent& extent, const void* buffer, int64_t bytes) {
  return submit(writer_, true, extent, const_cast<void*>(buffer), bytes, false, 0);
}

IoJobPtr DiskTier::read(const DiskExtent& extent, void* buffer, int64_t bytes, bool urgent,
                        uint64_t expected) {
  return submit(reader_, false, extent, buffer, bytes, urgent, expected);
}

IoJobPtr DiskTier::submit(Worker& w, bool write, const DiskExtent& extent, void* buffer,
                          int64_t bytes, bool urgent, uint64_t expected) {
  auto job = std::make_shared<IoJob>();
  job->expected = expected;
  job->write = write;
  job->buffer = buffer;
  job->offset = extent.offset();
  job->length = extent.length();
  job->bytes = bytes;
  job->issued_ns = now_ns();
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    if (urgent) {
      w.queue.push_front(job);
    } else {
      w.queue.push_back(job);
    }
  }
  w.cv.notify_one();
  return job;
}

bool DiskTier::cancel(const IoJobPtr& job) {
  int expected = IoJob::Queued;
  if (!job->state.compare_exchange_strong(expected, IoJob::Running, std::memory_order_acq_rel)) {
    return false;
  }
  finish(*job, IoJob::Cancelled);  // the worker skips it when it comes to it
  return true;
}

void DiskTier::finish(IoJob& job, int state) {
  job.done_ns = now_ns();
  {
    std::lock_guard<std::mutex> lock(done_mutex_);
    job.state.store(state, std::memory_order_release);
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  }
  done_cv_.notify_all();
}

void DiskTier::wait(const IoJob& job) {
  if (job.finished()) return;
  std::unique_lock<std::mutex> lock(done_mutex_);
  done_cv_.wait(lock, [&] { return job.finished(); });
}

void DiskTier::drain() {
  std::unique_lock<std::mutex> lock(done_mutex_);
  done_cv_.wait(lock, [&] { return in_flight_.load(std::memory_order_acquire) == 0; });
}

void DiskTier::run(Worker& w) {
  for (;;) {
    IoJobPtr job;
    {
      std::unique_lock<std::mutex> lock(w.mutex);
      w.cv.wait(lock, [&] { return w.stop || !w.queue.empty(); });
      if (w.stop) {
        // Shutting down: the engine drained what it needed; cancel the rest so no waiter hangs.
        for (IoJobPtr& left : w.queue) cancel(left);
        w.queue.clear();
        return;
      }
      job = std::move(w.queue.front());
      w.queue.pop_front();
    }
    int expected = IoJob::Queued;
    if (!job->state.compare_exchange_strong(expected, IoJob::Running, std::memory_order_acq_rel)) {
      continue;  // cancelled while queued
    }
    int error = 0;
    try {
      error = execute(*job);
    } catch (...) {
      error = EIO;
    }
    if (error != 0) {
      job->error = error;
      job->file_bytes = file_bytes();
    }
    finish(*job, error != 0 ? IoJob::Failed : IoJob::Done);
  }
}

DiskTestHooks& disk_test_hooks() {
  static DiskTestHooks hooks;
  return hooks;
}

int DiskTier::execute(IoJob& job) {
  const DiskFaults& faults = options_.debug_disk_faults;
  if (job.write) {
    if (const int64_t delay = disk_test_hooks().write_delay_ns.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(delay));
    }
    const int64_t n = writes_.fetch_add(1) + 1;
    if (faults.fail_write == n) return faults.error;
    if (const int error = ensure_size(job.offset + job.length)) return error;
    job.checksum = checksum(job.buffer, job.bytes);
    return transfer(true, static_cast<char*>(job.buffer), job.offset, job.length);
  }
  const int64_t n = reads_.fetch_add(1) + 1;
  if (faults.fail_read == n) return faults.error;
  if (const int error = transfer(false, static_cast<char*>(job.buffer), job.offset, job.length)) {
    return error;
  }
  job.checksum = checksum(job.buffer, job.bytes);
  if (job.checksum != job.expected) {
    job.mismatch = true;
    return EBADMSG;
  }
  return 0;
}

int DiskTier::transfer(bool write, char* buffer, int64_t offset, int64_t length) {
  while (length > 0) {
    const ssize_t n = write ? ::pwrite(fd_, buffer, static_cast<size_t>(length), offset)
                            : ::pread(fd_, buffer, static_cast<size_t>(length), offset);
    if (n < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      if (error == EINVAL && direct_.load()) {
        drop_direct();
        continue;
      }
      return error;
    }
    if (n == 0) return write ? ENOSPC : EIO;  // a read past the end: the file lost data
    buffer += n;
    offset += n;
    length -= n;
  }
  return 0;
}

// Grows the file (writer thread only, or the constructor before the threads start) so that it
// holds `bytes`: by half again at least, in 64 MiB steps, up to the arena's limit, so that a step
// that spills gigabytes does not call fallocate per tensor. Preallocated blocks make a full disk
// show here, with a clear errno, rather than as a torn write.
int DiskTier::ensure_size(int64_t bytes) {
  const int64_t have = file_bytes_.load(std::memory_order_acquire);
  if (bytes <= have) return 0;
  constexpr int64_t kStep = int64_t{64} << 20;
  int64_t target = std::max(bytes, have + have / 2);
  target = (target + kStep - 1) / kStep * kStep;
  if (options_.disk_arena_bytes > 0)
    target = std::max(bytes, std::min(target, options_.disk_arena_bytes));
  int error = 0;
  for (int64_t want : {target, bytes}) {
    if (::fallocate(fd_, 0, have, want - have) == 0) {
      file_bytes_.store(want, std::memory_order_release);
      return 0;
    }
    error = errno;
    if (error == EOPNOTSUPP) {
      // No preallocation on this file system: a sparse file, whose writes may fail instead.
      if (::ftruncate(fd_, want) == 0) {
        file_bytes_.store(want, std::memory_order_release);
        return 0;
      }
      error = errno;
    }
    if (want == bytes) break;
  }
  return error;
}

void DiskTier::drop_direct() {
  static std::once_flag warned;
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd_, F_SETFL, flags & ~O_DIRECT);
  if (direct_.exchange(false)) {
    std::call_once(warned, [this] {
      TORCH_WARN("offtune: disk tier: the file system in '", info_.directory,
                 "' refused a direct (O_DIRECT) transfer; using buffered I/O");
    });
  }
}

std::string DiskTier::failure_message(const IoJob& job) const {
  std::string where = "'" + info_.directory + "' (" + info_.file_system;
  struct statfs fs {};
  if (::fstatfs(fd_, &fs) == 0) {
    where += ", " +
             human_bytes(static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_bsize)) +
             " free";
  }
  where += ")";
  std::string msg = "offtune: disk tier: " + std::string(job.write ? "writing " : "reading ") +
                    bytes_text(job.bytes) + (job.write ? " to" : " from") + " the arena file in " +
                    where + " failed: " + errno_text(job.error);
  if (job.write) {
    const int64_t needed = std::max(job.offset + job.length, arena_->end());
    msg += "; this step needs " + bytes_text(needed) + " of disk for its spilled activations (" +
           "the file holds " + human_bytes(job.file_bytes) +
           "): free space there, point disk_dir at a larger file system, or use tier auto with "
           "a larger host_budget_bytes";
  }
  return msg;
}

std::string DiskTier::corruption_message(const IoJob& job, const std::string& tensor) const {
  return "offtune: disk tier: the copy of " + tensor + " read back from the arena file in '" +
         info_.directory + "' (" + info_.file_system + ", offset " + std::to_string(job.offset) +
         ") does not match what was written (XXH3 checksum " + hex(job.expected) + " written, " +
         hex(job.checksum) +
         " read): the disk, or something else writing to the file, changed it; this step cannot "
         "go on from it: check the disk (dmesg, smartctl) or point disk_dir at another one";
}

std::string DiskTier::arena_full_message(int64_t bytes) const {
  return "offtune: disk tier: the arena file in '" + info_.directory +
         "' is full: " + bytes_text(bytes) + " more would pass disk_arena_bytes " +
         bytes_text(options_.disk_arena_bytes) + " (" + human_bytes(arena_->in_use()) +
         " in use); this step needs " + bytes_text(arena_->end() + disk_round(bytes)) +
         ": raise disk_arena_bytes (0 = grow as needed) or host_budget_bytes";
}

}  // namespace offtune::detail
