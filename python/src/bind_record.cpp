// The recorder, bound: a LiveRun (profiler/live_run.hpp) over an SQLite store, for offtune.record
// and the Hugging Face callback (python/offtune/record.py, callback.py). The store, the run's rows,
// the step figures and the sweep point are the profiler's; this file turns Python's description of
// the run into a LiveRunSpec and the profiler's errors into Python's:
//   a file that is not an offtune store (another program's SQLite file, a text file, a newer
//   schema, corruption): ValueError, the file untouched;
//   a store that cannot be opened or written (a missing or unwritable directory, a full disk, a
//   lock held too long): OSError;
//   a bad device model, backend or collector: ValueError; a step call out of order: RuntimeError
// (offtune.InputError and offtune.EngineFault: module.cpp translates every kind).
#include <torch/csrc/utils/pybind.h>
#include <torch/cuda.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "offtune/checkpoint_policy.hpp"
#include "offtune/knobs.hpp"
#include "offtune/offloader.hpp"
#include "offtune/profiler/backend.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/job.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/live_run.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/requests/request.hpp"

namespace py = pybind11;
namespace pf = offtune::profiler;

namespace offtune::python {
namespace {

pf::RunStatus parse_failure(const std::string& s) {
  if (s == "failed") return pf::RunStatus::Failed;
  if (s == "oom") return pf::RunStatus::OutOfMemory;
  if (s == "interrupted") return pf::RunStatus::Interrupted;
  throw offtune::requests::UsageError("run status '" + s +
                                      "' is not one of failed, oom, interrupted");
}

// Runs `make`: its std::invalid_argument refuses a value the user gave (the profiler's own type for
// it is plain), so it becomes requests::UsageError, offtune.InputError in Python.
template <typename Make>
auto as_input_error(Make&& make) {
  try {
    return std::forward<Make>(make)();
  } catch (const pf::StoreError&) {
    throw;
  } catch (const requests::UsageError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw offtune::requests::UsageError(e.what());
  }
}

StepPhase parse_phase(const std::string& s) {
  if (s == "forward") return StepPhase::Forward;
  if (s == "backward") return StepPhase::Backward;
  throw offtune::requests::UsageError("phase '" + s + "' is not forward or backward");
}

template <typename T>
T get_or(const py::dict& d, const char* key, T fallback) {
  if (!d.contains(key) || d[key].is_none()) return fallback;
  return d[key].cast<T>();
}

py::dict to_dict(const pf::RunRecord& r) {
  py::dict d;
  d["id"] = r.id.value;
  d["status"] = std::string(pf::to_string(r.status));
  d["error"] = r.error;
  using S = pf::RunSummary;
  put_fields(
      d, r.summary, field("step_ms_median", &S::step_ms_median),
      field("step_ms_min", &S::step_ms_min), field("step_ms_max", &S::step_ms_max),
      field("peak_allocated", &S::peak_allocated), field("peak_reserved", &S::peak_reserved),
      field("offloaded_bytes", &S::offloaded_bytes), field("reloaded_bytes", &S::reloaded_bytes),
      field("hidden_copy_pct", &S::hidden_copy_pct), field("exposed_copy_ns", &S::exposed_copy_ns),
      field("pinned_bytes", &S::pinned_bytes), field("host_bytes_peak", &S::host_bytes_peak),
      field("device_outside", &S::device_outside), field("host_rss_peak", &S::host_rss_peak),
      field("final_loss", &S::final_loss));
  d["peak_device_total"] = pf::peak_device_total(r.summary);
  return d;
}

// A run as read back (tests, and scripts that check what a sweep recorded).
py::dict run_dict(pf::Store& store, const pf::RunRecord& r) {
  py::dict d = to_dict(r);
  d["label"] = r.label;
  d["model"] = r.workload.model;
  d["backend"] = r.env.backend;
  d["offload"] = r.config.offload;
  d["rank"] = r.rank;
  d["world_size"] = r.world_size;
  d["job_run"] = r.job_run ? py::object(py::int_(r.job_run->value)) : py::object(py::none());
  d["steps"] = static_cast<int64_t>(store.steps(r.id).size());
  return d;
}

// A recording: its store and its run, alive together. The offloaders it observes are kept alive
// by it too (the run holds them by reference).
class Recording {
 public:
  // `spec`: name, label, model, batch, seq, dtype, warmup, steps, lora_rank, checkpoint, backend
  // ("auto" | "cuda" | "host-sim"), device_model (a profile name or a JSON file; None),
  // collector, timeline, memory_history, begin_first_step, rank, world_size; under `offtune sweep
  // --script`
  // (python/offtune/_child.py) continue_run (rank 0: the point's run, begun by the sweep) or
  // job_run (another rank: its run takes the point run's config and label, "LABEL rank R").
  // `offloaders`: the engines to observe (none: the baseline); the run's config is the first
  // one's options.
  Recording(const std::string& db, const py::dict& spec,
            std::vector<std::shared_ptr<ActivationOffloader>> offloaders)
      : offloaders_(std::move(offloaders)) {
    pf::LiveRunSpec s;
    s.workload.model = get_or<std::string>(spec, "model", "");
    s.workload.batch = get_or<int64_t>(spec, "batch", 0);
    s.workload.seq = get_or<int64_t>(spec, "seq", 0);
    s.workload.dtype = get_or<std::string>(spec, "dtype", "");
    s.workload.warmup = get_or<int64_t>(spec, "warmup", 1);
    s.workload.steps = get_or<int64_t>(spec, "steps", 0);
    s.workload.lora_rank = get_or<int64_t>(spec, "lora_rank", 0);
    s.workload.optimizer = true;
    if (s.workload.warmup < 0) throw offtune::requests::UsageError("warmup must be 0 or more");
    s.label = get_or<std::string>(spec, "label", "");
    s.sweep = get_or<std::string>(spec, "name", "");
    // Another tool's saved-tensor hooks, found before the run began (offtune/record.py): the label
    // says so, and the run is no point of the recorded sweep (see LiveRun::leave_sweep).
    if (const auto other = get_or<std::string>(spec, "other_hooks", ""); !other.empty()) {
      s.label += " [under " + other + "]";
      s.sweep.clear();
    }
    s.collector = requests::parse_collector(get_or<std::string>(spec, "collector", "auto"));
    s.record_timeline = get_or<bool>(spec, "timeline", true);
    s.memory_history = get_or<bool>(spec, "memory_history", false);
    s.begin_first_step = get_or<bool>(spec, "begin_first_step", true);
    if (offloaders_.empty()) {
      s.config.offload = false;
    } else {
      s.config = knobs_of(offloaders_.front()->options());
    }
    s.config.checkpoint = parse_checkpoint_policy(get_or<std::string>(spec, "checkpoint", "none"));

    // The backend: the offloaders' (they resolved it), else as asked.
    const std::string asked = get_or<std::string>(spec, "backend", "auto");
    BackendKind backend = parse_backend(asked);  // OptionsError (ValueError) for a bad name
    if (!offloaders_.empty()) {
      const BackendKind theirs = offloaders_.front()->backend();
      if (backend != BackendKind::Auto && backend != theirs) {
        throw offtune::requests::UsageError("record: backend '" + asked +
                                            "' but the offloader runs on " +
                                            std::string(to_string(theirs)));
      }
      backend = theirs;
    }
    if (backend == BackendKind::Auto) {
      backend = torch::cuda::is_available() ? BackendKind::Cuda : BackendKind::HostSim;
    }
    const std::string model_name = get_or<std::string>(spec, "device_model", "");
    if (!model_name.empty()) {
      // A name that is no device model is refused as such on every backend (on cuda the test
      // suite saw "applies to host-sim only" for a typo, which hid the typo).
      DeviceModel model = as_input_error([&] { return pf::load_device_model(model_name); });
      if (backend != BackendKind::HostSim) {
        throw offtune::requests::UsageError(
            "device_model '" + model_name +
            "' applies to host-sim only (cuda measures the GPU): run on "
            "host-sim or leave device_model out");
      }
      s.device_model = std::move(model);
    }
    if (s.memory_history && backend != BackendKind::HostSim) {
      throw offtune::requests::UsageError(
          "memory_history=True records host-sim's modelled allocator; on cuda record torch's own "
          "(torch.cuda.memory._record_memory_history())");
    }
    pf::fill_environment(s.env, backend, s.device_model ? &*s.device_model : nullptr,
                         offloaders_.empty() ? "none" : s.config.link.name);
    s.rank = get_or<int64_t>(spec, "rank", 0);
    s.world_size = get_or<int64_t>(spec, "world_size", 1);
    if (const int64_t id = get_or<int64_t>(spec, "continue_run", -1); id >= 0) {
      s.continue_run = pf::RunId(id);
    }
    if (const int64_t id = get_or<int64_t>(spec, "job_run", -1); id >= 0) s.job_run = pf::RunId(id);
    // Opened last: nothing above writes, so a bad argument leaves no store file behind.
    store_ = std::shared_ptr<pf::Store>(pf::open_sqlite_store(db));
    // What the sweep wrote of the point and the script does not know stays the sweep's.
    const std::optional<pf::RunId> point_run = s.continue_run ? s.continue_run : s.job_run;
    if (point_run) {
      if (const auto begun = store_->run(*point_run)) {
        if (s.workload.model.empty()) s.workload.model = begun->workload.model;
        if (s.workload.batch == 0) s.workload.batch = begun->workload.batch;
        if (s.workload.seq == 0) s.workload.seq = begun->workload.seq;
        if (s.job_run) {
          s.config = begun->config;
          s.label = begun->label + " rank " + std::to_string(s.rank);
        }
      }
    }
    // The live run refuses a spec that does not fit the backend (a device model on cuda) with a
    // std::invalid_argument: what the user asked, refused.
    run_ = as_input_error([&] { return std::make_unique<pf::LiveRun>(store_, std::move(s)); });
    for (auto& o : offloaders_) run_->attach(*o);
  }

