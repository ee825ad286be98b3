# Observability of reclass run: drift buffers and metrics rendering/HTTP (unit), and the
# endpoints + telemetry tables end to end (integration).
reclass_add_test(NAME test_drift SOURCES ${CMAKE_SOURCE_DIR}/tests/test_drift.c LABELS unit)
reclass_add_test(NAME test_metrics SOURCES ${CMAKE_SOURCE_DIR}/tests/test_metrics.c LABELS unit)
add_test(NAME it_run_observability
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/run_observability.sh $<TARGET_FILE:reclass>)
set_tests_properties(it_run_observability PROPERTIES LABELS integration TIMEOUT 300)
