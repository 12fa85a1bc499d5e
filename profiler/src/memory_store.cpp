// The in-memory store: the Store semantics of the SQLite store without a file, for tests and for
// front ends that record nothing. It refuses what the SQLite schema refuses (unknown run or sweep
// ids, a duplicate step) with StoreError(Invalid), and a refused batch adds nothing, so code tested
// against it behaves the same on the real store. Only this process can see it, so every run's and
// every claim's owner is this process: runs are never interrupted by another's end, and a pending
// point is always free to claim.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "offtune/profiler/store.hpp"

namespace offtune::profiler {
namespace {

using Kind = StoreError::Kind;

class MemoryStore final : public Store {
 public:
  RunId begin_run(const RunRecord& run) override {
    std::lock_guard lock(mu_);
    RunRecord r = run;
    r.id = RunId(next_run_++);  // ids start at 1, like SQLite rowids
    runs_.emplace(r.id.value, r);
    return r.id;
  }

  void finish_run(RunId id, RunStatus status, const std::string& error, const RunSummary& summary,
                  int64_t finished_unix_ns) override {
    std::lock_guard lock(mu_);
    auto it = runs_.find(id.value);
    if (it == runs_.end()) throw unknown("finish run", "run", id.value);
    it->second.status = status;
    it->second.error = error;
    it->second.summary = summary;
    it->second.finished_unix_ns = finished_unix_ns;
  }

  void describe_run(RunId id, const RunDescription& d) override {
    std::lock_guard lock(mu_);
    auto it = runs_.find(id.value);
    if (it == runs_.end()) throw unknown("describe run", "run", id.value);
    RunRecord& r = it->second;
    if (r.status != RunStatus::Running) {
      throw StoreError(Kind::Invalid, "memory store: describe run: run " +
                                          std::to_string(id.value) + " is " + to_string(r.status) +
                                          ", not running: only a running run can be continued");
    }
    r.workload = d.workload;
    r.env = d.env;
    r.rank = d.rank;
    r.world_size = d.world_size;
    r.job_run = d.job_run;
  }

  std::optional<RunRecord> run(RunId id) override {
    std::lock_guard lock(mu_);
    auto it = runs_.find(id.value);
    if (it == runs_.end()) return std::nullopt;
    return it->second;
  }

  std::vector<RunRecord> runs() override {
    std::lock_guard lock(mu_);
    std::vector<RunRecord> out;
    out.reserve(runs_.size());
    for (const auto& [id, r] : runs_) out.push_back(r);
    return out;
  }

  void add_steps(const std::vector<StepRecord>& steps) override {
    std::lock_guard lock(mu_);
    // Validate the whole batch first: a refused batch must leave nothing behind.
    std::set<std::pair<int64_t, int64_t>> batch_keys;
    for (const StepRecord& s : steps) {
      require_run("add steps", s.run);
      const auto key = std::make_pair(s.run.value, s.step);
      if (steps_.contains(key) || !batch_keys.insert(key).second) {
        throw StoreError(Kind::Invalid, "memory store: add steps: duplicate step " +
                                            std::to_string(s.step) + " of run " +
                                            std::to_string(s.run.value));
      }
    }
    for (const StepRecord& s : steps) steps_.emplace(std::make_pair(s.run.value, s.step), s);
  }

  void add_events(const std::vector<TimelineEvent>& events) override {
    std::lock_guard lock(mu_);
    for (const TimelineEvent& e : events) require_run("add events", e.run);
    for (const TimelineEvent& e : events) events_[e.run.value].push_back(e);
  }

  void add_occupancy(const std::vector<OccupancySample>& samples) override {
    std::lock_guard lock(mu_);
    for (const OccupancySample& o : samples) require_run("add occupancy", o.run);
    for (const OccupancySample& o : samples) occupancy_[o.run.value].push_back(o);
  }

