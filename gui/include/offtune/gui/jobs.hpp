// Background jobs for the dashboard: store reads, timeline indexing and exports run on a thread
// pool, never on the GUI thread, and hand an immutable result back to the GUI thread.
//
// The hand-over: a QFutureWatcher, parented to the receiver, reports the finished future through a
// queued signal, so the result is delivered on the receiver's thread, and never to a receiver that
// has been destroyed meanwhile (its watcher goes with it). A view that starts a newer job before an
// older one ends drops the older result by comparing job ids (JobTicket).
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QtConcurrent/QtConcurrentRun>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "offtune/gui/data.hpp"

namespace offtune::gui {

// A job's outcome: the value, or the one-line error the work threw.
template <typename T>
struct JobResult {
  std::shared_ptr<const T> value;
  QString error;
};

// Ids that let a view keep only its newest job's result.
class JobTicket {
 public:
  uint64_t next() { return ++current_; }
  bool is_current(uint64_t id) const { return id == current_; }
  void invalidate() { ++current_; }

 private:
  uint64_t current_ = 0;
};

// The pool the dashboard's jobs run on (two threads: one store read never waits for an export).
class QThreadPool* job_pool();

// Runs `work` (returning T by value) on job_pool() and calls `done(JobResult<T>)` on `receiver`'s
// thread, unless `receiver` is destroyed first. Exceptions from `work` become JobResult::error.
template <typename T, typename Work, typename Done>
void run_job(QObject* receiver, Work work, Done done) {
  auto* watcher = new QFutureWatcher<JobResult<T>>(receiver);
  QObject::connect(watcher, &QFutureWatcherBase::finished, receiver,
                   [watcher, done = std::move(done)]() {
                     const JobResult<T> result = watcher->result();
                     watcher->deleteLater();
                     done(result);
                   });
  watcher->setFuture(QtConcurrent::run(job_pool(), [work = std::move(work)]() -> JobResult<T> {
    try {
      return {std::make_shared<const T>(work()), {}};
    } catch (const std::exception& e) {
      return {nullptr, QString::fromStdString(e.what())};
    } catch (...) {
      return {nullptr, QStringLiteral("unknown error")};
    }
  }));
}

// A job with no result (an export): `done(error)` gets an empty error on success.
void run_task(QObject* receiver, std::function<void()> work,
              std::function<void(const QString& error)> done);

// Store reads for the views (run on a job thread). Each opens the store read-only for the call: an
// SQLite connection is not shared across threads, and a read-only open never modifies the file.
StoreIndex load_store_index(const std::string& path);
SweepData load_sweep(const std::string& path, profiler::SweepId sweep);
RunData load_run(const std::string& path, profiler::RunId run);

}  // namespace offtune::gui
