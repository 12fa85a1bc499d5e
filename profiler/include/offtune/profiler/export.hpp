// Exporters: what turns recorded runs and sweeps into files other tools open. A Chrome Trace Event
// JSON file for Perfetto (ui.perfetto.dev) and chrome://tracing; an SQLite file laid out like
// Nsight Systems' SQLite export, so that queries and scripts written for `nsys export --type
// sqlite` run on offtune's timelines; and a CSV of a sweep's points for spreadsheets and plotting.
// docs/export.md describes the formats, how to open them, and where they differ from the originals.
//
// Every export is all or nothing: it writes a temporary file and puts it in place only once
// complete, so a failure (a bad run id, a full disk) never leaves a half-written output and never
// clobbers an earlier good one. Where it goes (the path given, `path`):
//   - a new file, or an existing regular file: renamed into place atomically (through a symbolic
//     link, onto the file it points to; the link stays);
//   - "-": written to standard output;
//   - a FIFO or a character device (/dev/null, /dev/stdout, a pipe): written to it as a stream;
//   - refused, before anything is read: a directory, a block device, a socket; the store being
//     exported and its -wal, -shm and -journal files; any other offtune store (an export never
//     replaces a file that is not an export).
// Errors throw ExportError with a one-line message.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "offtune/profiler/records.hpp"
#include "offtune/profiler/store.hpp"

