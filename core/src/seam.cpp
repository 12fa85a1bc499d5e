// Why this seam exists: libtorch has no public C++ API for default saved-tensor hooks. Python's
// `torch.autograd.graph.saved_tensors_hooks` works because every SavedVariable asks
// `Engine::get_default_engine().get_default_saved_variable_hooks()` for a hooks object, and the
// Python engine (a subclass) answers from its hook stack. We do the same from C++: subclass
// torch::autograd::Engine, answer that virtual from offtune's per-thread frame stack, and install
// the subclass with set_default_engine_stub. These are internal APIs, so they are confined to this
// file and checked against the pinned torch (tests/test_seam.cpp; static_asserts below).
//
// Backward runs partly on autograd's own threads (one per CUDA device; checkpoint recompute and
// create_graph backwards save tensors there). Python carries its hooks to those threads in the
// graph task's thread-local state; a C++ frame stack cannot ride along, so the engine subclass also
// overrides execute_with_graph_task: it binds each graph task to the offloader that should receive
// the tensors saved during it, and tells the offloaders that took part when it ends (successfully
// or not). See note_unpack_in_backward.
//
// In a Python process none of this is installed (ensure_engine_installed refuses): Python's engine
// carries the hooks (external_hooks.hpp), and the only thing the seam adds there is the
// end-of-backward cleanup, registered as one of that engine's final callbacks
// (note_unpack_in_backward).
//
// The other half of the seam, ATen's op observer (record-function callbacks), is in seam_ops.cpp.
//
// Verified on torch 2.15.0 (the pinned version).
#include "seam.hpp"

#include <ATen/SequenceNumber.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/graph_task.h>
// Node moved from function.h to node.h in torch 2.12; the GPU machines' 2.11 has only function.h.
#if __has_include(<torch/csrc/autograd/node.h>)
#include <torch/csrc/autograd/node.h>
#else
#include <torch/csrc/autograd/function.h>
#endif
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "host_sim_internal.hpp"
#include "offtune/offloader.hpp"
#include "offtune/options.hpp"

