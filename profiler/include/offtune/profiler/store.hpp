// The store: where runs, steps, timelines, occupancy, sweeps, points and recommendations go. An
// interface with two implementations: SQLite (one file, versioned schema with migrations, WAL,
// batched writes in transactions) and an in-memory sink for tests.
//
// Errors throw StoreError with a kind and a one-line message. A file that is not SQLite, is
// corrupt, or has a newer schema than this build knows is refused and never modified.
//
// Several processes may share a store. Each run and each claimed sweep point names the process that
// owns it (Owner), so that work of a process that ended is neither lost nor waited for forever: its
// running runs read as interrupted, and its claimed points can be taken over.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "offtune/profiler/records.hpp"

namespace offtune::profiler {

class StoreError : public std::runtime_error {
 public:
  enum class Kind {
    CannotOpen,    // missing directory, permissions
    NotADatabase,  // not an SQLite file
    Corrupt,       // SQLite reports corruption
    NewerSchema,   // written by a newer offtune
    Full,          // disk full / quota
    Busy,          // locked by another writer beyond the timeout
    Invalid,       // bad argument (unknown id, ...)
    Io,            // any other SQLite error
  };
  StoreError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// The process that records a run or measures a sweep point: host name, pid, and the process's
// start time (/proc/PID/stat field 22, clock ticks since boot) so that a reused pid is not taken
// for it.
struct Owner {
  std::string host;
  int64_t pid = 0;
  int64_t start = 0;
  bool operator==(const Owner&) const = default;
};
Owner current_owner();
// On this host: a process with that pid and start time exists (a zombie has ended). On another host
// it cannot be known: true.
bool owner_alive(const Owner& owner);

enum class ClaimStatus { Claimed, Finished, Taken };
struct Claim {
  ClaimStatus status = ClaimStatus::Claimed;
  Owner holder;  // who has the point: current_owner() when Claimed, the other process when Taken
};

class Store {
 public:
  virtual ~Store() = default;

  // Runs. begin_run records current_owner() as the run's owner. A run that is `running` while its
  // owner has ended (killed, crashed) reads as Interrupted, with an error that names the process;
  // opening the store for writing also writes that into the file.
  virtual RunId begin_run(const RunRecord& run) = 0;  // id assigned; status as given
  virtual void finish_run(RunId id, RunStatus status, const std::string& error,
                          const RunSummary& summary, int64_t finished_unix_ns) = 0;
  virtual std::optional<RunRecord> run(RunId id) = 0;
  virtual std::vector<RunRecord> runs() = 0;  // by id
  // Writes `description` over a `running` run's workload, environment, rank, world size and job
  // (a run begun by one process and recorded by another). Unknown run, or one that is not running:
  // StoreError(Invalid). Not pure, as claims: a store that predates it refuses.
  virtual void describe_run(RunId id, const RunDescription& description);

  // Per-run data, batched: each call is one transaction.
  virtual void add_steps(const std::vector<StepRecord>& steps) = 0;
  virtual void add_events(const std::vector<TimelineEvent>& events) = 0;
  virtual void add_occupancy(const std::vector<OccupancySample>& samples) = 0;
  virtual std::vector<StepRecord> steps(RunId run) = 0;
  virtual std::vector<TimelineEvent> events(RunId run) = 0;       // ordered by start_ns
  virtual std::vector<OccupancySample> occupancy(RunId run) = 0;  // ordered by time_ns

  // Sweeps. The key is a sweep's identity. create_sweep finds or creates, atomically: it returns
  // the id of the sweep with this key, as it is (the record given is then ignored), or inserts the
  // record. Two processes that start the same sweep at once get the same id. find_sweep returns the
  // sweep with this key, if any (resume).
  virtual SweepId create_sweep(const SweepRecord& sweep) = 0;
  virtual std::optional<SweepRecord> find_sweep(const std::string& key) = 0;
  virtual std::optional<SweepRecord> sweep(SweepId id) = 0;
  virtual std::vector<SweepRecord> sweeps() = 0;
  // Inserts the point, or replaces the one with the same (sweep, index).
  virtual PointId put_point(const PointRecord& point) = 0;
  virtual std::vector<PointRecord> points(SweepId sweep) = 0;  // by index

  // Claims: which process measures a point, so that two processes running the same sweep measure
  // each point once. In one write transaction: Finished if the point is finished (ok, failed, oom);
  // Taken if another live owner claims it; otherwise the point is claimed by current_owner()
  // (taking over the claim of an owner that ended) and Claimed. A process is one owner: its threads
  // share its claims. Unknown sweep: StoreError(Invalid).
  //
  // Not pure, so that a wrapper written before claims existed still compiles; a store that cannot
  // coordinate processes must not pretend to, so the defaults refuse.
  virtual Claim claim_point(SweepId sweep, int64_t index);
  // Removes this owner's claim on the point, if it has one (after put_point of the result).
  virtual void release_point(SweepId sweep, int64_t index);

  // Predictions (predict-first sweeps): each replaces the one with the same (sweep, index), all in
  // one transaction; an unknown sweep is refused (StoreError(Invalid)) and nothing is written.
  // predictions() is by index; a file older than schema 5 opened read-only has none.
  //
  // Not pure, as claims: a store written before predictions existed keeps none and says so on
  // write.
  virtual void put_predictions(const std::vector<PointPrediction>& predictions);
  virtual std::vector<PointPrediction> predictions(SweepId sweep);

  // A run's memory history (records.hpp), written once, in one transaction; an unknown run is
  // refused. memory_events() is by seq, memory_blocks() by address; a run recorded without one, or
  // a file older than schema 10 opened read-only, has none. Not pure, as predictions.
  virtual void add_memory_history(RunId run, const std::vector<MemoryEventRecord>& events,
                                  const std::vector<MemoryBlockRecord>& blocks);
  virtual std::vector<MemoryEventRecord> memory_events(RunId run);
  virtual std::vector<MemoryBlockRecord> memory_blocks(RunId run);

  virtual void add_recommendation(const RecommendationRecord& rec) = 0;
  virtual std::vector<RecommendationRecord> recommendations(SweepId sweep) = 0;

  // The file behind the store, as given to open; empty for a store that has no file (memory).
  virtual std::string path() const { return {}; }
};

// Opens (creating if absent) an SQLite store. Migrates an older schema forward inside a
// transaction, then marks the running runs of owners that ended as interrupted. A file this call
// created and could not make a store of is removed again.
std::unique_ptr<Store> open_sqlite_store(const std::string& path);
// Opens an existing store read-only (export, report, recommend); never writes or migrates. The
// -wal/-shm files SQLite creates for it are removed when the store is destroyed, unless another
// connection still has the store open.
std::unique_ptr<Store> open_sqlite_store_readonly(const std::string& path);
std::unique_ptr<Store> make_memory_store();

// The schema version this build writes (PRAGMA user_version).
int store_schema_version();

}  // namespace offtune::profiler