  void attach(const std::shared_ptr<ActivationOffloader>& o) {
    run_->attach(*o);
    offloaders_.push_back(o);
  }
  void leave_sweep() { run_->leave_sweep(); }
  void begin_step() { run_->begin_step(); }
  void end_step(double loss) { run_->end_step(loss); }
  void step(double loss) { run_->step(loss); }
  void begin_phase(const std::string& p) { run_->begin_phase(parse_phase(p)); }
  void end_phase(const std::string& p) { run_->end_phase(parse_phase(p)); }
  // Both wait for the device and for the store's lock (another process writing it): without the
  // GIL, so that the process's other threads (a data loader, a second rank's writer) go on.
  py::dict finish() {
    pf::RunRecord r;
    {
      py::gil_scoped_release nogil;
      r = run_->finish();
    }
    return done(r);
  }
  py::dict fail(const std::string& status, const std::string& error) {
    const auto failure = parse_failure(status);
    pf::RunRecord r;
    {
      py::gil_scoped_release nogil;
      r = run_->fail(failure, error);
    }
    return done(r);
  }
  int64_t id() const { return run_->id().value; }
  bool step_open() const { return run_->step_open(); }
  int64_t steps_begun() const { return run_->steps_begun(); }
  int64_t steps_measured() const { return run_->steps_measured(); }
  std::string path() const { return store_->path(); }