namespace offtune::detail {
namespace {

namespace ag = torch::autograd;

// The virtuals we override must keep these exact signatures; fail the build loudly if a torch
// upgrade changes them instead of silently never being called.
static_assert(std::is_same_v<decltype(&ag::Engine::get_default_saved_variable_hooks),
                             std::unique_ptr<ag::SavedVariableHooks> (ag::Engine::*)()>,
              "torch changed Engine::get_default_saved_variable_hooks; update offtune's seam");
// The graph root's pointer type: c10::intrusive_ptr<Node> from torch 2.12 on (the pinned 2.15),
// std::shared_ptr<Node> before (the GPU machines' 2.11); either is taken, nothing else.
template <typename F>
struct SecondParameter;
template <typename R, typename C, typename A, typename B, typename D>
struct SecondParameter<R (C::*)(A, B, D)> {
  using type = B;
};
using GraphRoot = SecondParameter<decltype(&ag::Engine::execute_with_graph_task)>::type;
static_assert(std::is_same_v<GraphRoot, c10::intrusive_ptr<ag::Node>> ||
                  std::is_same_v<GraphRoot, std::shared_ptr<ag::Node>>,
              "torch changed the graph root of Engine::execute_with_graph_task; update the seam");
static_assert(
    std::is_same_v<decltype(&ag::Engine::execute_with_graph_task),
                   c10::intrusive_ptr<at::ivalue::Future> (ag::Engine::*)(
                       const std::shared_ptr<ag::GraphTask>&, GraphRoot, ag::InputBuffer&&)>,
    "torch changed Engine::execute_with_graph_task; update offtune's seam");

static_assert(
    std::is_same_v<decltype(&ag::Engine::execute),
                   ag::variable_list (ag::Engine::*)(const ag::edge_list&, const ag::variable_list&,
                                                     bool, bool, bool, const ag::edge_list&)>,
    "torch changed Engine::execute; update offtune's seam");

struct Frame {
  Context* ctx = nullptr;
  uint64_t generation = 0;
  uint64_t token = 0;
  std::optional<HookFloor> floor;  // a HookFloorScope: its floor hook, no offloader
  HookSource* source = nullptr;    // a checkpoint's region or recompute
};
thread_local std::vector<Frame> t_frames;
thread_local uint64_t t_next_token = 1;

// A frame lives on the thread that pushed it, but a movable OffloadScope may end on another thread
// (moved into a lambda, a future, a pool's task). Its frame must still leave the stack it is on:
// left there, its thread would go on offloading into a context that may be gone by then. So a
// token names its thread (high 32 bits: the thread's index, low: its own count), and a pop from
// another thread is posted to the owner's mailbox; the owner drains it before it next reads its
// stack (one thread-local flag on the hooks' path). A pop for a thread that has ended is dropped:
// its frames ended with it.
struct Mailbox {
  std::mutex mutex;
  std::vector<uint64_t> tokens;
  std::atomic<bool>* posted = nullptr;  // the owner's t_posted; null once the owner ended
};
thread_local std::atomic<bool> t_posted{false};
std::mutex g_mailboxes_mutex;
std::unordered_map<uint32_t, std::weak_ptr<Mailbox>>& mailboxes() {
  static auto* map = new std::unordered_map<uint32_t, std::weak_ptr<Mailbox>>();  // leaked
  return *map;
}
// This thread's index (assigned at its first frame) and mailbox; unregistered when it ends.
struct ThreadFrames {
  uint32_t index = 0;
  std::shared_ptr<Mailbox> mailbox;
  uint32_t ensure() {
    if (index != 0) return index;
    static std::atomic<uint32_t> next{1};
    index = next.fetch_add(1);
    mailbox = std::make_shared<Mailbox>();
    mailbox->posted = &t_posted;
    std::lock_guard<std::mutex> lock(g_mailboxes_mutex);
    mailboxes()[index] = mailbox;
    return index;
  }
  ~ThreadFrames() {
    if (!mailbox) return;
    {
      std::lock_guard<std::mutex> lock(mailbox->mutex);
      mailbox->posted = nullptr;
    }
    std::lock_guard<std::mutex> lock(g_mailboxes_mutex);
    mailboxes().erase(index);
  }
};
thread_local ThreadFrames t_thread;

void erase_frame(uint64_t token) {
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it) {
    if (it->token == token) {
      t_frames.erase(std::next(it).base());
      return;
    }
  }
}

[[gnu::noinline]] void drain_posted_pops() {
  std::vector<uint64_t> tokens;
  {
    std::lock_guard<std::mutex> lock(t_thread.mailbox->mutex);
    tokens.swap(t_thread.mailbox->tokens);
    t_posted.store(false, std::memory_order_relaxed);
  }
  for (const uint64_t token : tokens) erase_frame(token);
}

// This thread's frames, after the pops other threads posted for it.
OFFTUNE_HOT inline std::vector<Frame>& frames() {
  if (t_posted.load(std::memory_order_acquire)) [[unlikely]] {
    drain_posted_pops();
  }
  return t_frames;
}

uint64_t new_token() {
  return (static_cast<uint64_t>(t_thread.ensure()) << 32) | (t_next_token++ & 0xFFFFFFFFu);
}

// ---- graph tasks -------------------------------------------------------------------------------

// Who receives the tensors a backward saves on autograd's threads, and who takes part in it.
struct Binding {
  enum class State : uint8_t { Unresolved, Saver, None } state = State::Unresolved;
  std::weak_ptr<Context> saver;
  uint64_t generation = 0;
  std::vector<std::weak_ptr<Context>> participants;
  std::vector<std::weak_ptr<TaskListener>> listeners;
};

std::mutex g_tasks_mutex;
std::unordered_map<int64_t, Binding>& tasks() {
  static auto* map = new std::unordered_map<int64_t, Binding>();  // leaked: autograd threads
  return *map;
}

void bind_task(int64_t id) {
  Binding b;
  if (const auto& stack = frames(); !stack.empty()) {
    // backward() called inside a scope (or a no-offload region): that one, as Python would.
    const Frame& f = stack.back();
    if (f.ctx == nullptr) {
      b.state = Binding::State::None;
    } else {
      b.state = Binding::State::Saver;
      b.saver = weak_of(*f.ctx);
      b.generation = new_generation(*f.ctx);
    }
  }
  std::lock_guard<std::mutex> lock(g_tasks_mutex);
  if (b.state == Binding::State::Unresolved) {
    // A backward started inside another one (reentrant checkpointing): the outer one's offloader.
    const int parent = ag::get_current_graph_task_id();
    if (auto it = tasks().find(parent); parent >= 0 && it != tasks().end()) {
      b.state = it->second.state;
      b.saver = it->second.saver;
      b.generation = it->second.generation;
    }
  }
  tasks()[id] = std::move(b);
}

// Graph tasks whose end_of_backward calls are running: a second finish_task of the same task (see
// OfftuneEngine::execute) waits for them instead of returning early.
std::condition_variable g_tasks_done;
std::unordered_set<int64_t>& finishing() {
  static auto* set = new std::unordered_set<int64_t>();  // leaked, as tasks()
  return *set;
}

void finish_task(int64_t id) {
  Binding b;
  {
    std::unique_lock<std::mutex> lock(g_tasks_mutex);
    auto it = tasks().find(id);
    if (it == tasks().end()) {
      g_tasks_done.wait(lock, [&] { return finishing().count(id) == 0; });
      return;
    }
    b = std::move(it->second);
    tasks().erase(it);
    finishing().insert(id);
  }
  for (const auto& weak : b.participants) {
    if (auto ctx = weak.lock()) end_of_backward(*ctx, static_cast<int>(id));
  }
  for (const auto& weak : b.listeners) {
    if (auto listener = weak.lock()) listener->end_of_task(static_cast<int>(id));
  }
  {
    std::lock_guard<std::mutex> lock(g_tasks_mutex);
    finishing().erase(id);
  }
  g_tasks_done.notify_all();
}

// The graph task that the innermost OfftuneEngine::execute on this thread started (-1 until
// execute_with_graph_task has bound it).
thread_local int64_t* t_execute_task = nullptr;

// HookFloorScope's hook: keeps the tensor (detached where keeping it could close a reference cycle,
// as offtune's kept path does) and hands it back.
class FloorHooks final : public ag::SavedVariableHooks {
 public:
  void call_pack_hook(const at::Tensor& t) override {
    tensor_ = may_be_saved_by_its_own_node(t) ? t.detach() : t;
  }
  at::Tensor call_unpack_hook() override { return tensor_; }

