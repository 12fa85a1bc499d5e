// `offtune` as a function (offtune/cli/command_line.hpp): run a workload under the offload engine
// and record it, sweep min_offload_size x max_fwd_stash_size, predict a grid from one recorded
// step, recommend settings, report, export
// timelines, merge sharded stores. Headless
// and CI-friendly: progress on a terminal only, --quiet, --json, documented exit codes. Each
// command is a file of its own (run.cpp, sweep.cpp, ...); requests are checked and run by
// offtune::requests, the layer the dashboard shares.
//
// Exit status (every refusal is exactly one line on stderr that starts with `error: `):
//   0  success
//   1  the work failed (a run failed or ran out of memory; an export could not be written)
//   2  bad command line or input (unknown flag, bad size or grid, unknown model, a model that
//      cannot be built as asked); also no command at all, which prints the usage. Only a value
//      the user gave earns it (requests::UsageError, profiler::ParseError, OptionsError): a fault
//      inside the work on valid input is 1
//   3  the store cannot be used (not an offtune store, corrupt, newer schema, disk full, locked)
//   4  a --fail-if threshold was crossed, or could not be checked (a sweep without a recommended
//      point)
//   5  recommend found no point satisfying the constraint
//   130 interrupted (SIGINT); a sweep resumes where it stopped when run again
#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "offtune/cli/command_line.hpp"
#include "offtune/options.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/request.hpp"
#include "offtune/version.hpp"

namespace offtune::cli {
namespace {

// CLI11's messages may span lines; a refusal is one line.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

int parse_and_run(int argc, char** argv) {
  CLI::App app{"offtune: measure and tune activation offloading", "offtune"};
  app.set_version_flag("--version", "offtune " + std::string(kVersion),
                       "print the version and exit");
  app.require_subcommand(1);
  std::vector<std::unique_ptr<Command>> commands;
  commands.push_back(add_run_command(app));
  commands.push_back(add_sweep_command(app));
  commands.push_back(add_predict_command(app));
  commands.push_back(add_recommend_command(app));
  commands.push_back(add_report_command(app));
  commands.push_back(add_export_command(app));
  commands.push_back(add_merge_command(app));
  commands.push_back(add_calibrate_command(app));
  add_value_rules(app);
  if (argc <= 1) {
    std::cerr << app.help();
    return kUsage;
  }
  // A first word that names no command (CLI11 would say "A subcommand is required", and print the
  // top-level help with exit 0 for `offtune frobnicate --help`).
  if (const std::string first = argv[1]; !first.empty() && first[0] != '-') {
    std::string valid;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      known = known || sub->get_name() == first;
      valid += (valid.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::cerr << "error: unknown command '" << first << "' (valid: " << valid << ")\n";
      return kUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string where = "offtune";
    for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
    std::string message = one_line(e.what());
    // CLI11's words for a flag given twice ("--steps: At Most 1 required but received 2").
    if (const auto at = message.find(": At Most 1 required but received ");
        at != std::string::npos) {
      message = message.substr(0, at) + ": given more than once (give it once)";
    }
    std::cerr << "error: " << message << " (see " << where << " --help)\n";
    return kUsage;
  }
  for (const auto& command : commands) {
    if (command->parsed()) return command->run();
  }
  return kUsage;
}

}  // namespace
}  // namespace offtune::cli

namespace offtune::cli {

bool request_stop() noexcept { return g_cancel.exchange(true); }

int exit_status_of(std::exception_ptr error, std::ostream& err) {
  try {
    std::rethrow_exception(error);
  } catch (const offtune::requests::RequestError& e) {
    // Every bad field, on the one line.
    std::string line;
    for (const auto& field : e.errors()) line += (line.empty() ? "" : "; ") + field.message;
    err << "error: " << line << "\n";
    return kUsage;
  } catch (const offtune::profiler::StoreError& e) {
    err << "error: " << e.what() << "\n";
    return kStore;
  } catch (const c10::Error& e) {
    err << "error: " << e.what_without_backtrace() << "\n";
    return kFailed;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    // Anything but the user's input, a std::invalid_argument thrown deep in a model or the
    // predictor included, is a fault of the work on valid input: the work failed, the command
    // line was fine.
    return offtune::requests::is_refused_input(e) ? kUsage : kFailed;
  }
}

int run_command_line(int argc, char** argv) {
  try {
    return parse_and_run(argc, argv);
  } catch (...) {
    return exit_status_of(std::current_exception(), std::cerr);
  }
}

}  // namespace offtune::cli
