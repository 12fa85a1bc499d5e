// What the engine asks of the heap per saved tensor, counted by replacing the global operator new
// (this suite is its own executable for that reason). Only the calling thread's allocations are
// counted: host-sim's copy thread and autograd's are not the hook's cost.
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <new>
#include <optional>
#include <thread>

#include "block_cache.hpp"  // OFFTUNE_BLOCKS_FROM_HEAP
#include "offtune/core.hpp"

namespace {
thread_local int64_t t_allocations = 0;  // operator new calls on this thread
}  // namespace

// Unaligned allocations only: libstdc++'s array, nothrow and sized forms call these, and its
// aligned forms (not counted) pair with its own aligned deletes. Not under AddressSanitizer, whose
// own operator new and delete must see every block (the tests skip there: the engine's block caches
// are off).
#if !defined(OFFTUNE_BLOCKS_FROM_HEAP)
// Not inlined: GCC would otherwise pair an inlined malloc with a delete elsewhere in this file and
// warn of a mismatch.
[[gnu::noinline]] void* operator new(std::size_t bytes) {
  ++t_allocations;
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { ::operator delete(p); }
#endif

namespace offtune {
namespace {

constexpr int64_t kChain = 3000;  // more than any per-thread cache of the engine's holds

struct Pass {
  int64_t allocations = 0;  // operator new calls on this thread
  int64_t offloaded = 0;    // tensors the engine offloaded
};

// One forward+backward of a chain of sin (each saves its input, 4 KiB) under `offloader`'s scope,
// or else under a HookFloorScope with a no-op hook, after two unmeasured passes (caches, pools,
// slabs). With `backward_elsewhere`, backward runs on a thread of its own (as on cuda, where it
// runs on autograd's device threads): what forward made, backward destroys there.
Pass measured_pass(ActivationOffloader* offloader, bool backward_elsewhere = false) {
  at::Tensor x = at::randn({1024}).requires_grad_();
  Pass out;
  for (int pass = 0; pass < 3; ++pass) {
    if (offloader) offloader->synchronize();
    const int64_t offloaded = offloader ? offloader->stats().offloaded : 0;
    const int64_t before = t_allocations;
    {
      at::Tensor y = x;
      {
        std::optional<OffloadScope> scope;
        std::optional<HookFloorScope> floor;
        if (offloader) {
          scope.emplace(offloader->scope());
        } else {
          floor.emplace(HookFloor::NoOp);
        }
        for (int64_t i = 0; i < kChain; ++i) y = y.sin();
      }
      if (backward_elsewhere) {
        std::thread([&y] { y.sum().backward(); }).join();
      } else {
        y.sum().backward();
      }
    }
    if (offloader) offloader->synchronize();
    out.allocations = t_allocations - before;
    out.offloaded = offloader ? offloader->stats().offloaded - offloaded : 0;
    x.mutable_grad() = at::Tensor();
  }
  return out;
}

OffloadOptions host_sim(int64_t min_offload_size) {
  OffloadOptions o;
  o.backend = BackendKind::HostSim;
  o.min_offload_size = min_offload_size;
  return o;
}

double per_tensor(int64_t allocations, int64_t tensors) {
  return static_cast<double>(allocations) / static_cast<double>(tensors);
}

// The whole suite counts with the replaced operator new and the engine's block caches on.
class Allocations : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(OFFTUNE_BLOCKS_FROM_HEAP)
    GTEST_SKIP() << "under AddressSanitizer: its own operator new counts, and the engine's block "
                    "caches are off";
#endif
  }
};

// Any saved-tensor hook costs autograd's heap a few calls per tensor (a detached copy at pack, a
// new TensorImpl at unpack) beside the hooks object; the no-op hook's pass measures them. Expects a
// kept tensor to cost the engine nothing more: its slot (the hooks object) comes from the block
// caches once the engine is warm, and keeping a tensor needs nothing else.
void expect_kept_tensors_allocate_nothing(bool backward_elsewhere) {
  ActivationOffloader kept(host_sim(std::numeric_limits<int64_t>::max()));
  // Autograd's own calls, plus one no-op hooks object per saved tensor.
  const Pass floor = measured_pass(nullptr, backward_elsewhere);
  const Pass nothing = measured_pass(&kept, backward_elsewhere);
  EXPECT_LE(per_tensor(nothing.allocations - (floor.allocations - kChain), kChain), 0.05)
      << "no-op hook: " << floor.allocations << " allocations per pass on the forward thread (one "
      << "per saved tensor its hooks object); nothing offloaded: " << nothing.allocations;
}

TEST_F(Allocations, KeepingATensorAllocatesNothingBeyondAutogradsOwn) {
  expect_kept_tensors_allocate_nothing(/*backward_elsewhere=*/false);
}

// The same when backward runs on another thread, which then destroys the slots forward made: they
// come back to the forward thread through the block caches' shared depot instead of the heap.
TEST_F(Allocations, SlotsDestroyedOnAnotherThreadComeBack) {
  expect_kept_tensors_allocate_nothing(/*backward_elsewhere=*/true);
}

// An offloaded tensor needs, beyond what a kept one does, the tensor unpack hands back: its device
// storage (a StorageImpl; the bytes come from the device allocator, not operator new), its
// TensorImpl and the version counter every new TensorImpl makes (replaced by the saved tensor's).
// Everything else the engine uses per tensor (slots, entries, copy fences, host blocks, map slots)
// is recycled.
TEST_F(Allocations, OffloadingATensorAllocatesOnlyTheTensorItHandsBack) {
  ActivationOffloader kept(host_sim(std::numeric_limits<int64_t>::max()));
  ActivationOffloader offloaded(host_sim(0));
  const Pass nothing = measured_pass(&kept);
  const Pass everything = measured_pass(&offloaded);
  ASSERT_GE(everything.offloaded, kChain - 1);
  EXPECT_LE(per_tensor(everything.allocations - nothing.allocations, everything.offloaded), 3.05)
      << "nothing offloaded: " << nothing.allocations
      << " allocations per pass; everything offloaded: " << everything.allocations << " ("
      << everything.offloaded << " offloaded tensors)";
}

}  // namespace
}  // namespace offtune
