// Layer offloading (offtune/layer_offload.hpp), written against Backend like the activation engine.
// Rules, in one place:
//
// - A frozen parameter keeps its TensorImpl (the module and its registry hold it) and changes only
//   its storage: one on its host copy (or, strict or out of the GPU's reach, a zero-byte one whose
//   data pointer throws an error naming it) while it is not attached, a fresh device storage of
//   its own per load while it is. Saved views (linear saves weight.t()) hold the storage they were
//   made on, so a later swap never changes what a graph saved.
// - The weight's value is its host copy unless it is attached; then it is the device copy. Changes
//   are seen by the version counter (shared with every view): one made while attached is written
//   back when the device copy goes; one made to the host copy after a load's copy was issued makes
//   that load copy it again when the block is entered.
// - A graph may save the parameter's own TensorImpl (x * weight saves `weight`; a norm's weight),
//   and backward would then read it through whatever storage it has by then: the host copy, over
//   the link on cuda, or a placeholder that throws. Such a parameter is found when its block is
//   left and stays on the device from then on, out of the offloader's hands. The signal: while
//   the block ran, the TensorImpl gained more references than its storage did. A view (linear and
//   matmul save weight.t()) holds both, its base and the storage it was made on, and is safe (it
//   reads that storage); a handle on the parameter itself holds the TensorImpl only. Counts are
//   compared within one block's run, where only the block's forward took references: handles that
//   callers hold for a while (a lambda's capture) come and go between blocks.
// - Loads are allocated on the stream current when issued (the compute stream), written on the
//   copy stream, and every stream that runs the block waits for the copy once. A load dropped
//   before its stream waited for it is recorded on the copy stream, and on every other stream that
//   was handed it, so that its blocks are not reused before the copy wrote them nor while another
//   stream still reads them.
// - A load is all or nothing (everything allocated before a copy is issued); a look-ahead load is
//   tried without reclaiming and skipped when it does not fit, so that enter fails only for the
//   block entered, and leaves no block half-loaded.
// - Every device copy is registered with the activation offloader whose link it shares, with its
//   key: a tensor on it saved under that offloader's scope is kept as (key, geometry) and rebuilt
//   at unpack on the storage acquire(key) returns, which makes the block resident the way enter()
//   does (prefetching in backward order) without pointing the parameters at it. So a graph holds
//   no frozen weights between forward and backward.
// - Observers hear weight copies (CopyEvent::weights) and waits (WaitKind::Weights) outside the
//   lock.
#include "offtune/layer_offload.hpp"

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend.hpp"
#include "context.hpp"
#include "host_pool.hpp"
#include "pressure.hpp"
#include "seam.hpp"

namespace offtune {

void LayerOffloadOptions::validate() const {
  if (depth < 1) {
    throw OptionsError("layer offload depth must be >= 1 (blocks copied ahead), got " +
                       std::to_string(depth));
  }
  if (debug_copy_delay_ns < 0) {
    throw OptionsError("debug_copy_delay_ns must be >= 0, got " +
                       std::to_string(debug_copy_delay_ns));
  }
  if (!(link.pinned_gbps >= 0.0) || !(link.pageable_gbps >= 0.0) || link.latency_ns < 0) {
    throw OptionsError("link: bandwidths and latency must be >= 0");
  }
}

namespace detail {

namespace {

int64_t storage_bytes(const at::Tensor& t) {
  return static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size());
}

// Read straight from the version counter: in-place ops on a weight and on every view of it bump
// it, which is how a change to a frozen weight is seen.
uint32_t version_of(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->version_counter().current_version();
}

// A storage of zero bytes on `device`, for a weight of no bytes (nothing to read).
c10::Storage empty_storage(c10::Device device) {
  return c10::Storage(c10::Storage::use_byte_size_t(), 0, c10::DataPtr(nullptr, device),
                      /*allocator=*/nullptr, /*resizable=*/false);
}

// A storage on a weight's host copy, tagged with the weight's device: a tensor on it is still a
// tensor of that device, and its ops read and write the host copy in place (host-sim: device
// tensors are CPU tensors; cuda: pinned memory from cudaHostAlloc is mapped into the GPU's address
// space at the same address under unified addressing, so kernels reach it over the link). It does
// not own the memory: the offloader moves such a storage to device memory before letting the host
// copy go (restore_all), so that a tensor still on it never points at freed memory.
c10::Storage host_storage(void* host, int64_t bytes, c10::Device device) {
  return c10::Storage(c10::Storage::use_byte_size_t(), bytes, c10::DataPtr(host, device),
                      /*allocator=*/nullptr, /*resizable=*/false);
}

void point_at(const at::Tensor& param, c10::Storage storage) {
  c10::TensorImpl* impl = param.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(storage));
  impl->set_storage_offset(0);
}

std::string describe(const std::string& name, int64_t block, size_t k, const at::Tensor& t) {
  return (name.empty() ? "parameter " + std::to_string(k) : "'" + name + "'") + " of block " +
         std::to_string(block) + " (" + c10::toString(t.scalar_type()) + " " + c10::str(t.sizes()) +
         ")";
}

bool contains(const c10::SmallVector<Stream, 2>& streams, Stream s) {
  return std::find(streams.begin(), streams.end(), s) != streams.end();
}

struct Emit {
  std::vector<CopyEvent> issued, completed;
  std::vector<WaitEvent> waits;
};

}  // namespace

