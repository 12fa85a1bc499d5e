#include "offtune/gui/jobs.hpp"

#include <QThreadPool>
#include <stdexcept>
#include <string>

#include "offtune/profiler/store.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

QThreadPool* job_pool() {
  static QThreadPool* pool = [] {
    auto* p = new QThreadPool;  // lives for the process: jobs may still run while windows close
    p->setMaxThreadCount(2);
    p->setExpiryTimeout(30000);
    return p;
  }();
  return pool;
}

namespace {
struct Done {};
}  // namespace

void run_task(QObject* receiver, std::function<void()> work,
              std::function<void(const QString& error)> done) {
  run_job<Done>(
      receiver,
      [work = std::move(work)] {
        work();
        return Done{};
      },
      [done = std::move(done)](const JobResult<Done>& r) { done(r.value ? QString() : r.error); });
}

StoreIndex load_store_index(const std::string& path) {
  auto store = pf::open_sqlite_store_readonly(path);
  StoreIndex index;
  index.path = path;
  for (auto& sweep : store->sweeps()) {
    auto points = store->points(sweep.id);
    auto predictions = store->predictions(sweep.id);
    index.sweeps.push_back(
        make_sweep_data(std::move(sweep), std::move(points), std::move(predictions)));
  }
  index.runs = store->runs();
  return index;
}

SweepData load_sweep(const std::string& path, pf::SweepId sweep) {
  auto store = pf::open_sqlite_store_readonly(path);
  auto record = store->sweep(sweep);
  if (!record)
    throw std::invalid_argument("no sweep " + std::to_string(sweep.value) + " in " + path);
  return make_sweep_data(std::move(*record), store->points(sweep), store->predictions(sweep));
}

RunData load_run(const std::string& path, pf::RunId run) {
  auto store = pf::open_sqlite_store_readonly(path);
  auto record = store->run(run);
  if (!record) throw std::invalid_argument("no run " + std::to_string(run.value) + " in " + path);
  RunData data;
  data.run = std::move(*record);
  data.steps = store->steps(run);
  data.events = store->events(run);
  data.occupancy = store->occupancy(run);
  return data;
}

}  // namespace offtune::gui
