# Run by offtune_discover_suites after a test executable is linked:
#   cmake -D EXECUTABLE=... -D OUTPUT=... -D TIMEOUT=... [-D ENVIRONMENT=a=b;c=d] -P this file
# Lists the executable's GoogleTest suites and writes OUTPUT: one add_test per suite.
execute_process(
  COMMAND "${EXECUTABLE}" --gtest_list_tests
  RESULT_VARIABLE result
  OUTPUT_VARIABLE listing
  ERROR_VARIABLE errors
  TIMEOUT 120)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "could not list the tests of ${EXECUTABLE} (exit ${result}):\n${errors}")
endif()

# The listing: a suite line "Suite." (maybe "  # TypeParam = ..." after it), then its tests, each
# indented by two spaces.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.( .*)?$")
    list(APPEND suites "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES suites)
if(NOT suites)
  message(FATAL_ERROR "${EXECUTABLE} lists no GoogleTest suite")
endif()

set(content "# Written by OfftuneListSuites.cmake from ${EXECUTABLE} --gtest_list_tests\n")
foreach(suite IN LISTS suites)
  string(APPEND content
         "add_test([=[${suite}]=] [=[${EXECUTABLE}]=] [=[--gtest_filter=${suite}.*]=])\n"
         "set_tests_properties([=[${suite}]=] PROPERTIES TIMEOUT ${TIMEOUT}"
         " SKIP_RETURN_CODE 77")
  if(ENVIRONMENT)
    string(APPEND content " ENVIRONMENT [=[${ENVIRONMENT}]=]")
  endif()
  string(APPEND content ")\n")
endforeach()
file(WRITE "${OUTPUT}" "${content}")
