// `offtune`: the process around offtune::cli::run_command_line (command_line.cpp has the commands
// and the exit status): SIGINT lets a sweep finish the point in progress (a script sweep stops the
// script's process group and leaves its point for a resume), a second one stops at once.
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include "offtune/cli/command_line.hpp"

namespace {

extern "C" void on_sigint(int) {
  if (offtune::cli::request_stop()) {
    // A script sweep's point in progress runs in a process group of its own, which the terminal's
    // Ctrl-C does not reach: it goes with this process.
    offtune::cli::kill_running_script();
    // Second Ctrl-C: stop now, saying so (write(2) is safe in a signal handler; stdio is not).
    static constexpr char kSaid[] =
        "\ninterrupted: stopped at once (second Ctrl-C); the run in progress is recorded as "
        "interrupted: run the same command again to resume\n";
    [[maybe_unused]] const auto n = ::write(STDERR_FILENO, kSaid, sizeof kSaid - 1);
    std::_Exit(130);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGINT, on_sigint);
  return offtune::cli::run_command_line(argc, argv);
}
