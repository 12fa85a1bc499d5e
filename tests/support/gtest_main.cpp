// main() of the non-GUI suites: GoogleTest's, with the skipped-suite exit code (suite_exit.hpp);
// in a child process a test started (child_process.hpp), that child's role instead.
#include <gtest/gtest.h>

#include "child_process.hpp"
#include "suite_exit.hpp"

int main(int argc, char** argv) {
  if (const int code = offtune::test::run_child_role_if_asked(argc, argv); code >= 0) return code;
  ::testing::InitGoogleTest(&argc, argv);
  return offtune::test::suite_exit(RUN_ALL_TESTS());
}
