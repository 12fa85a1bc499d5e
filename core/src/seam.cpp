// Why this seam exists: libtorch has no public C++ API for default saved-tensor hooks. Python's
// `torch.autograd.graph.saved_tensors_hooks` works because every SavedVariable asks
// `Engine::get_default_engine().get_default_saved_variable_hooks()` for a hooks object, and the
// Python engine (a subclass) answers from its hook stack. We do the same from C++: subclass
// torch::autograd::Engine, answer that virtual from offtune's per-thread scope stack (through
// AutogradClient: context.cpp), and install the subclass with set_default_engine_stub. These are
// internal APIs, so they are confined to this file and checked against the pinned torch
// (tests/test_seam.cpp; static_asserts below).
//
// Backward runs partly on autograd's own threads (one per CUDA device; checkpoint recompute and
// create_graph backwards save tensors there). Python carries its hooks to those threads in the
// graph task's thread-local state; a C++ scope stack cannot ride along, so the engine subclass also
// overrides execute_with_graph_task: it tells the client when each graph task starts, so that the
// client can bind it to the offloader that should receive the tensors saved during it, and when it
// ends (successfully or not).
//
// In a Python process none of this is installed (install_engine refuses): Python's engine carries
// the hooks (external_hooks.hpp), and the only thing the seam adds there is queue_final_callback,
// through which the engine registers its end-of-backward cleanup as one of that engine's final
// callbacks (context.cpp's note_unpack_in_backward).
//
// The other half of the seam, ATen's op observer (record-function callbacks), is in seam_ops.cpp.
//
// Verified on torch 2.15.0 (the pinned version).
#include "seam.hpp"

#include <ATen/SequenceNumber.h>
#include <ATen/core/ivalue.h>
#include <c10/core/AllocatorConfig.h>
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

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

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

// The graph task that the innermost OfftuneEngine::execute on this thread started (-1 until
// execute_with_graph_task has started it).
thread_local int64_t* t_execute_task = nullptr;

class OfftuneEngine final : public ag::Engine {
 public:
  explicit OfftuneEngine(AutogradClient& client) : client_(client) {}
  // Engine's contract: a subclass stops the worker threads before its own members go away.
  ~OfftuneEngine() override { stop(); }

  OFFTUNE_HOT std::unique_ptr<ag::SavedVariableHooks> get_default_saved_variable_hooks() override {
    // Hot path for every saved tensor in the process.
    return client_.saved_variable_hooks();
  }

  // backward() and grad() come here. The graph task's end (task_finished) is told here too, before
  // they return or throw: the future's callback below tells it on the thread that completed the
  // task, and with CUDA that is an autograd device thread, after the future's waiters (this
  // thread) were woken: backward() returned before the offloaders had given back what the
  // backward brought in. Whichever of the two comes second waits for the first (the client's
  // contract).
  ag::variable_list execute(const ag::edge_list& roots, const ag::variable_list& inputs,
                            bool keep_graph, bool create_graph, bool accumulate_grad,
                            const ag::edge_list& outputs) override {
    int64_t task = -1;
    struct Finish {
      AutogradClient& client;
      int64_t* outer;
      int64_t& task;
      ~Finish() {
        t_execute_task = outer;
        if (task < 0) return;
        try {
          client.task_finished(task);
        } catch (const std::exception& e) {
          TORCH_WARN("offtune: cleanup at the end of a backward failed: ", e.what());
        }
      }
    } finish{client_, std::exchange(t_execute_task, &task), task};
    return ag::Engine::execute(roots, inputs, keep_graph, create_graph, accumulate_grad, outputs);
  }

  c10::intrusive_ptr<at::ivalue::Future> execute_with_graph_task(
      const std::shared_ptr<ag::GraphTask>& graph_task, GraphRoot graph_root,
      ag::InputBuffer&& input_buffer) override {
    const auto id = static_cast<int64_t>(static_cast<int>(graph_task->id_));
    client_.task_started(id);
    if (t_execute_task != nullptr && *t_execute_task < 0) *t_execute_task = id;
    c10::intrusive_ptr<at::ivalue::Future> future;
    try {
      future = ag::Engine::execute_with_graph_task(graph_task, std::move(graph_root),
                                                   std::move(input_buffer));
    } catch (...) {
      client_.task_finished(id);
      throw;
    }
    // Runs once the task is done, with an error too; inline if it already is (a CPU backward).
    future->addCallback(
        [client = &client_, id](at::ivalue::Future&) { client->task_finished(id); });
    return future;
  }

 private:
  AutogradClient& client_;
};

// Leaked on purpose: autograd worker threads may outlive static destruction. Set once, by
// install_engine, before the stub that hands it out is installed.
std::atomic<OfftuneEngine*> g_engine{nullptr};
ag::Engine& offtune_engine() { return *g_engine.load(std::memory_order_acquire); }

}  // namespace

void install_engine(AutogradClient& client) {
  static std::once_flag once;
  static bool foreign = false;
  std::call_once(once, [&client] {
    ag::Engine& current = ag::Engine::get_default_engine();
    // Nothing but install_engine makes offtune's engine: before this call, only torch's own base
    // engine may be the default.
    if (&current != &ag::Engine::get_base_engine()) {
      foreign = true;
      return;
    }
    g_engine.store(new OfftuneEngine(client), std::memory_order_release);
    ag::set_default_engine_stub(&offtune_engine);
  });
  if (foreign) {
    throw EngineError(
        "offtune: another autograd engine is the default (torch loaded from Python?); offtune's "
        "C++ hooks cannot be installed there. Use torch's saved_tensors_hooks from Python "
        "instead.");
  }
}

OFFTUNE_HOT bool may_be_saved_by_its_own_node(const at::Tensor& t) {
  // A node takes its sequence number when it is constructed, before the op saves anything: the
  // node saving an output it produced is the newest on this thread (CopySlices, made after it for
  // an in-place op on a view, is newer still and is caught too).
  const ag::Node* fn = ag::impl::grad_fn_unsafe(t);
  return fn != nullptr && fn->sequence_nr() + 1 >= at::sequence_number::peek();
}

int current_graph_task_id() { return ag::get_current_graph_task_id(); }

void queue_final_callback(std::function<void()> callback) {
  ag::Engine::get_default_engine().queue_callback(std::move(callback));
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

bool set_expandable_segments(bool on) {
  using Config = c10::CachingAllocator::AcceleratorAllocatorConfig;
  const bool before = Config::use_expandable_segments();
  if (before != on) {
    c10::CachingAllocator::setAllocatorSettings(on ? "expandable_segments:True"
                                                   : "expandable_segments:False");
  }
  return before;
}

}  // namespace offtune::detail
