// Caches of fixed-size heap blocks, for the objects the engine makes and destroys once per saved
// tensor or per copy: autograd's hooks object (a slot) and the copy fences. Forward makes them by
// the thousand and backward destroys them in reverse order, which overruns malloc's own per-thread
// cache (a few blocks per size) and sends each one through the shared arena, atomics included.
//
// Two levels, as thread-caching allocators do: each thread keeps fewer than 2 x kBatch blocks of
// its own, with no lock; beyond that it hands kBatch blocks at a time to a process-wide depot (one
// lock per batch), from which a thread with none left takes a batch back. So blocks freed on
// another thread than the one that made them (on cuda, backward runs on autograd's device threads)
// come back to the making thread instead of going to the heap. The depot keeps at most kMaxBytes
// per block size; more goes back to the heap, and so does a thread's own cache when the depot is
// full at its exit.
//
// Not under AddressSanitizer, which should see every block freed.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define OFFTUNE_BLOCKS_FROM_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OFFTUNE_BLOCKS_FROM_HEAP 1
#endif
#endif

namespace offtune::detail {

template <size_t Size>
class BlockCache {
  static_assert(Size >= sizeof(void*), "a free block holds the next one's address");

 public:
  static constexpr size_t kBatch = 256;                 // blocks moved to or from the depot at once
  static constexpr size_t kMaxBytes = size_t{8} << 20;  // the depot keeps at most this much

  static void* take() {
#if !defined(OFFTUNE_BLOCKS_FROM_HEAP)
    if (Local* local = Local::get(); local != nullptr) {
      if (local->count == 0) local->refill();
      if (Free* block = local->head; block != nullptr) {
        local->head = block->next;
        --local->count;
        return block;
      }
      if (local->misses > 0) --local->misses;
    }
#endif
    return ::operator new(Size);
  }
  static void give(void* p) noexcept {
#if !defined(OFFTUNE_BLOCKS_FROM_HEAP)
    if (Local* local = Local::get(); local != nullptr) {
      if (local->count == kBatch) local->retire();
      local->head = new (p) Free{local->head};
      ++local->count;
      return;
    }
#endif
    ::operator delete(p);
  }

 private:
  struct Free {
    Free* next;
  };

  static void free_chain(Free* head) noexcept {
    while (head != nullptr) ::operator delete(std::exchange(head, head->next));
  }

  // Chains of blocks: kBatch each, or fewer from a thread that ended.
  struct Batch {
    Free* head = nullptr;
    size_t count = 0;
  };
  class Depot {
   public:
    Depot() { batches_.reserve(kMaxBatches); }
    // Keeps the batch, or gives it back to the heap when the depot is full.
    void put(Batch batch) noexcept {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (batches_.size() < kMaxBatches) {
          batches_.push_back(batch);  // within the reserved capacity: no allocation
          return;
        }
      }
      free_chain(batch.head);
    }
    Batch get() noexcept {
      std::lock_guard<std::mutex> lock(mutex_);
      if (batches_.empty()) return {};
      const Batch batch = batches_.back();
      batches_.pop_back();
      return batch;
    }

   private:
    static constexpr size_t kMaxBatches = kMaxBytes / (Size * kBatch) + 1;
    std::mutex mutex_;
    std::vector<Batch> batches_;
  };
  static Depot& depot() {
    static auto* d = new Depot();  // leaked: blocks may be given during static destruction
    return *d;
  }

  // A thread's blocks: a partial chain it takes from and gives to, and at most one full batch.
  struct Local {
    Free* head = nullptr;
    size_t count = 0;      // blocks in head's chain, at most kBatch
    Free* full = nullptr;  // a chain of kBatch blocks, or none
    // After the depot had nothing, the next takes go to the heap without asking it again (a cold
    // start would otherwise lock the depot once per block).
    size_t misses = 0;

    static Local* get() noexcept {
      if (!t_alive) return nullptr;
      thread_local Local local;
      return &local;
    }
    // The chain is empty: the full batch, else one from the depot (unless it just had none).
    void refill() noexcept {
      if (full != nullptr) {
        head = std::exchange(full, nullptr);
        count = kBatch;
      } else if (misses == 0) {
        const Batch batch = depot().get();
        head = batch.head;
        count = batch.count;
        if (head == nullptr) misses = kBatch;
      }
    }
    // The chain has kBatch blocks: it becomes the full batch, and the previous one goes to the
    // depot.
    void retire() noexcept {
      if (full != nullptr) depot().put({full, kBatch});
      full = std::exchange(head, nullptr);
      count = 0;
    }
    ~Local() {
      t_alive = false;  // a block given later in this thread's exit goes to the heap
      if (full != nullptr) depot().put({full, kBatch});
      if (head != nullptr) depot().put({head, count});
    }
  };
  static inline thread_local bool t_alive = true;
};

// An allocator that takes single objects from BlockCache: for std::allocate_shared, whose control
// block (and the object in it) is then one cached block.
template <typename T>
struct CachedAllocator {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  using value_type = T;
  CachedAllocator() = default;
  template <typename U>
  CachedAllocator(const CachedAllocator<U>&) noexcept {}  // NOLINT: rebinding converts implicitly
  T* allocate(size_t n) {
    if (n == 1) return static_cast<T*>(BlockCache<sizeof(T)>::take());
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n == 1) {
      BlockCache<sizeof(T)>::give(p);
    } else {
      std::allocator<T>().deallocate(p, n);
    }
  }
  template <typename U>
  bool operator==(const CachedAllocator<U>&) const noexcept {
    return true;
  }
};

// std::make_shared from a cached block.
template <typename T, typename... Args>
std::shared_ptr<T> make_shared_cached(Args&&... args) {
  return std::allocate_shared<T>(CachedAllocator<T>(), std::forward<Args>(args)...);
}

}  // namespace offtune::detail