// Saved tensors on a device copy, under an activation offloader, are kept as a reference (key:
// block << 16 | parameter) and had again through acquire() in backward: see WeightSource.
constexpr int kParamBits = 16;

class LayerState final : public WeightSource, public std::enable_shared_from_this<LayerState> {
 public:
  LayerState(std::shared_ptr<Context> ctx, std::unique_ptr<ActivationOffloader> own,
             LayerOffloadOptions options)
      : own_(std::move(own)),
        ctx_(std::move(ctx)),
        backend_(backend_of(*ctx_)),
        options_(std::move(options)),
        pool_(std::make_shared<HostPool>(backend_.host_memory(), int64_t{64} << 20,
                                         /*poison=*/false)) {}

  ~LayerState() override {
    try {
      restore_all();
    } catch (const std::exception& e) {
      TORCH_WARN("offtune: layer offloader could not restore the frozen weights: ", e.what());
    }
  }

  int64_t add_block(std::vector<at::Tensor> frozen, std::vector<std::string> names);
  c10::Storage acquire(int64_t key) override;
  void enter(int64_t block);
  void exit(int64_t block);
  void release();
  void synchronize() {
    backend_.synchronize();
    Emit out;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      report_completions(out);
    }
    deliver(out);
  }

  const LayerOffloadOptions& options() const { return options_; }
  Backend& backend() { return backend_; }
  Context& context() { return *ctx_; }
  ActivationOffloader* own() { return own_.get(); }
  int64_t blocks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(blocks_.size());
  }
  LayerOffloadStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  int64_t resident_blocks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(
        std::count_if(blocks_.begin(), blocks_.end(), [](const Block& b) { return b.loaded(); }));
  }

 private:
  struct Param {
    at::Tensor tensor;  // the parameter itself
    std::string name;   // as given to add_block, or empty
    int64_t bytes = 0;
    // The host copy: the weight's value whenever it does not point at a device copy.
    HostBlock host;
    bool pinned = true;
    // What the parameter points at outside its block: a storage on `host` (reachable), or one
    // that throws an error naming the weight when an op reads or writes it.
    c10::Storage outside;
    bool reachable = false;
    // Its version when the current load's copy was issued (a later change to the host copy makes
    // that copy stale), and when it was pointed at the device copy (a later change is written
    // back when the device copy goes).
    uint32_t load_version = 0;
    uint32_t attach_version = 0;
    // Reference counts of the TensorImpl and of its storage when its block was entered.
    int64_t enter_uses = 0;
    int64_t enter_storage_uses = 0;
    bool attached = false;  // points at a device storage (else at `outside`)
    bool kept = false;      // saved by a graph as itself: stays on the device, not offloaded
  };
  // The copy between `p`'s host block and `storage`.
  static CopyRequest copy_request(const Param& p, const c10::Storage& storage, bool timed,
                                  CopyDirection direction = CopyDirection::HostToDevice) {
    CopyRequest r;
    r.direction = direction;
    r.device = &storage;
    r.host = p.host.data();
    r.bytes = p.bytes;
    r.pinned = p.pinned;
    r.timed = timed;
    return r;
  }
  struct Block {
    std::vector<Param> params;
    int64_t bytes = 0;
    std::vector<c10::Storage> device;  // the current load, one storage per parameter
    FencePtr fence;                    // its last copy (copies complete in issue order)
    Stream alloc_stream = Stream(Stream::DEFAULT, c10::Device(c10::DeviceType::CPU));
    c10::SmallVector<Stream, 2> ready_on;   // streams ordered after the load
    c10::SmallVector<Stream, 2> consumers;  // streams that were handed the load
    bool prefetched = false;
    bool reported = true;  // its completion was reported
    int64_t issued_ns = 0;
    int entered = 0;
    bool loaded() const { return !device.empty(); }
  };

  std::shared_ptr<Observer> observer() const { return observer_of(*ctx_); }
  // The next `depth` blocks after `block` in the step's schedule (forward 0..n-1, then backward
  // n-1..0, then the next forward), without repeats.
  c10::SmallVector<int64_t, 4> upcoming(int64_t block, bool backward) const;
  // Device copies just allocated, to register with the activation offloader (outside the lock).
  using Fresh = std::vector<std::pair<c10::Storage, int64_t>>;
  // All or nothing: when an allocation or a copy throws, nothing of the block counts as loaded.
  void issue_load(int64_t index, bool prefetch, Emit& out, Fresh& fresh);
  // A look-ahead load: skipped (false) rather than failing when it does not fit.
  bool try_prefetch(int64_t index, Emit& out, Fresh& fresh);
  // Copies again the weights of a loaded block whose host copy changed since its copy was issued.
  void refresh(Block& b);
  // Makes block `index` resident (loading it if need be), prefetches what follows it in the
  // schedule and lets go of the blocks not running that do not. Returns the fence the current
  // stream must wait for, or null.
  FencePtr make_resident(int64_t index, bool backward, Stream on, Emit& out, Fresh& fresh);
  void check_frozen(const Block& b, int64_t index) const;
  void register_fresh(const Fresh& fresh);
  void wait_for(int64_t index, Stream on, const FencePtr& fence, Emit& out);
  void attach(Block& b);
  void unload(Block& b);
  void keep_saved_parameters(Block& b);
  void report_completions(Emit& out);
  void deliver(Emit& out) const;
  void restore_all();
  // Gives `p.outside` device memory holding its host copy's bytes (see host_storage).
  void move_to_device(Param& p, Stream on);
  Block& at(int64_t index) {
    if (index < 0 || index >= static_cast<int64_t>(blocks_.size())) {
      throw std::out_of_range("layer offloader: no block " + std::to_string(index) + " (" +
                              std::to_string(blocks_.size()) + " registered)");
    }
    return blocks_[static_cast<size_t>(index)];
  }

  std::unique_ptr<ActivationOffloader> own_;  // standalone: the offloader whose link is used
  std::shared_ptr<Context> ctx_;
  Backend& backend_;
  const LayerOffloadOptions options_;
  std::shared_ptr<HostPool> pool_;
  mutable std::mutex mutex_;
  std::vector<Block> blocks_;
  std::unordered_map<c10::TensorImpl*, int64_t> registered_;  // parameter -> its block
  LayerOffloadStats stats_;
};