 private:
  at::Tensor tensor_;
};

// HookFloor::Copy's hook: the tensor's bytes go to a host buffer at pack and come back into a new
// tensor on its device at unpack, synchronously on this thread. On a CPU tensor (host-sim's device)
// the buffer is plain heap memory and the copies are memcpy; elsewhere they are ATen copies.
class CopyFloorHooks final : public ag::SavedVariableHooks {
 public:
  void call_pack_hook(const at::Tensor& t) override {
    if (!t.defined() || !t.has_storage() || t.layout() != at::kStrided || !t.is_contiguous() ||
        t.numel() == 0) {
      kept_ = may_be_saved_by_its_own_node(t) ? t.detach() : t;
      return;
    }
    options_ = t.options();
    sizes_.assign(t.sizes().begin(), t.sizes().end());
    moved_ = true;
    if (t.is_cpu()) {
      bytes_ = t.nbytes();
      host_bytes_ = std::make_unique_for_overwrite<std::byte[]>(bytes_);
      std::memcpy(host_bytes_.get(), t.const_data_ptr(), bytes_);
    } else {
      host_tensor_ = t.to(at::kCPU);
    }
  }
  at::Tensor call_unpack_hook() override {
    if (!moved_) return kept_;
    if (host_bytes_) {
      at::Tensor out = at::empty(sizes_, options_);
      std::memcpy(out.mutable_data_ptr(), host_bytes_.get(), bytes_);
      return out;
    }
    return host_tensor_.to(options_.device());
  }

