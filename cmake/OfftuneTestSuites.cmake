# offtune_discover_suites(TARGET [TIMEOUT seconds] [ENVIRONMENT var=value...])
#
# Like gtest_discover_tests, but one ctest test per GoogleTest *suite* (`Suite` runs
# `--gtest_filter=Suite.*`), not per test. Every test executable loads libtorch (CUDA build),
# which costs about 0.7 s per process, 2 s under ASan: one process per test made that load most
# of the suite's time. A failure still names the test: ctest shows the suite's output, where
# GoogleTest lists every failed test with its message (ctest --output-on-failure).
#
# A suite whose every test skipped (no GPU) is reported as skipped: its main() exits 77
# (tests/support/suite_exit.hpp). Not a regular expression on the output: a suite whose every test
# failed prints the same "0 tests passed" line, and would read as skipped.
set(_OFFTUNE_SUITES_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/OfftuneListSuites.cmake")

function(offtune_discover_suites target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TIMEOUT" "ENVIRONMENT")
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 600)
  endif()
  set(ctest_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake")
  # After every link: list the suites and write the tests (the list changes with the sources).
  add_custom_command(
    TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}" -D "EXECUTABLE=$<TARGET_FILE:${target}>" -D "OUTPUT=${ctest_file}"
            -D "TIMEOUT=${arg_TIMEOUT}" -D "ENVIRONMENT=${arg_ENVIRONMENT}"
            -P "${_OFFTUNE_SUITES_SCRIPT}"
    BYPRODUCTS "${ctest_file}"
    VERBATIM)
  file(WRITE "${include_file}"
       "if(EXISTS \"${ctest_file}\")\n"
       "  include(\"${ctest_file}\")\n"
       "else()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
