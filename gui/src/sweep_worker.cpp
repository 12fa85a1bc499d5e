// SweepRunner's thread and the request check: the only file of offtune::gui that includes libtorch
// (through the workloads), so the rest of the dashboard compiles without it.
#include <c10/util/Exception.h>

#include <stdexcept>

#include "offtune/cli/workloads.hpp"
#include "offtune/gui/sweep_form.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/samples/workload.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

namespace {

pf::Grid make_grid(const SweepRequest& r) {
  pf::Grid grid;
  grid.min_offload_sizes = pf::parse_size_list(r.min_offload_sizes);
  grid.max_fwd_stash_sizes = pf::parse_int_list(r.max_fwd_stash_sizes);
  for (int64_t w : grid.max_fwd_stash_sizes) {
    if (w < 1) throw std::invalid_argument("max_fwd_stash_size values must be at least 1");
  }
  // Every other knob at the CLI's defaults, so the sweep key (and resuming) is the same as for
  // `offtune sweep` with the same flags.
  grid.base.link = r.link;
  return grid;
}

}  // namespace

int64_t validate_sweep_request(const SweepRequest& r) {
  if (r.db.empty()) throw std::invalid_argument("no store: choose the file the sweep writes");
  if (r.workload.model.empty()) throw std::invalid_argument("no model");
  if (r.workload.batch < 1 || r.workload.seq < 1 || r.workload.steps < 1 || r.workload.warmup < 0) {
    throw std::invalid_argument("batch, seq and steps must be at least 1, warmup at least 0");
  }
  samples::parse_dtype(r.workload.dtype);
  if (r.backend != "auto" && r.backend != "cuda" && r.backend != "host-sim") {
    throw std::invalid_argument("backend must be auto, cuda or host-sim");
  }
  cli::parse_link(r.link);
  if (!r.device_capacity.empty() && pf::parse_size(r.device_capacity) <= 0) {
    throw std::invalid_argument("device capacity must be positive");
  }
  return static_cast<int64_t>(pf::expand_grid(make_grid(r)).size());
}

SweepRunner::SweepRunner(QObject* parent) : QObject(parent) {
  qRegisterMetaType<pf::PointRecord>();
}

SweepRunner::~SweepRunner() {
  cancel();
  if (thread_.joinable()) thread_.join();
}

bool SweepRunner::start(const SweepRequest& request, QString* error) {
  if (running_.load()) {
    if (error) *error = QStringLiteral("a sweep is already running");
    return false;
  }
  try {
    validate_sweep_request(request);
  } catch (const std::exception& e) {
    if (error) *error = QString::fromStdString(e.what());
    return false;
  }
  if (thread_.joinable()) thread_.join();  // the previous sweep's thread has ended its work
  cancel_.store(false);
  running_.store(true);
  thread_ = std::thread([this, request] { work(request); });
  return true;
}

void SweepRunner::cancel() { cancel_.store(true); }

void SweepRunner::work(SweepRequest r) {
  bool ok = false, interrupted = false;
  QString message;
  try {
    pf::SweepSpec spec;
    spec.name = r.name;
    spec.workload = r.workload;
    spec.grid = make_grid(r);
    if (r.input_spec != cli::kDefaultInputSpec) spec.model_input = r.input_spec;
    const auto prepared =
        cli::prepare_backend({r.backend, r.link, r.device_capacity, /*threads=*/-1}, spec.env);
    spec.base = prepared.base;
    auto store = pf::open_sqlite_store(r.db);
    auto workload = cli::make_builtin_workload(spec.workload, prepared.device, r.input_spec);
    const auto outcome = pf::run_sweep(
        *workload, spec, *store,
        [this](const pf::SweepProgress& p) {
          if (p.last != nullptr) Q_EMIT pointFinished(*p.last);
          Q_EMIT progress(p.done, p.total);
        },
        &cancel_);
    interrupted = outcome.interrupted;
    ok = !interrupted;
    message = QStringLiteral(
                  "sweep %1: ran %2, skipped %3 (already measured), ok %4, failed %5, "
                  "out of memory %6%7")
                  .arg(outcome.sweep.value)
                  .arg(outcome.ran)
                  .arg(outcome.skipped)
                  .arg(outcome.ok)
                  .arg(outcome.failed)
                  .arg(outcome.oom)
                  .arg(interrupted ? QStringLiteral(" \u2014 cancelled; run it again to resume")
                                   : QString());
  } catch (const c10::Error& e) {
    message = QString::fromStdString(e.what_without_backtrace());
  } catch (const std::exception& e) {
    message = QString::fromStdString(e.what());
  }
  running_.store(false);
  Q_EMIT finished(ok, interrupted, message);
}

}  // namespace offtune::gui
