// The engine's scope stack (context.hpp): the per-thread frames that OffloadScope, NoOffloadRegion,
// HookFloorScope and checkpointed regions push, and the binding of each backward to the offloader
// that receives the tensors it saves. offtune's autograd Engine (seam.cpp) asks it, through the
// seam's AutogradClient, for the hooks of every saved tensor and tells it when a backward starts
// and ends; the frames decide which offloader, floor hook or checkpoint source answers.
//
// Why the bindings: backward runs partly on autograd's own threads (one per CUDA device;
// checkpoint recompute and create_graph backwards save tensors there), where this thread-local
// stack is empty. Each graph task is bound when it starts to the offloader that should receive
// the tensors saved during it (the innermost scope of the thread that called backward(), or the
// graph's own offloader at its first unpack: note_unpack_in_backward), and the offloaders that
// took part hear its end, successfully or not.
#include "context.hpp"

#include <ATen/ops/empty.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "offtune/offloader.hpp"
#include "seam.hpp"

namespace offtune::detail {
namespace {

namespace ag = torch::autograd;

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
    const int parent = current_graph_task_id();
    if (auto it = tasks().find(parent); parent >= 0 && it != tasks().end()) {
      b.state = it->second.state;
      b.saver = it->second.saver;
      b.generation = it->second.generation;
    }
  }
  tasks()[id] = std::move(b);
}

// Graph tasks whose end_of_backward calls are running: a second finish_task of the same task (see
// AutogradClient::task_finished) waits for them instead of returning early.
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

// What offtune's autograd Engine asks (seam.hpp): the frames above, and the bindings.
class ScopeStack final : public AutogradClient {
 public:
  OFFTUNE_HOT std::unique_ptr<ag::SavedVariableHooks> saved_variable_hooks() override {
    // Hot path for every saved tensor in the process: one thread-local read when offtune is idle.
    if (const auto& stack = frames(); !stack.empty()) {
      const Frame& f = stack.back();
      if (f.ctx != nullptr) return make_slot(*f.ctx, f.generation);
      if (f.source != nullptr) return f.source->make_hooks();
      if (f.floor == HookFloor::NoOp) return std::make_unique<FloorHooks>();
      return f.floor == HookFloor::Copy ? std::make_unique<CopyFloorHooks>() : nullptr;
    }
    const int task = current_graph_task_id();
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

  void task_started(int64_t task) override { bind_task(task); }
  void task_finished(int64_t task) override { finish_task(task); }
};

ScopeStack& scope_stack() {
  static ScopeStack stack;  // no state of its own, trivially destroyed
  return stack;
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
// (queue_final_callback adds it to the current graph task, whichever engine runs it): it runs
// after the last node, before backward() returns, when the backward succeeds.
void end_of_foreign_backward_with(Context& ctx, int task) {
  {
    std::lock_guard<std::mutex> lock(g_foreign_mutex);
    auto& set = foreign_tasks();
    if (!set.emplace(task, &ctx).second) return;
    while (set.size() > kMaxForeignTasks) set.erase(set.begin());
  }
  queue_final_callback([task, key = &ctx, weak = weak_of(ctx)] {
    {
      std::lock_guard<std::mutex> lock(g_foreign_mutex);
      foreign_tasks().erase({task, key});
    }
    if (auto alive = weak.lock()) end_of_backward(*alive, task);
  });
}

}  // namespace

void ensure_engine_installed() { install_engine(scope_stack()); }

std::unique_ptr<ag::SavedVariableHooks> make_floor_hooks(HookFloor kind) {
  if (kind == HookFloor::Copy) return std::make_unique<CopyFloorHooks>();
  return std::make_unique<FloorHooks>();
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

bool listen_to_current_task(std::weak_ptr<TaskListener> listener) {
  const int task = current_graph_task_id();
  if (task < 0) return false;
  std::lock_guard<std::mutex> lock(g_tasks_mutex);
  auto it = tasks().find(task);
  if (it == tasks().end()) return false;
  it->second.listeners.push_back(std::move(listener));
  return true;
}

OFFTUNE_HOT void note_unpack_in_backward(Context& ctx) {
  const int task = current_graph_task_id();
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

}  // namespace offtune::detail
