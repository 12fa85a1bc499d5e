// The store: where runs, steps, timelines, occupancy, sweeps, points and recommendations go. An
// interface with two implementations: SQLite (one file, versioned schema with migrations, WAL,
// batched writes in transactions) and an in-memory sink for tests.
//
// Errors throw StoreError with a kind and a one-line message. A file that is not SQLite, is
// corrupt, or has a newer schema than this build knows is refused and never modified.
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

class Store {
 public:
  virtual ~Store() = default;

  // Runs.
  virtual RunId begin_run(const RunRecord& run) = 0;  // id assigned; status as given
  virtual void finish_run(RunId id, RunStatus status, const std::string& error,
                          const RunSummary& summary, int64_t finished_unix_ns) = 0;
  virtual std::optional<RunRecord> run(RunId id) = 0;
  virtual std::vector<RunRecord> runs() = 0;  // by id

  // Per-run data, batched: each call is one transaction.
  virtual void add_steps(const std::vector<StepRecord>& steps) = 0;
  virtual void add_events(const std::vector<TimelineEvent>& events) = 0;
  virtual void add_occupancy(const std::vector<OccupancySample>& samples) = 0;
  virtual std::vector<StepRecord> steps(RunId run) = 0;
  virtual std::vector<TimelineEvent> events(RunId run) = 0;       // ordered by start_ns
  virtual std::vector<OccupancySample> occupancy(RunId run) = 0;  // ordered by time_ns

  // Sweeps. find_sweep returns the sweep with this key, if any (resume).
  virtual SweepId create_sweep(const SweepRecord& sweep) = 0;
  virtual std::optional<SweepRecord> find_sweep(const std::string& key) = 0;
  virtual std::optional<SweepRecord> sweep(SweepId id) = 0;
  virtual std::vector<SweepRecord> sweeps() = 0;
  // Inserts the point, or replaces the one with the same (sweep, index).
  virtual PointId put_point(const PointRecord& point) = 0;
  virtual std::vector<PointRecord> points(SweepId sweep) = 0;  // by index

  virtual void add_recommendation(const RecommendationRecord& rec) = 0;
  virtual std::vector<RecommendationRecord> recommendations(SweepId sweep) = 0;
};

// Opens (creating if absent) an SQLite store. Migrates an older schema forward inside a
// transaction.
std::unique_ptr<Store> open_sqlite_store(const std::string& path);
// Opens an existing store read-only (export, report, recommend); never writes or migrates.
std::unique_ptr<Store> open_sqlite_store_readonly(const std::string& path);
std::unique_ptr<Store> make_memory_store();

// The schema version this build writes (PRAGMA user_version).
int store_schema_version();

}  // namespace offtune::profiler