c10::SmallVector<int64_t, 4> LayerState::upcoming(int64_t block, bool backward) const {
  c10::SmallVector<int64_t, 4> out;
  const auto n = static_cast<int64_t>(blocks_.size());
  if (n == 0) return out;
  const int64_t period = 2 * n;
  const int64_t pos = backward ? n + (n - 1 - block) : block;
  for (int64_t k = 1; k <= options_.depth && k < period; ++k) {
    const int64_t q = (pos + k) % period;
    const int64_t index = q < n ? q : period - 1 - q;
    if (std::find(out.begin(), out.end(), index) == out.end()) out.push_back(index);
  }
  return out;
}

int64_t LayerState::add_block(std::vector<at::Tensor> frozen, std::vector<std::string> names) {
  if (!names.empty() && names.size() != frozen.size()) {
    throw std::invalid_argument("layer offloader: " + std::to_string(names.size()) + " names for " +
                                std::to_string(frozen.size()) +
                                " parameters (give one name per parameter, or none)");
  }
  std::vector<c10::Storage> reachable;  // never offloaded as activations (outside the lock)
  int64_t index = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    index = static_cast<int64_t>(blocks_.size());
    Block b;
    std::unordered_set<c10::TensorImpl*> seen;
    // Everything is checked before anything changes: a refused block leaves its tensors as they
    // were.
    for (size_t k = 0; k < frozen.size(); ++k) {
      const at::Tensor& t = frozen[k];
      if (!t.defined()) throw std::invalid_argument("layer offloader: an undefined parameter");
      const std::string name = names.empty() ? std::string() : names[k];
      const std::string what = describe(name, index, k, t);
      auto refuse = [&](const std::string& why) {
        throw std::invalid_argument("layer offloader: " + what + " " + why);
      };
      if (t.requires_grad()) {
        refuse("requires grad: only frozen parameters (requires_grad = false) can be offloaded");
      }
      if (t.is_inference()) {
        refuse(
            "is an inference tensor (made under c10::InferenceMode), whose changes cannot be "
            "tracked: make it outside InferenceMode");
      }
      if (!t.is_contiguous() || !backend_.is_device_tensor(t) || !backend_.on_this_device(t)) {
        refuse("must be contiguous and on " + backend_.device_name());
      }
      c10::TensorImpl* impl = t.unsafeGetTensorImpl();
      if (auto it = registered_.find(impl); it != registered_.end()) {
        refuse("is already registered in block " + std::to_string(it->second) +
               " (a weight shared by two blocks cannot be offloaded with either: leave it out "
               "and keep it on the device)");
      }
      if (!seen.insert(impl).second) refuse("is given twice");
      const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
      for (size_t j = 0; j < blocks_.size(); ++j) {
        for (const Param& p : blocks_[j].params) {
          if (p.tensor.storage().unsafeGetStorageImpl() == storage ||
              p.outside.unsafeGetStorageImpl() == storage) {
            refuse("shares its storage with a weight of block " + std::to_string(j) +
                   " (a view or a tied copy of it): register each weight once");
          }
        }
      }
      const int64_t bytes = storage_bytes(t);
      if (t.storage_offset() != 0 || static_cast<int64_t>(t.storage().nbytes()) != bytes) {
        refuse(
            "is part of a larger storage (a view or a slice of another tensor): register the "
            "tensor that owns the storage");
      }
      if (t.storage().use_count() > 1) {
        refuse(
            "shares its storage with another tensor (a view or a tied weight held elsewhere), "
            "which would keep the old device memory and miss every later change: drop that "
            "tensor, or leave this weight out");
      }
      Param p;
      p.tensor = t;
      p.name = name;
      p.bytes = bytes;
      b.params.push_back(std::move(p));
    }
    // Copy each parameter to host memory (a failure here changes no parameter), then point them
    // at what stands for them outside their block.
    const bool strict = options_.strict;
    for (size_t k = 0; k < b.params.size(); ++k) {
      Param& p = b.params[k];
      const c10::Device device = p.tensor.device();
      if (p.bytes == 0) {
        p.outside = empty_storage(device);
        p.reachable = true;
        continue;
      }
      p.host = pool_->allocate(p.bytes, options_.use_pin_memory, p.pinned);
      const c10::Storage storage = p.tensor.storage();
      CopyRequest r = copy_request(p, storage, false, CopyDirection::DeviceToHost);
      backend_.copy(r)->synchronize();
      // Pageable host memory is out of a GPU's reach; host-sim's device is the CPU.
      p.reachable = !strict && (backend_.kind() == BackendKind::HostSim || p.pinned);
      const std::string what = describe(p.name, index, k, p.tensor);
      p.outside =
          p.reachable
              ? host_storage(p.host.data(), p.bytes, device)
              : storage_that_throws(
                    device,
                    "offtune: frozen weight " + what +
                        " is offloaded by a LayerOffloader and has no data outside its block (" +
                        (strict ? std::string("LayerOffloadOptions::strict")
                                : std::string("its host copy is pageable memory, which the GPU "
                                              "cannot reach")) +
                        "): read or change it inside LayerOffloader::block(" +
                        std::to_string(index) + ")" +
                        (strict ? ", or turn strict off to reach its host copy"
                                : ", or let it use pinned memory (use_pin_memory)"));
      if (p.reachable) reachable.push_back(p.outside);
      b.bytes += p.bytes;
    }
    for (Param& p : b.params) {
      point_at(p.tensor, p.outside);
      registered_.emplace(p.tensor.unsafeGetTensorImpl(), index);
    }
    stats_.blocks += 1;
    stats_.parameters += static_cast<int64_t>(b.params.size());
    stats_.frozen_bytes += b.bytes;
    stats_.max_block_bytes = std::max(stats_.max_block_bytes, b.bytes);
    blocks_.push_back(std::move(b));
  }
  // Saved by a graph outside the blocks (an evaluation that does not enter them), a tensor on a
  // host copy is kept as it is: it is not device memory.
  for (const c10::Storage& s : reachable) never_offload_storage(*ctx_, s);
  return index;
}

