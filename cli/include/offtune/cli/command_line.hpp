// The `offtune` command as a function: what `main` runs, callable in-process so that tests can
// drive every command with thousands of command lines without starting a process for each (each
// process would load libtorch).
#pragma once

#include <exception>
#include <iosfwd>

namespace offtune::cli {

// Parses argv, runs the command and returns the exit status documented in `offtune --help` and
// docs/cli.md (0 ok, 1 failed, 2 usage, 3 store, 4 threshold, 5 no choice, 130 interrupted). Every
// refusal writes exactly one line to stderr, starting with "error: ". Does not install signal
// handlers: main() does.
int run_command_line(int argc, char** argv);

// The exit status of a command that ended by `error` (run_command_line's own mapping), after
// writing its one `error: ` line to `err`: 2 for a value from the user, refused
// (requests::UsageError, RequestError included; profiler::ParseError; OptionsError), 3 for a
// store that cannot be used (profiler::StoreError), 1 for anything else: a std::invalid_argument
// thrown deep in a model or the predictor on valid input is a fault of the work, not bad input.
int exit_status_of(std::exception_ptr error, std::ostream& err);

// Asks a running sweep to stop after the point in progress (its exit status is then 130). Returns
// whether that had been asked already: a second Ctrl-C, on which main() exits at once. Safe in a
// signal handler.
bool request_stop() noexcept;

// Kills (SIGKILL) the process group of a script sweep's point in progress, if any: for main() to
// call before it exits at once, since that group does not get the terminal's Ctrl-C. Safe in a
// signal handler.
void kill_running_script() noexcept;

}  // namespace offtune::cli
