// `offtune`: run a workload under the offload engine and record it, sweep min_offload_size x
// max_fwd_stash_size, recommend settings, report, export timelines, merge sharded stores. Headless
// and CI-friendly: progress on a terminal only, --quiet, --json, documented exit codes. Each
// command is a file of its own (run.cpp, sweep.cpp, ...); requests are checked and run by
// offtune::requests, the layer the dashboard shares.
//
// Exit status:
//   0  success
//   1  the work failed (a run failed or ran out of memory; an export could not be written)
//   2  bad command line or input (unknown flag, bad size or grid, unknown model)
//   3  the store cannot be used (not an offtune store, corrupt, newer schema, disk full, locked)
//   4  a --fail-if threshold was crossed
//   5  recommend found no point satisfying the constraint
//   130 interrupted (SIGINT); a sweep resumes where it stopped when run again
#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "offtune/options.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/request.hpp"
#include "offtune/version.hpp"

namespace offtune::cli {
namespace {

extern "C" void on_sigint(int) {
  if (g_cancel.exchange(true)) std::_Exit(kInterrupted);  // second Ctrl-C: stop now
}

int run_cli(int argc, char** argv) {
  CLI::App app{"offtune: measure and tune activation offloading"};
  app.set_version_flag("--version", "offtune " + std::string(kVersion),
                       "print the version and exit");
  app.require_subcommand(1);
  std::vector<std::unique_ptr<Command>> commands;
  commands.push_back(add_run_command(app));
  commands.push_back(add_sweep_command(app));
  commands.push_back(add_recommend_command(app));
  commands.push_back(add_report_command(app));
  commands.push_back(add_export_command(app));
  commands.push_back(add_merge_command(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kUsage;
  }
  for (const auto& command : commands) {
    if (command->parsed()) return command->run();
  }
  return kUsage;
}

}  // namespace
}  // namespace offtune::cli

int main(int argc, char** argv) {
  using namespace offtune::cli;
  std::signal(SIGINT, on_sigint);
  try {
    return run_cli(argc, argv);
  } catch (const offtune::requests::RequestError& e) {
    for (const auto& field : e.errors()) std::cerr << "error: " << field.message << "\n";
    return kUsage;
  } catch (const UsageError& e) {
    std::cerr << "error: " << e.what() << "\nhint: see offtune --help\n";
    return kUsage;
  } catch (const offtune::profiler::ParseError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kUsage;
  } catch (const offtune::profiler::StoreError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kStore;
  } catch (const offtune::OptionsError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kUsage;
  } catch (const std::invalid_argument& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kUsage;
  } catch (const c10::Error& e) {
    std::cerr << "error: " << e.what_without_backtrace() << "\n";
    return kFailed;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kFailed;
  }
}