void LayerState::issue_load(int64_t index, bool prefetch, Emit& out, Fresh& fresh) {
  Block& b = blocks_[static_cast<size_t>(index)];
  const Stream on = backend_.current_stream();
  const bool timed = observer() != nullptr;
  const int64_t issued = now_ns();
  // Allocate everything first: out of memory here leaves nothing issued and nothing loaded.
  std::vector<c10::Storage> device;
  device.reserve(b.params.size());
  for (const Param& p : b.params) {
    device.push_back(p.kept ? c10::Storage() : backend_.allocate_device(p.bytes, on));
  }
  FencePtr fence;
  size_t copied = 0;
  try {
    for (; copied < b.params.size(); ++copied) {
      const Param& p = b.params[copied];
      if (!p.kept && p.bytes > 0) fence = backend_.copy(copy_request(p, device[copied], timed));
    }
  } catch (...) {
    // The copies issued write blocks about to be freed: not reused before they ran.
    for (size_t k = 0; k < copied; ++k) {
      if (device[k]) backend_.record_stream(device[k], backend_.copy_stream());
    }
    throw;
  }
  for (size_t k = 0; k < b.params.size(); ++k) {
    Param& p = b.params[k];
    if (p.kept) continue;
    p.load_version = version_of(p.tensor);
    fresh.emplace_back(device[k], (index << kParamBits) | static_cast<int64_t>(k));
  }
  b.device = std::move(device);
  b.fence = std::move(fence);
  b.alloc_stream = on;
  b.ready_on.clear();
  b.consumers.clear();
  b.prefetched = prefetch;
  b.issued_ns = issued;
  b.reported = false;
  stats_.loads += 1;
  stats_.loaded_bytes += b.bytes;
  (prefetch ? stats_.prefetched : stats_.demand_loads) += 1;
  if (timed) {
    CopyEvent e;
    e.id = TensorId(index);
    e.direction = CopyDirection::HostToDevice;
    e.bytes = b.bytes;
    e.pinned =
        std::all_of(b.params.begin(), b.params.end(), [](const Param& p) { return p.pinned; });
    e.prefetch = prefetch;
    e.weights = true;
    e.time_ns = issued;
    out.issued.push_back(e);
  }
}

