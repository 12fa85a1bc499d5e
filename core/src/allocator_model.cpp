// The public face of host-sim's caching-allocator model (offtune/allocator_model.hpp).
#include "offtune/allocator_model.hpp"

#include <stdexcept>
#include <unordered_map>

#include "alloc_model.hpp"

namespace offtune {

struct AllocatorModel::Impl {
  detail::sim::CachingAllocatorModel model;
  std::unordered_map<int64_t, detail::sim::CachingAllocatorModel::Block*> blocks;
  int64_t next = 1;
};

AllocatorModel::AllocatorModel() : impl_(std::make_unique<Impl>()) {}
AllocatorModel::~AllocatorModel() = default;

int64_t AllocatorModel::allocate(int64_t bytes, int64_t stream) {
  if (bytes <= 0) throw std::invalid_argument("allocator model: allocate needs a positive size");
  auto* block = impl_->model.allocate(bytes, stream);
  // No capacity is set: the model only returns null when it runs out, which it cannot.
  if (block == nullptr) throw std::logic_error("allocator model: out of memory without capacity");
  const int64_t handle = impl_->next++;
  impl_->blocks.emplace(handle, block);
  return handle;
}

void AllocatorModel::record_stream(int64_t handle, int64_t stream) {
  if (auto it = impl_->blocks.find(handle); it != impl_->blocks.end()) {
    impl_->model.record_stream(it->second, stream);
  }
}

void AllocatorModel::free(int64_t handle) {
  auto it = impl_->blocks.find(handle);
  if (it == impl_->blocks.end()) return;
  impl_->model.free(it->second);
  impl_->blocks.erase(it);
}

void AllocatorModel::complete_stream(int64_t stream) { impl_->model.complete_stream(stream); }

int64_t AllocatorModel::allocated() const { return impl_->model.allocated(); }
int64_t AllocatorModel::reserved() const { return impl_->model.reserved(); }
int64_t AllocatorModel::peak_reserved() const { return impl_->model.peak_reserved(); }
int64_t AllocatorModel::peak_allocated() const { return impl_->model.peak_allocated(); }
void AllocatorModel::reset_peak() { impl_->model.reset_peak(); }

}  // namespace offtune
