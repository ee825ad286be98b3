# The command line (worker/cli/): every exit code class (common/status.h -> main.c).
add_test(NAME test_cli_status
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_cli_status.sh $<TARGET_FILE:reclass>)
set_tests_properties(test_cli_status PROPERTIES LABELS unit)
