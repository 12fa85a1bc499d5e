// SweepRunner's thread and the request check: the only file of offtune::gui that includes libtorch
// (for c10's error type), so the rest of the dashboard compiles without it. Requests are checked
// and run by offtune::requests, as `offtune sweep` runs them.
#include <c10/util/Exception.h>

#include <optional>
#include <stdexcept>

#include "offtune/gui/sweep_form.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/requests/execute.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

namespace {

requests::ValidSweep checked(const SweepRequest& r) {
  if (r.db.empty()) throw requests::UsageError("no store: choose the file the sweep writes");
  return requests::require_valid(r);
}

}  // namespace

int64_t validate_sweep_request(const SweepRequest& r) { return requests::point_count(checked(r)); }

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
  std::optional<requests::ValidSweep> valid;
  try {
    valid = checked(request);
  } catch (const std::exception& e) {
    if (error) *error = QString::fromStdString(e.what());
    return false;
  }
  if (thread_.joinable()) thread_.join();  // the previous sweep's thread has ended its work
  cancel_.store(false);
  running_.store(true);
  thread_ = std::thread([this, valid = std::move(*valid)] { work(valid); });
  return true;
}

void SweepRunner::cancel() { cancel_.store(true); }

void SweepRunner::work(requests::ValidSweep valid) {
  const SweepRequest& r = valid.request();
  bool ok = false, interrupted = false;
  QString message;
  try {
    // The model first: one that cannot be built leaves no store behind.
    auto prepared = requests::prepare(valid);
    // A script's output would go to the dashboard's stderr, where no one reads it: a point that
    // fails keeps its last lines in its error (and the run's), which the views show.
    if (prepared.script) prepared.script->pass_stderr = false;
    auto store = pf::open_sqlite_store(r.db);
    const QString note = QString::fromStdString(requests::script_identity_note(prepared, *store));
    if (!note.isEmpty()) Q_EMIT notice(note);
    const auto outcome = requests::execute(
        prepared, *store,
        [this](const pf::SweepProgress& p) {
          if (p.last != nullptr) Q_EMIT pointFinished(*p.last);
          Q_EMIT progress(p.done, p.total);
        },
        &cancel_);
    interrupted = outcome.interrupted;
    ok = !interrupted;
    // The line `offtune sweep` prints.
    message = QString::fromStdString(requests::sweep_summary(outcome, r.repeat));
    if (interrupted) message += QStringLiteral(" \u2014 cancelled; run it again to resume");
    if (!note.isEmpty()) message += QStringLiteral(" (%1)").arg(note);
  } catch (const c10::Error& e) {
    message = QString::fromStdString(e.what_without_backtrace());
  } catch (const std::exception& e) {
    message = QString::fromStdString(e.what());
  }
  running_.store(false);
  Q_EMIT finished(ok, interrupted, message);
}

}  // namespace offtune::gui