  std::vector<StepRecord> steps(RunId run) override {
    std::lock_guard lock(mu_);
    std::vector<StepRecord> out;
    // The map is ordered by (run, step): the run's steps are one contiguous range.
    for (auto it = steps_.lower_bound({run.value, std::numeric_limits<int64_t>::min()});
         it != steps_.end() && it->first.first == run.value; ++it) {
      out.push_back(it->second);
    }
    return out;
  }

  std::vector<TimelineEvent> events(RunId run) override {
    std::lock_guard lock(mu_);
    auto it = events_.find(run.value);
    if (it == events_.end()) return {};
    std::vector<TimelineEvent> out = it->second;
    // Stable: equal start times keep insertion order, as the SQLite store's (start_ns, id) does.
    std::stable_sort(out.begin(), out.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
      return a.start_ns < b.start_ns;
    });
    return out;
  }

  std::vector<OccupancySample> occupancy(RunId run) override {
    std::lock_guard lock(mu_);
    auto it = occupancy_.find(run.value);
    if (it == occupancy_.end()) return {};
    std::vector<OccupancySample> out = it->second;
    std::stable_sort(
        out.begin(), out.end(),
        [](const OccupancySample& a, const OccupancySample& b) { return a.time_ns < b.time_ns; });
    return out;
  }

  void add_memory_history(RunId run, const std::vector<MemoryEventRecord>& events,
                          const std::vector<MemoryBlockRecord>& blocks) override {
    std::lock_guard lock(mu_);
    require_run("add memory history", run);
    auto& e = memory_events_[run.value];
    for (MemoryEventRecord r : events) {
      r.run = run;
      e.push_back(std::move(r));
    }
    auto& b = memory_blocks_[run.value];
    for (MemoryBlockRecord r : blocks) {
      r.run = run;
      b.push_back(std::move(r));
    }
  }