 private:
  bool moved_ = false;  // else kept_
  at::Tensor kept_;
  at::TensorOptions options_;
  c10::SmallVector<int64_t, 5> sizes_;
  size_t bytes_ = 0;
  std::unique_ptr<std::byte[]> host_bytes_;
  at::Tensor host_tensor_;
};

class OfftuneEngine final : public ag::Engine {
 public:
  OfftuneEngine() = default;
  // Engine's contract: a subclass stops the worker threads before its own members go away.
  ~OfftuneEngine() override { stop(); }

  OFFTUNE_HOT std::unique_ptr<ag::SavedVariableHooks> get_default_saved_variable_hooks() override {
    // Hot path for every saved tensor in the process: one thread-local read when offtune is idle.
    if (const auto& stack = frames(); !stack.empty()) {
      const Frame& f = stack.back();
      if (f.ctx != nullptr) return make_slot(*f.ctx, f.generation);
      if (f.source != nullptr) return f.source->make_hooks();
      if (f.floor == HookFloor::NoOp) return std::make_unique<FloorHooks>();
      return f.floor == HookFloor::Copy ? std::make_unique<CopyFloorHooks>() : nullptr;
    }
    const int task = ag::get_current_graph_task_id();
    if (task < 0) return nullptr;
    std::shared_ptr<Context> ctx;
    uint64_t generation = 0;
    {
      std::lock_guard<std::mutex> lock(g_tasks_mutex);
      auto it = tasks().find(task);
      if (it == tasks().end() || it->second.state != Binding::State::Saver) return nullptr;
      ctx = it->second.saver.lock();
      generation = it->second.generation;
    }
    return ctx ? make_slot(*ctx, generation) : nullptr;
  }

  // backward() and grad() come here. The graph task's end (finish_task) is run here too, before
  // they return or throw: the future's callback below runs it on the thread that completed the
  // task, and with CUDA that is an autograd device thread, after the future's waiters (this
  // thread) were woken: backward() returned before the offloaders had given back what the
  // backward brought in. Whichever of the two comes second waits for the first.
  ag::variable_list execute(const ag::edge_list& roots, const ag::variable_list& inputs,
                            bool keep_graph, bool create_graph, bool accumulate_grad,
                            const ag::edge_list& outputs) override {
    int64_t task = -1;
    struct Finish {
      int64_t* outer;
      int64_t& task;
      ~Finish() {
        t_execute_task = outer;
        if (task < 0) return;
        try {
          finish_task(task);
        } catch (const std::exception& e) {
          TORCH_WARN("offtune: cleanup at the end of a backward failed: ", e.what());
        }
      }
    } finish{std::exchange(t_execute_task, &task), task};
    return ag::Engine::execute(roots, inputs, keep_graph, create_graph, accumulate_grad, outputs);
  }