bool LayerState::try_prefetch(int64_t index, Emit& out, Fresh& fresh) {
  const Block& b = blocks_[static_cast<size_t>(index)];
  // As the activation engine's prefetch: only an optimisation, so never the allocation that
  // fails, nor one that takes memory from other prefetches or from compute.
  if (backend_.headroom() < b.bytes) {
    ++stats_.prefetch_skipped;
    return false;
  }
  NoReclaimScope no_reclaim;
  try {
    issue_load(index, /*prefetch=*/true, out, fresh);
  } catch (const c10::OutOfMemoryError&) {
    ++stats_.prefetch_skipped;
    return false;
  }
  return true;
}

void LayerState::refresh(Block& b) {
  for (size_t k = 0; k < b.params.size(); ++k) {
    Param& p = b.params[k];
    if (p.kept || p.attached || p.bytes == 0) continue;
    const uint32_t now = version_of(p.tensor);
    if (now == p.load_version) continue;
    // Changed on its host copy after this load's copy was issued: copy it again. The copy stream
    // runs it after the earlier copy, and after the current stream's work so far (the change).
    b.fence = backend_.copy(copy_request(p, b.device[k], false));
    b.ready_on.clear();
    p.load_version = now;
    stats_.refreshed += 1;
  }
}

void LayerState::check_frozen(const Block& b, int64_t index) const {
  for (size_t k = 0; k < b.params.size(); ++k) {
    const Param& p = b.params[k];
    if (p.kept || !p.tensor.requires_grad()) continue;
    throw std::logic_error(
        "layer offloader: " + describe(p.name, index, k, p.tensor) +
        " requires grad now; a registered weight must stay frozen: train it only after the "
        "LayerOffloader is destroyed (its weights come back to the device), or leave it out of "
        "add_block");
  }
}

