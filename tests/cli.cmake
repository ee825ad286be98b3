# The command line (worker/cli/): every exit code class (common/status.h -> main.c).
add_test(NAME test_cli_status
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_cli_status.sh $<TARGET_FILE:reclass>)
set_tests_properties(test_cli_status PROPERTIES LABELS unit)

# Every option default written once, in its table row, and what --help and README print.
add_test(NAME test_cli_defaults
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_cli_defaults.sh $<TARGET_FILE:reclass>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(test_cli_defaults PROPERTIES LABELS unit)

# common/status.h -> the one exit-code mapping, and common_err_t (common/err.h)
reclass_add_test(NAME test_common_err SOURCES ${CMAKE_SOURCE_DIR}/tests/test_common_err.c LABELS unit)

# Each default --help prints equals the value parsing leaves (run's rows and the shared ones).
reclass_add_test(NAME test_cli_settings SOURCES ${CMAKE_SOURCE_DIR}/tests/test_cli_settings.c LABELS unit)