  c10::intrusive_ptr<at::ivalue::Future> execute_with_graph_task(
      const std::shared_ptr<ag::GraphTask>& graph_task, GraphRoot graph_root,
      ag::InputBuffer&& input_buffer) override {
    const auto id = static_cast<int64_t>(static_cast<int>(graph_task->id_));
    bind_task(id);
    if (t_execute_task != nullptr && *t_execute_task < 0) *t_execute_task = id;
    c10::intrusive_ptr<at::ivalue::Future> future;
    try {
      future = ag::Engine::execute_with_graph_task(graph_task, std::move(graph_root),
                                                   std::move(input_buffer));
    } catch (...) {
      finish_task(id);
      throw;
    }
    // Runs once the task is done, with an error too; inline if it already is (a CPU backward).
    future->addCallback([id](at::ivalue::Future&) { finish_task(id); });
    return future;
  }
};

ag::Engine& offtune_engine() {
  // Leaked on purpose: autograd worker threads may outlive static destruction.
  static auto* engine = new OfftuneEngine();
  return *engine;
}

// ---- backwards run by another engine ------------------------------------------------------------

// (task, offloader) pairs whose cleanup is queued on a foreign backward. Entries of a backward
// that failed (its final callbacks never run) would stay: the oldest go past a bound, as task ids
// only grow and such an old backward is over.
std::mutex g_foreign_mutex;
std::set<std::pair<int, const Context*>>& foreign_tasks() {
  static auto* set = new std::set<std::pair<int, const Context*>>();  // leaked, as tasks()
  return *set;
}
constexpr size_t kMaxForeignTasks = 4096;

// Registers `ctx`'s end_of_backward as a final callback of the backward running on this thread
// (Engine::queue_callback adds it to the current graph task, whichever engine runs it): it runs
// after the last node, before backward() returns, when the backward succeeds.
void end_of_foreign_backward_with(Context& ctx, int task) {
  {
    std::lock_guard<std::mutex> lock(g_foreign_mutex);
    auto& set = foreign_tasks();
    if (!set.emplace(task, &ctx).second) return;
    while (set.size() > kMaxForeignTasks) set.erase(set.begin());
  }
  ag::Engine::get_default_engine().queue_callback([task, key = &ctx, weak = weak_of(ctx)] {
    {
      std::lock_guard<std::mutex> lock(g_foreign_mutex);
      foreign_tasks().erase({task, key});
    }
    if (auto alive = weak.lock()) end_of_backward(*alive, task);
  });
}

}  // namespace

std::unique_ptr<ag::SavedVariableHooks> make_floor_hooks(HookFloor kind) {
  if (kind == HookFloor::Copy) return std::make_unique<CopyFloorHooks>();
  return std::make_unique<FloorHooks>();
}

OFFTUNE_HOT at::Tensor SavedTensorSlot::call_unpack_hook() {
  at::Tensor t = unpack();
  sim::check_handout(t);
  return t;
}

void ensure_engine_installed() {
  static std::once_flag once;
  static bool foreign = false;
  std::call_once(once, [] {
    ag::Engine& current = ag::Engine::get_default_engine();
    if (&current != &ag::Engine::get_base_engine() && &current != &offtune_engine()) {
      foreign = true;
      return;
    }
    ag::set_default_engine_stub(&offtune_engine);
  });
  if (foreign) {
    throw EngineError(
        "offtune: another autograd engine is the default (torch loaded from Python?); offtune's "
        "C++ hooks cannot be installed there. Use torch's saved_tensors_hooks from Python "
        "instead.");
  }
}

uint64_t push_frame(Context* ctx, uint64_t generation) {
  const uint64_t token = new_token();
  auto& stack = frames();
  // A no-offload region inside a checkpointed region's forward or recompute keeps the region's
  // source: what its ops save is still recomputed rather than kept (and is never offloaded there
  // anyway). Without it the region's ops would silently keep their saved tensors.
  HookSource* source = ctx == nullptr && !stack.empty() ? stack.back().source : nullptr;
  stack.push_back({ctx, generation, token, std::nullopt, source});
  return token;
}

uint64_t push_floor_frame(HookFloor kind) {
  const uint64_t token = new_token();
  frames().push_back({nullptr, 0, token, kind});
  return token;
}

uint64_t push_source_frame(HookSource* source) {
  const uint64_t token = new_token();
  frames().push_back({nullptr, 0, token, std::nullopt, source});
  return token;
}

void pop_frame(uint64_t token) {
  const auto owner = static_cast<uint32_t>(token >> 32);
  if (owner == t_thread.index) {
    erase_frame(token);
    return;
  }
  std::shared_ptr<Mailbox> mailbox;
  {
    std::lock_guard<std::mutex> lock(g_mailboxes_mutex);
    if (auto it = mailboxes().find(owner); it != mailboxes().end()) mailbox = it->second.lock();
  }
  if (!mailbox) return;  // the owner ended, and its frames with it
  std::lock_guard<std::mutex> lock(mailbox->mutex);
  if (mailbox->posted == nullptr) return;
  mailbox->tokens.push_back(token);
  mailbox->posted->store(true, std::memory_order_release);
}