void LayerState::attach(Block& b) {
  for (size_t k = 0; k < b.params.size(); ++k) {
    Param& p = b.params[k];
    if (p.kept) continue;
    if (!p.attached ||
        p.tensor.storage().unsafeGetStorageImpl() != b.device[k].unsafeGetStorageImpl()) {
      point_at(p.tensor, b.device[k]);
      p.attached = true;
      p.attach_version = version_of(p.tensor);
    }
  }
}

void LayerState::keep_saved_parameters(Block& b) {
  for (size_t k = 0; k < b.params.size(); ++k) {
    Param& p = b.params[k];
    if (p.kept || !p.attached) continue;
    const auto uses = static_cast<int64_t>(p.tensor.use_count()) - p.enter_uses;
    const auto storage_uses =
        static_cast<int64_t>(p.tensor.storage().use_count()) - p.enter_storage_uses;
    if (uses <= storage_uses) continue;
    // Saved as itself by a graph: its current device storage becomes its own for good. Its host
    // copy goes too, unless a tensor still uses it (a view taken outside the block): that one is
    // moved to the device when the offloader goes (restore_all).
    p.kept = true;
    if (p.outside.use_count() == 1) {
      p.outside = c10::Storage();
      p.host.reset();
    }
    b.bytes -= p.bytes;
    stats_.kept_on_device += 1;
    stats_.frozen_bytes -= p.bytes;
  }
}

void LayerState::unload(Block& b) {
  if (!b.loaded()) return;
  // Changed while on the device (inside the block, or outside it while the block stayed): the
  // host copy takes the change before the device copy goes. Waited for here, so that the host
  // copy is current for whatever reads it next (an op outside the block, the next load).
  for (size_t k = 0; k < b.params.size(); ++k) {
    Param& p = b.params[k];
    if (p.kept || !p.attached || p.bytes == 0 || version_of(p.tensor) == p.attach_version) {
      continue;
    }
    backend_.copy(copy_request(p, b.device[k], false, CopyDirection::DeviceToHost))->synchronize();
    stats_.device_to_host += 1;
  }
  // The blocks may be reused by the stream they were allocated on once we let go: not before the
  // copy that fills them ran (unless that stream waited for it), nor before every other stream
  // that was handed them (a block prefetched on one stream and run on another) is done with them.
  const bool copy_ordered = !b.fence || contains(b.ready_on, b.alloc_stream) || b.fence->query();
  for (const c10::Storage& s : b.device) {
    if (!s) continue;
    if (!copy_ordered) backend_.record_stream(s, backend_.copy_stream());
    for (const Stream& c : b.consumers) {
      if (c != b.alloc_stream) backend_.record_stream(s, c);
    }
  }
  for (Param& p : b.params) {
    if (p.kept || !p.attached) continue;
    point_at(p.tensor, p.outside);
    p.attached = false;
  }
  b.device.clear();
  b.ready_on.clear();
  b.consumers.clear();
}

void LayerState::report_completions(Emit& out) {
  const bool timed = observer() != nullptr;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = blocks_[i];
    if (b.reported || !b.fence || !b.fence->query()) continue;
    b.reported = true;
    if (!timed) continue;
    CopyEvent e;
    e.id = TensorId(static_cast<int64_t>(i));
    e.direction = CopyDirection::HostToDevice;
    e.bytes = b.bytes;
    e.prefetch = b.prefetched;
    e.weights = true;
    const int64_t done = b.fence->completed_ns();
    e.time_ns = done > 0 ? done : now_ns();
    e.issued_ns = b.issued_ns;
    out.completed.push_back(e);
  }
}

void LayerState::deliver(Emit& out) const {
  if (out.issued.empty() && out.completed.empty() && out.waits.empty()) return;
  const std::shared_ptr<Observer> o = observer();
  if (!o) return;
  try {
    for (const CopyEvent& e : out.issued) o->on_copy_issued(e);
    for (const WaitEvent& e : out.waits) o->on_wait(e);
    for (const CopyEvent& e : out.completed) o->on_copy_completed(e);
  } catch (const std::exception& ex) {
    TORCH_WARN("offtune: observer threw: ", ex.what());
  }
}

