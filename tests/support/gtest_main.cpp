// main() of the non-GUI suites: GoogleTest's, with the skipped-suite exit code (suite_exit.hpp).
#include <gtest/gtest.h>

#include "suite_exit.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return offtune::test::suite_exit(RUN_ALL_TESTS());
}
