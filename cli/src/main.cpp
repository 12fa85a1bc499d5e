// `offtune`: the process around offtune::cli::run_command_line (command_line.cpp has the commands
// and the exit status): SIGINT lets a sweep finish the point in progress, a second one stops at
// once.
#include <csignal>
#include <cstdlib>

#include "offtune/cli/command_line.hpp"

namespace {

extern "C" void on_sigint(int) {
  if (offtune::cli::request_stop()) std::_Exit(130);  // second Ctrl-C: stop now
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGINT, on_sigint);
  return offtune::cli::run_command_line(argc, argv);
}