FencePtr LayerState::make_resident(int64_t index, bool backward, Stream on, Emit& out,
                                   Fresh& fresh) {
  Block& b = at(index);
  check_frozen(b, index);
  const auto next = upcoming(index, backward);
  // First let go of anything resident that is neither running nor coming next (a change of
  // direction, an aborted pass): its memory may be what this block's load needs.
  for (size_t j = 0; j < blocks_.size(); ++j) {
    Block& o = blocks_[j];
    const auto jj = static_cast<int64_t>(j);
    if (jj == index || o.entered > 0 || !o.loaded()) continue;
    if (std::find(next.begin(), next.end(), jj) == next.end()) unload(o);
  }
  if (!b.loaded()) {
    issue_load(index, /*prefetch=*/false, out, fresh);  // may throw: then nothing changed
  } else {
    refresh(b);
  }
  // The copies of what comes next, behind this block's on the copy stream, in schedule order: one
  // that does not fit stops the look-ahead (a later block must not take the memory first).
  for (int64_t j : next) {
    if (!blocks_[static_cast<size_t>(j)].loaded() && !try_prefetch(j, out, fresh)) break;
  }
  if (!contains(b.consumers, on)) b.consumers.push_back(on);
  if (!b.fence || contains(b.ready_on, on)) return nullptr;
  backend_.stream_wait(on, b.fence);
  b.ready_on.push_back(on);
  return b.fence;
}

void LayerState::register_fresh(const Fresh& fresh) {
  const std::weak_ptr<WeightSource> self = weak_from_this();
  for (const auto& [storage, key] : fresh) register_weight_storage(*ctx_, storage, self, key);
}

void LayerState::wait_for(int64_t index, Stream on, const FencePtr& fence, Emit& out) {
  if (!fence) return;
  const bool done = fence->query();
  const int64_t begin = now_ns();
  backend_.host_block_for(on, fence);
  if (!done) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.waits += 1;
    out.waits.push_back(WaitEvent{WaitKind::Weights, TensorId(index), begin, now_ns()});
  }
}

c10::Storage LayerState::acquire(int64_t key) {
  const int64_t index = key >> kParamBits;
  const auto k = static_cast<size_t>(key & ((int64_t{1} << kParamBits) - 1));
  const bool backward = current_graph_task_id() >= 0;
  const Stream on = backend_.current_stream();
  Emit out;
  Fresh fresh;
  FencePtr wait;
  c10::Storage storage;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Block& b = at(index);
    const Param& p = b.params.at(k);
    if (p.kept) return p.tensor.storage();  // on the device for good
    wait = make_resident(index, backward, on, out, fresh);
    storage = b.device[k];
  }
  register_fresh(fresh);
  fresh.clear();
  wait_for(index, on, wait, out);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    report_completions(out);
  }
  deliver(out);
  return storage;
}

void LayerState::enter(int64_t index) {
  const bool backward = current_graph_task_id() >= 0;
  const Stream on = backend_.current_stream();
  Emit out;
  Fresh fresh;
  FencePtr wait;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Block& b = at(index);
    wait = make_resident(index, backward, on, out, fresh);
    b.entered += 1;
    attach(b);
  }
  register_fresh(fresh);
  fresh.clear();
  {
    // After every temporary reference of this call is gone (see keep_saved_parameters).
    std::lock_guard<std::mutex> lock(mutex_);
    Block& b = at(index);
    if (b.entered == 1) {
      for (Param& p : b.params) {
        p.enter_uses = static_cast<int64_t>(p.tensor.use_count());
        p.enter_storage_uses = static_cast<int64_t>(p.tensor.storage().use_count());
      }
    }
  }
  wait_for(index, on, wait, out);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    report_completions(out);
  }
  deliver(out);
}

void LayerState::exit(int64_t index) {
  const bool backward = current_graph_task_id() >= 0;
  Emit out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Block& b = at(index);
    if (b.entered == 0) {
      throw std::logic_error("layer offloader: exit(" + std::to_string(index) + ") without enter");
    }
    if (--b.entered == 0) {
      keep_saved_parameters(b);
      const auto next = upcoming(index, backward);
      if (std::find(next.begin(), next.end(), index) == next.end()) unload(b);
    }
    report_completions(out);
  }
  deliver(out);
}

void LayerState::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Block& b : blocks_) {
    if (b.entered == 0) unload(b);
  }
}

void LayerState::move_to_device(Param& p, Stream on) {
  c10::Storage fresh = backend_.allocate_device(p.bytes, on);
  if (p.bytes > 0) backend_.copy(copy_request(p, fresh, false))->synchronize();
  // The storage itself takes the device memory (tensors on it follow), and `fresh` the host
  // pointer, which it does not own.
  detail::swap_storage_data(*p.outside.unsafeGetStorageImpl(), *fresh.unsafeGetStorageImpl());
}

