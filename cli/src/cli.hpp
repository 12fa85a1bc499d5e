// What the commands of `offtune` share: exit codes, the common flags, the mapping of flags onto the
// request layer's fields (offtune/requests), thresholds, and the points table. One file per
// command registers its flags and runs it; main.cpp dispatches and turns errors into exit codes.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "offtune/profiler/records.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/requests/request.hpp"

namespace offtune::cli {

// The names every command file uses for the profiler and for JSON output.
namespace pf = offtune::profiler;
using json = nlohmann::json;

// Exit status (docs/cli.md, "Exit status").
enum Exit { kOk = 0, kFailed = 1, kUsage = 2, kStore = 3, kThreshold = 4, kNoChoice = 5 };
inline constexpr int kInterrupted = 130;

// Set by the first SIGINT: a sweep stops after the point in progress.
extern std::atomic<bool> g_cancel;

// A bad command line that the request layer does not cover (a missing --db, an unknown --format):
// exit 2 with one `error:` line. One type with the request layer's refusals, so that exit 2 means
// the user's input and nothing else.
using requests::UsageError;

struct Common {
  std::string db;
  bool quiet = false;
  bool json = false;
};
// One rule for what a user types, attached to every option of every command by its value type:
// integers go through profiler::parse_int64/parse_uint64 before CLI11 converts them (CLI11 2.1
// clamps or wraps an out-of-range integer), and no option takes an empty value.
void add_value_rules(CLI::App& app);
bool show_progress(const Common& common);
std::unique_ptr<profiler::Store> open_store(const Common& common, bool write);

// The flags of a run's or sweep's workload and backend, onto the request's fields (their defaults
// are the request layer's).
void add_workload_flags(CLI::App& sub, requests::WorkloadFields& workload,
                        requests::BackendFields& backend);
// A flag for every knob of the knob table (offtune/knobs.hpp) with one: each puts the text given
// into `knobs` (a run takes one value, a sweep and a prediction a list of each axis); --verify is
// a plain flag, --no-streams and --no-pin-memory are --streams off and --pin-memory off.
void add_knob_flags(CLI::App& sub, requests::KnobTexts& knobs, bool sweep);

// --fail-if METRIC>VALUE: peak>SIZE, step-ms>MS, slowdown>F (slowdown only where there is a
// baseline, i.e. for a sweep). Values are positive and finite; throws UsageError.
struct Threshold {
  std::string metric;
  double value = 0;
};
std::vector<Threshold> parse_thresholds(const std::vector<std::string>& specs, bool allow_slowdown);
// The crossed thresholds as messages.
std::vector<std::string> check_thresholds(const std::vector<Threshold>& thresholds,
                                          const profiler::RunSummary& summary, double slowdown);

// The sweep `id`, or the latest when id < 0; nullopt when there is none.
std::optional<profiler::SweepRecord> pick_sweep(profiler::Store& store, int64_t id);
// Points as a table on stdout.
// "1, 3, 9": point indices, sorted, for a line of text.
std::string join_indices(std::vector<int64_t> indices);
void print_points(const std::vector<profiler::PointRecord>& points);
// Each point's variant in words, in the points' order: describe_variant's, then the knobs that
// the sweep's offload points differ by and describe_variant leaves out (each in the knob's words).
std::vector<std::string> variant_texts(const std::vector<profiler::PointRecord>& points);

// A subcommand: registers its flags in its constructor, runs when parsed.
class Command {
 public:
  virtual ~Command() = default;
  virtual int run() = 0;
  bool parsed() const { return app_ != nullptr && app_->parsed(); }

 protected:
  CLI::App* app_ = nullptr;
};

// Whether a command records into its store (created if absent) or only reads one (must exist).
enum class StoreUse { Reads, Writes };

// A subcommand on a store (every command but predict): `offtune NAME` with --db (required),
// --quiet and --json into common_, before the command's own flags.
class StoreCommand : public Command {
 protected:
  StoreCommand(CLI::App& parent, const std::string& name, const std::string& description,
               StoreUse use);

  Common common_;
};

std::unique_ptr<Command> add_run_command(CLI::App& app);
std::unique_ptr<Command> add_sweep_command(CLI::App& app);
std::unique_ptr<Command> add_recommend_command(CLI::App& app);
std::unique_ptr<Command> add_report_command(CLI::App& app);
std::unique_ptr<Command> add_export_command(CLI::App& app);
std::unique_ptr<Command> add_merge_command(CLI::App& app);
std::unique_ptr<Command> add_calibrate_command(CLI::App& app);
std::unique_ptr<Command> add_predict_command(CLI::App& app);

}  // namespace offtune::cli