  std::vector<MemoryEventRecord> memory_events(RunId run) override {
    std::lock_guard lock(mu_);
    auto it = memory_events_.find(run.value);
    if (it == memory_events_.end()) return {};
    std::vector<MemoryEventRecord> out = it->second;
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.seq < b.seq; });
    return out;
  }

  std::vector<MemoryBlockRecord> memory_blocks(RunId run) override {
    std::lock_guard lock(mu_);
    auto it = memory_blocks_.find(run.value);
    if (it == memory_blocks_.end()) return {};
    std::vector<MemoryBlockRecord> out = it->second;
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.addr < b.addr; });
    return out;
  }

  SweepId create_sweep(const SweepRecord& sweep) override {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sweeps_) {
      if (s.key == sweep.key) return s.id;  // find or create, as the SQLite store
    }
    SweepRecord s = sweep;
    s.id = SweepId(next_sweep_++);
    sweeps_.emplace(s.id.value, s);
    return s.id;
  }

  std::optional<SweepRecord> find_sweep(const std::string& key) override {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sweeps_) {
      if (s.key == key) return s;
    }
    return std::nullopt;
  }

  std::optional<SweepRecord> sweep(SweepId id) override {
    std::lock_guard lock(mu_);
    auto it = sweeps_.find(id.value);
    if (it == sweeps_.end()) return std::nullopt;
    return it->second;
  }

  std::vector<SweepRecord> sweeps() override {
    std::lock_guard lock(mu_);
    std::vector<SweepRecord> out;
    out.reserve(sweeps_.size());
    for (const auto& [id, s] : sweeps_) out.push_back(s);
    return out;
  }

  PointId put_point(const PointRecord& point) override {
    std::lock_guard lock(mu_);
    require_sweep("put point", point.sweep);
    if (point.run.valid()) require_run("put point", point.run);
    PointRecord p = point;
    p.run = point.run.valid() ? point.run : RunId();  // every invalid id reads back as -1
    const auto key = std::make_pair(point.sweep.value, point.index);
    auto it = points_.find(key);
    // A replaced point keeps its id, as the SQLite upsert keeps its row.
    p.id = it != points_.end() ? it->second.id : PointId(next_point_++);
    points_.insert_or_assign(key, p);
    return p.id;
  }

  std::vector<PointRecord> points(SweepId sweep) override {
    std::lock_guard lock(mu_);
    std::vector<PointRecord> out;
    for (auto it = points_.lower_bound({sweep.value, std::numeric_limits<int64_t>::min()});
         it != points_.end() && it->first.first == sweep.value; ++it) {
      out.push_back(it->second);
    }
    return out;
  }

  Claim claim_point(SweepId sweep, int64_t index) override {
    std::lock_guard lock(mu_);
    require_sweep("claim point", sweep);
    auto it = points_.find(std::make_pair(sweep.value, index));
    if (it != points_.end() && it->second.status != PointStatus::Pending) {
      return {ClaimStatus::Finished, Owner{}};
    }
    return {ClaimStatus::Claimed, current_owner()};
  }

  void release_point(SweepId, int64_t) override {}

  void add_recommendation(const RecommendationRecord& rec) override {
    std::lock_guard lock(mu_);
    require_sweep("add recommendation", rec.sweep);
    recommendations_.push_back(rec);
  }

  std::vector<RecommendationRecord> recommendations(SweepId sweep) override {
    std::lock_guard lock(mu_);
    std::vector<RecommendationRecord> out;
    for (const RecommendationRecord& r : recommendations_) {
      if (r.sweep == sweep) out.push_back(r);
    }
    return out;
  }

  void put_predictions(const std::vector<PointPrediction>& predictions) override {
    std::lock_guard lock(mu_);
    for (const PointPrediction& p : predictions) require_sweep("put predictions", p.sweep);
    for (const PointPrediction& p : predictions) {
      predictions_.insert_or_assign(std::make_pair(p.sweep.value, p.index), p);
    }
  }

  std::vector<PointPrediction> predictions(SweepId sweep) override {
    std::lock_guard lock(mu_);
    std::vector<PointPrediction> out;
    for (auto it = predictions_.lower_bound({sweep.value, std::numeric_limits<int64_t>::min()});
         it != predictions_.end() && it->first.first == sweep.value; ++it) {
      out.push_back(it->second);
    }
    return out;
  }

 private:
  static StoreError unknown(const char* op, const char* what, int64_t id) {
    return StoreError(Kind::Invalid, std::string("memory store: ") + op + ": unknown " + what +
                                         " id " + std::to_string(id));
  }
  void require_run(const char* op, RunId id) const {
    if (!runs_.contains(id.value)) throw unknown(op, "run", id.value);
  }
  void require_sweep(const char* op, SweepId id) const {
    if (!sweeps_.contains(id.value)) throw unknown(op, "sweep", id.value);
  }

  std::mutex mu_;
  int64_t next_run_ = 1;
  int64_t next_sweep_ = 1;
  int64_t next_point_ = 1;
  std::map<int64_t, RunRecord> runs_;
  std::map<std::pair<int64_t, int64_t>, StepRecord> steps_;  // (run, step)
  std::map<int64_t, std::vector<TimelineEvent>> events_;     // by run, in insertion order
  std::map<int64_t, std::vector<OccupancySample>> occupancy_;
  std::map<int64_t, std::vector<MemoryEventRecord>> memory_events_;
  std::map<int64_t, std::vector<MemoryBlockRecord>> memory_blocks_;
  std::map<int64_t, SweepRecord> sweeps_;
  std::map<std::pair<int64_t, int64_t>, PointRecord> points_;           // (sweep, index)
  std::vector<RecommendationRecord> recommendations_;                   // in insertion order
  std::map<std::pair<int64_t, int64_t>, PointPrediction> predictions_;  // (sweep, index)
};

}  // namespace

std::unique_ptr<Store> make_memory_store() { return std::make_unique<MemoryStore>(); }

}  // namespace offtune::profiler