void LayerState::restore_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  const Stream on = backend_.current_stream();
  for (Block& b : blocks_) unload(b);  // changes written back: the host copies are current
  bool failed = false;
  for (Block& b : blocks_) {
    for (Param& p : b.params) {
      if (p.bytes == 0) continue;
      try {
        if (p.kept) {
          if (p.outside) move_to_device(p, on);  // only a stray view still uses it
        } else if (p.reachable) {
          move_to_device(p, on);  // the parameter and every view taken outside the block
        } else {
          c10::Storage storage = backend_.allocate_device(p.bytes, on);
          backend_.copy(copy_request(p, storage, false))->synchronize();
          point_at(p.tensor, std::move(storage));
        }
      } catch (const std::exception& e) {
        // Left on its host copy (or without data): that memory must outlive every tensor on it.
        if (p.reachable && p.host) (void)new HostBlock(std::move(p.host));  // leaked on purpose
        if (!failed) {
          TORCH_WARN("offtune: layer offloader could not give frozen weights back to the device (",
                     e.what(), "); they stay in host memory");
        }
        failed = true;
      }
    }
    b.device.clear();
  }
  backend_.synchronize();  // the host blocks go back to the pool after this
}

}  // namespace detail

namespace {

OffloadOptions link_options(const LayerOffloadOptions& o) {
  OffloadOptions a;
  a.backend = o.backend;
  a.device_index = o.device_index;
  a.use_pin_memory = o.use_pin_memory;
  a.link = o.link;
  a.debug_copy_delay_ns = o.debug_copy_delay_ns;
  a.poison_freed = o.poison_freed;
  a.reuse_freed = o.reuse_freed;
  return a;
}

}  // namespace

LayerOffloader::LayerOffloader(LayerOffloadOptions options) {
  options.validate();
  auto own = std::make_unique<ActivationOffloader>(link_options(options));
  std::shared_ptr<detail::Context> ctx = own->ctx_;
  state_ = std::make_shared<detail::LayerState>(std::move(ctx), std::move(own), std::move(options));
}

LayerOffloader::LayerOffloader(ActivationOffloader& activations, LayerOffloadOptions options) {
  options.validate();
  state_ = std::make_shared<detail::LayerState>(activations.ctx_, nullptr, std::move(options));
}

LayerOffloader::~LayerOffloader() = default;

int64_t LayerOffloader::add_block(std::vector<at::Tensor> frozen, std::vector<std::string> names) {
  return state_->add_block(std::move(frozen), std::move(names));
}
void LayerOffloader::enter(int64_t block) { state_->enter(block); }
void LayerOffloader::exit(int64_t block) { state_->exit(block); }

LayerOffloader::Resident::~Resident() {
  if (owner_ == nullptr) return;
  try {
    owner_->exit(block_);
  } catch (const std::exception& e) {
    TORCH_WARN("offtune: layer offloader exit failed: ", e.what());
  }
}
LayerOffloader::Resident LayerOffloader::block(int64_t block) {
  enter(block);
  return Resident(this, block);
}

void LayerOffloader::release() { state_->release(); }
void LayerOffloader::synchronize() { state_->synchronize(); }
void LayerOffloader::set_observer(std::shared_ptr<Observer> observer) {
  if (state_->own() == nullptr) {
    throw std::logic_error(
        "layer offloader: it shares an activation offloader's observer; set that one");
  }
  state_->own()->set_observer(std::move(observer));
}
bool LayerOffloader::uses_link_of(const ActivationOffloader* activations) const {
  if (state_->own() != nullptr) return activations == nullptr;
  return activations != nullptr && activations->ctx_.get() == &state_->context();
}
const LayerOffloadOptions& LayerOffloader::options() const { return state_->options(); }
BackendKind LayerOffloader::backend() const { return state_->backend().kind(); }
int64_t LayerOffloader::blocks() const { return state_->blocks(); }
LayerOffloadStats LayerOffloader::stats() const { return state_->stats(); }
int64_t LayerOffloader::resident_blocks() const { return state_->resident_blocks(); }
DeviceMemory LayerOffloader::device_memory() const { return state_->backend().memory(); }
void LayerOffloader::reset_peak_device_memory() { state_->backend().reset_peak(); }

}  // namespace offtune