namespace offtune::profiler {

// Thrown for an unknown run or sweep id, an empty run list, an unreadable store or an output that
// cannot be written; what() is one line, ready for the user.
class ExportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Chrome Trace Event JSON (object form). One process per run, named by run_title(); one track per
// stream ("compute", "copy (side stream)", "stream N") plus a "phases" track for steps, forward and
// backward; copies and compute as complete events, packs and unpacks as instants, waits on the
// compute track, stash occupancy and device bytes as counters. Device work carries the fields
// PyTorch's profiler writes (categories kernel / gpu_memcpy / cuda_runtime, args device, stream
// and correlation, "Memcpy DtoH (Device -> Pinned)" names, ProfilerStep#N spans), so Holistic
// Trace Analysis reads it as a profiler trace. Times are microseconds from the
// run's first event, with nanosecond digits. Runs are exported in the order given; a repeated id
// once. Events are written as they are read, one run at a time, so a large run is never held twice.
void export_chrome_trace(Store& store, const std::vector<RunId>& runs, const std::string& path);

// An SQLite file shaped like Nsight Systems' export (schema 3.28.1, every table's columns in
// Nsight's order): StringIds, CUPTI_ACTIVITY_KIND_MEMCPY (offload and reload copies),
// CUPTI_ACTIVITY_KIND_KERNEL (compute spans), CUPTI_ACTIVITY_KIND_RUNTIME (a launch call per kernel
// and copy, same correlationId, on the run's thread), NVTX_EVENTS (steps, phases and waits as
// push/pop ranges, packs and unpacks as marks; text inline and in StringIds), the ENUM_* tables
// with Nsight's numbering, PROCESSES, TARGET_INFO_GPU / _CUDA_DEVICE / _CUDA_STREAM /
// _CUDA_CONTEXT_INFO, ProcessStreams and META_DATA_EXPORT; every other table a real export of a
// CUDA + NVTX + OS-runtime capture carries, empty. One globalPid per run; times are nanoseconds
// from the run's first event.
// Readers of real exports (nsys-tui, nsys's report scripts) read it; the Nsight GUI does not.
void export_nsys_sqlite(Store& store, const std::vector<RunId>& runs, const std::string& path);

// A run's memory history (`offtune run --memory-history`) as a memory snapshot: the pickle
// torch.cuda.memory._snapshot() writes (segments with their blocks where the history ends, one
// device trace of alloc / free_requested / free_completed / segment_* / oom entries, and
// "annotate" entries where the engine offloaded a block's tensor or filled a reload buffer), with
// offtune's note on each block as its frame and user_metadata. PyTorch's memory visualiser opens
// it: pytorch.org/memory_viz, or `python -m torch.cuda._memory_viz trace_plot|segment_plot`.
// A run without a history is an ExportError that says how to record one.
void export_memory_snapshot(Store& store, RunId run, const std::string& path);

// The points of a sweep as CSV (RFC 4180: comma-separated, CRLF line ends, fields with a comma,
// quote or line break quoted with quotes doubled), one row per point in index order, under the
// header points_csv_header(). Each knob's value as its kind reads (true/false, the number in
// bytes, the name), empty where it means nothing (an offload-only knob at a point that does not
// offload). Measurements are empty for points that have none (pending, failed).
void export_points_csv(Store& store, SweepId sweep, const std::string& path);

// "index,status," then every knob's key in the knob table's order, then "run,step_ms_median,
// step_ms_stddev,step_ms_min,step_ms_max,step_ms_ci_low,step_ms_ci_high,step_ms_ci_level,
// peak_allocated,peak_reserved,device_outside,peak_device_total,pinned_bytes,host_bytes_peak,
// host_rss_peak,offloaded_bytes,reloaded_bytes,pageable_copies,hidden_copy_pct,hidden_d2h_pct,
// hidden_h2d_pct,exposed_copy_ns,final_loss,predicted_step_ms,predicted_peak_allocated,
// predicted_offloaded_bytes,predicted_hidden_copy_pct,predictor,error": every figure the store
// keeps of a point, named as RunSummary's fields (docs/export.md, docs/metrics.md).
std::string points_csv_header();

// The file an export is written to when none is given (`offtune export` without -o, the
// dashboard's save dialogs), named after what it holds so that exports of different runs do not
// take each other's place. `extension` with its dot (".json", ".json.gz", ".sqlite", ".pickle"):
//   one run: "offtune-run3.json", or "offtune-run3-sweep2-point5.json" for a run that measured a
//   sweep's point; several: "offtune-runs3-7.json" (the lowest and the highest id).
std::string default_trace_name(Store& store, const std::vector<RunId>& runs,
                               std::string_view extension);
// The same name where the caller knows the point a single run measured (null: none).
std::string default_trace_name(const std::vector<RunId>& runs, const PointRecord* point,
                               std::string_view extension);
// A sweep's points: "offtune-sweep2-points.csv".
std::string default_points_name(SweepId sweep);

// The engine settings in a few words, for titles and legends (the knob table's words):
// "no offload" (with what else the point does: "no offload, checkpoint all"), or "offload, "
// and the figures every offloading config has ("min_offload_size 1 KiB, window 5, prefetch 1")
// followed by what differs from the defaults ("window bytes 64 MiB", "single stream",
// "pageable", "link pcie4", "checkpoint all", "verify").
std::string describe_config(const EngineConfig& config);

// "run <id>: <model> <describe_config>", the name a run's process gets in both trace formats.
std::string run_title(const RunRecord& run);

// A script sweep's command, from its key (sweep_key); "" for a sweep of a built-in workload.
std::string sweep_script(const SweepRecord& sweep);
// A sweep's workload in a few words, for headings: "small, batch 4, seq 512, fp32"; a script
// sweep's is its command, "script 'python train.py'" (the script chooses the model and its
// shapes, which the sweep does not know).
std::string describe_workload(const SweepRecord& sweep);

namespace detail {

// The file an export writes before it is complete, and where it goes (see the top of this file).
// The constructor checks the target and throws ExportError for one that must not be written;
// `store_path` is the file of the store being exported ("" for none). The temporary is in the
// target's directory for a file (so that the final rename stays on one file system and is atomic)
// and in the system's temporary directory for a stream; it is removed on destruction unless
// commit() put it in place.
class PendingFile {
 public:
  explicit PendingFile(std::string target, const std::string& store_path = {});
  ~PendingFile();
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;

  const std::string& path() const { return temp_; }
  const std::string& target() const { return target_; }
  // Renames the temporary onto the target, or copies it into the stream. Throws ExportError (and
  // removes the temporary) on failure: a stream that cannot take every byte (/dev/full) is one.
  void commit();

 private:
  enum class Mode { File, Stdout, Stream };
  std::string target_;  // as given, for messages
  std::string dest_;    // what is renamed onto or opened: symbolic links resolved
  std::string temp_;
  Mode mode_ = Mode::File;
  bool committed_ = false;
};

// The records of `runs` in order, without repeats. Throws ExportError for an empty list, an unknown
// id, or a store error.
std::vector<RunRecord> load_runs(Store& store, const std::vector<RunId>& runs);

}  // namespace detail

}  // namespace offtune::profiler