 private:
  py::dict done(const pf::RunRecord& r) {
    py::dict d = to_dict(r);
    d["warmup_added"] = run_->warmup_added();
    d["collector"] = run_->collector_status();
    return d;
  }

  std::vector<std::shared_ptr<ActivationOffloader>> offloaders_;
  std::shared_ptr<pf::Store> store_;
  std::unique_ptr<pf::LiveRun> run_;
};

}  // namespace
}  // namespace offtune::python

// Declared at global scope in bindings.hpp (module.cpp calls it unqualified).
void bind_record(py::module_& m) {
  using offtune::ActivationOffloader;
  using offtune::python::field;
  using offtune::python::put_fields;
  using offtune::python::Recording;
  m.def("store_schema_version", &pf::store_schema_version,
        "The schema version of the stores this build writes.");

  // What `offtune sweep --script` does before it starts the script (begin the point's run, status
  // running), and reading runs back: for tests of the script's side, and scripts that check it.
  m.def(
      "begin_run",
      [](const std::string& db, const std::string& label, bool offload) {
        auto store = pf::open_sqlite_store(db);
        pf::RunRecord r;
        r.status = pf::RunStatus::Running;
        r.label = label;
        r.workload.model = "script";
        r.config.offload = offload;
        r.started_unix_ns = 1;
        return store->begin_run(r).value;
      },
      py::arg("db"), py::arg("label"), py::arg("offload") = true,
      "Begins a running run (as a sweep begins a script's point); returns its id.");
  m.def(
      "export_memory_snapshot",
      [](const std::string& db, const std::string& path, std::optional<int64_t> run) {
        auto store = pf::open_sqlite_store_readonly(db);
        pf::RunId id;
        if (run) {
          id = pf::RunId(*run);
          if (!store->run(id))
            throw offtune::requests::UsageError("no run " + std::to_string(*run) + " in " + db);
        } else {
          const auto runs = store->runs();
          if (runs.empty()) throw offtune::requests::UsageError("no run in " + db);
          id = runs.back().id;
        }
        if (store->memory_blocks(id).empty()) {
          throw offtune::requests::UsageError(
              "run " + std::to_string(id.value) +
              " has no memory history: record it with offtune.record(..., memory_history=True) "
              "or `offtune run --memory-history` (host-sim)");
        }
        try {
          pf::export_memory_snapshot(*store, id, path);
        } catch (const pf::ExportError& e) {
          throw offtune::requests::UsageError(e.what());  // the path given: refused or not writable
        }
        return id.value;
      },
      py::arg("db"), py::arg("path"), py::arg("run") = py::none(),
      "Writes a run's memory history as a memory snapshot (export.hpp); returns the run's id.");
  m.def(
      "read_runs",
      [](const std::string& db) {
        auto store = pf::open_sqlite_store_readonly(db);
        py::list out;
        for (const auto& r : store->runs()) out.append(offtune::python::run_dict(*store, r));
        return out;
      },
      py::arg("db"), "Every run of the store, by id, as dicts.");
  m.def(
      "job_summary",
      [](const std::string& db, int64_t run) {
        auto store = pf::open_sqlite_store_readonly(db);
        const pf::JobSummary job = pf::job_summary(*store, pf::RunId(run));
        // The figures a job and each of its ranks both have, after their ids.
        const auto put_figures = [](py::dict& d, const auto& figures) {
          using F = std::remove_cvref_t<decltype(figures)>;
          d["status"] = std::string(pf::to_string(figures.status));
          put_fields(d, figures, field("step_ms_median", &F::step_ms_median),
                     field("peak_allocated", &F::peak_allocated),
                     field("peak_reserved", &F::peak_reserved));
        };
        py::dict d;
        d["job"] = job.job.value;
        d["world_size"] = job.world_size;
        put_figures(d, job);
        py::list ranks;
        for (const auto& r : job.ranks) {
          py::dict x;
          x["rank"] = r.rank;
          x["run"] = r.run.value;
          put_figures(x, r);
          ranks.append(x);
        }
        d["ranks"] = ranks;
        return d;
      },
      py::arg("db"), py::arg("run"),
      "A distributed job's figures from rank 0's run (profiler/job.hpp): the slowest rank's step "
      "time, the highest peaks, and each rank's.");

  // The calls that wait for the device or the copies release the GIL: autograd's threads may need
  // it to finish a backward the copies wait for.
  using release = py::call_guard<py::gil_scoped_release>;
  py::class_<Recording>(m, "Recording", "One run being recorded (offtune.record).")
      .def(py::init<const std::string&, const py::dict&,
                    std::vector<std::shared_ptr<ActivationOffloader>>>(),
           py::arg("db"), py::arg("spec"), py::arg("offloaders"))
      .def("attach", &Recording::attach, py::arg("offloader"))
      .def("begin_step", &Recording::begin_step, release())
      .def("end_step", &Recording::end_step, py::arg("loss"), release())
      .def("step", &Recording::step, py::arg("loss"), release())
      .def("begin_phase", &Recording::begin_phase, py::arg("phase"))
      .def("end_phase", &Recording::end_phase, py::arg("phase"))
      .def("leave_sweep", &Recording::leave_sweep)
      .def("finish", &Recording::finish)
      .def("fail", &Recording::fail, py::arg("status"), py::arg("error"))
      .def_property_readonly("id", &Recording::id)
      .def_property_readonly("step_open", &Recording::step_open)
      .def_property_readonly("steps_begun", &Recording::steps_begun)
      .def_property_readonly("steps_measured", &Recording::steps_measured)
      .def_property_readonly("path", &Recording::path);
}