HookSource* top_source() {
  const auto& stack = frames();
  return stack.empty() ? nullptr : stack.back().source;
}

Context* top_frame() {
  const auto& stack = frames();
  return stack.empty() ? nullptr : stack.back().ctx;
}

OffloadTarget top_target() {
  const auto& stack = frames();
  if (stack.empty()) return {};
  return {stack.back().ctx, stack.back().generation};
}

OFFTUNE_HOT bool may_be_saved_by_its_own_node(const at::Tensor& t) {
  // A node takes its sequence number when it is constructed, before the op saves anything: the
  // node saving an output it produced is the newest on this thread (CopySlices, made after it for
  // an in-place op on a view, is newer still and is caught too).
  const ag::Node* fn = ag::impl::grad_fn_unsafe(t);
  return fn != nullptr && fn->sequence_nr() + 1 >= at::sequence_number::peek();
}

int current_graph_task_id() { return ag::get_current_graph_task_id(); }

bool listen_to_current_task(std::weak_ptr<TaskListener> listener) {
  const int task = ag::get_current_graph_task_id();
  if (task < 0) return false;
  std::lock_guard<std::mutex> lock(g_tasks_mutex);
  auto it = tasks().find(task);
  if (it == tasks().end()) return false;
  it->second.listeners.push_back(std::move(listener));
  return true;
}

OFFTUNE_HOT void note_unpack_in_backward(Context& ctx) {
  const int task = ag::get_current_graph_task_id();
  if (task < 0) return;
  // Once per (task, offloader) and thread: unpacks come in runs.
  thread_local int last_task = -1;
  thread_local const Context* last_ctx = nullptr;
  if (task == last_task && &ctx == last_ctx) return;
  std::unique_lock<std::mutex> lock(g_tasks_mutex);
  auto it = tasks().find(task);
  last_task = task;
  last_ctx = &ctx;
  if (it == tasks().end()) {
    // Not started through offtune's engine: another engine (Python's) runs this backward.
    lock.unlock();
    end_of_foreign_backward_with(ctx, task);
    return;
  }
  Binding& b = it->second;
  const bool known = std::any_of(b.participants.begin(), b.participants.end(),
                                 [&](const std::weak_ptr<Context>& w) {
                                   auto p = w.lock();
                                   return p.get() == &ctx;
                                 });
  if (!known) b.participants.push_back(weak_of(ctx));
  if (b.state == Binding::State::Unresolved) {
    // The graph's own offloader: the work autograd does for a graph saved under it goes there too.
    b.state = Binding::State::Saver;
    b.saver = weak_of(ctx);
    b.generation = new_generation(ctx);
  }
}

c10::Storage storage_that_throws(c10::Device device, std::string message) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, c10::DataPtr(nullptr, device),
                       /*allocator=*/nullptr, /*resizable=*/false);
  // Despite its name it releases nothing (the storage has no data): it sets the flag that makes
  // data() and mutable_data() throw, and the message they throw with.
  storage.unsafeGetStorageImpl()->release_data_and_set_meta_custom_data_ptr_error_msg_(
      std::move(message));
  return storage;
}

void swap_storage_data(c10::StorageImpl& a, c10::StorageImpl& b) {
  const size_t a_bytes = a.nbytes();
  const size_t b_bytes = b.nbytes();
  c10::DataPtr from_a = a.set_data_ptr(c10::DataPtr(nullptr, a.device()));
  c10::DataPtr from_b = b.set_data_ptr(std::move(from_a));
  a.set_data_ptr_noswap(std::move(from_b));
  a.set_nbytes(b_bytes);
  b.set_nbytes(a_bytes);
}

}  // namespace offtune::detail
