// Per-thread caches of fixed-size heap blocks, for the objects the engine makes and destroys once
// per saved tensor or per copy: autograd's hooks object (a slot) and the copy fences. Forward makes
// them by the thousand and backward destroys them in reverse order, which overruns malloc's own
// per-thread cache (a few blocks per size) and sends each one through the shared arena, atomics
// included. Here a thread keeps the blocks it freed, up to kMaxBytes per block size, for its next
// ones. A block freed on another thread than the one that made it (autograd's device threads on
// cuda) joins that thread's cache; a full cache gives blocks back to the heap; a thread's cache
// goes back to the heap when the thread ends.
//
// Not under AddressSanitizer, which should see every block freed.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

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
  static constexpr size_t kMaxBytes = size_t{8} << 20;

  static void* take() {
#if !defined(OFFTUNE_BLOCKS_FROM_HEAP)
    if (Cache* c = cache(); c != nullptr && c->head != nullptr) {
      Free* block = c->head;
      c->head = block->next;
      --c->count;
      return block;
    }
#endif
    return ::operator new(Size);
  }
  static void give(void* p) noexcept {
#if !defined(OFFTUNE_BLOCKS_FROM_HEAP)
    if (Cache* c = cache(); c != nullptr && c->count < kMaxBytes / Size) {
      c->head = new (p) Free{c->head};
      ++c->count;
      return;
    }
#endif
    ::operator delete(p);
  }

 private:
  struct Free {
    Free* next;
  };
  struct Cache {
    Free* head = nullptr;
    size_t count = 0;
    ~Cache() {
      t_alive = false;  // a block freed later in this thread's exit goes to the heap
      while (head != nullptr) ::operator delete(std::exchange(head, head->next));
    }
  };
  static Cache* cache() noexcept {
    if (!t_alive) return nullptr;
    thread_local Cache c;
    return &c;
  }
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
