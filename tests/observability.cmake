# Observability of reclass run: drift buffers and metrics rendering/HTTP (unit), and the
# endpoints + telemetry tables end to end (integration).
reclass_add_test(NAME test_drift SOURCES ${CMAKE_SOURCE_DIR}/tests/test_drift.c LABELS unit)
reclass_add_test(NAME test_metrics SOURCES ${CMAKE_SOURCE_DIR}/tests/test_metrics.c LABELS unit)
# /healthz and /readyz within 100 ms while 2,000 connections are held against the port
reclass_add_test(NAME test_http_starve SOURCES ${CMAKE_SOURCE_DIR}/tests/test_http_starve.c LABELS unit)
set_tests_properties(test_http_starve PROPERTIES TIMEOUT 60)
add_test(NAME it_run_observability
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/run_observability.sh $<TARGET_FILE:reclass>)
set_tests_properties(it_run_observability PROPERTIES LABELS integration TIMEOUT 300)
# sink/telemetry against a throwaway PostgreSQL (the sink's wrapper starts and stops it)
add_executable(test_telemetry_sink ${CMAKE_SOURCE_DIR}/tests/test_telemetry_sink.c)
target_link_libraries(test_telemetry_sink PRIVATE reclass_core PkgConfig::CMOCKA)
add_test(NAME test_telemetry_sink
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_sink.sh $<TARGET_FILE:test_telemetry_sink>)
set_tests_properties(test_telemetry_sink PROPERTIES LABELS integration TIMEOUT 300)
# reclass report's device memory section: a line and a summary row per encoder (worker/report/)
add_executable(test_report ${CMAKE_SOURCE_DIR}/tests/test_report.c)
target_link_libraries(test_report PRIVATE reclass_core PkgConfig::CMOCKA)
add_test(NAME test_report COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_sink.sh $<TARGET_FILE:test_report>)
set_tests_properties(test_report PROPERTIES LABELS integration TIMEOUT 120)
# the worker's drift scores (worker/observe/drift_score.c) equal the SQL judge's (drift_compare)
add_executable(test_drift_score ${CMAKE_SOURCE_DIR}/tests/test_drift_score.c)
target_link_libraries(test_drift_score PRIVATE reclass_core PkgConfig::CMOCKA)
add_test(NAME test_drift_score
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_sink.sh $<TARGET_FILE:test_drift_score>)
set_tests_properties(test_drift_score PROPERTIES LABELS integration TIMEOUT 300)
# deploy/prometheus/alerts.yml: each alert fires (and stays quiet) as its promtool test says,
# and a real Prometheus scrapes a running worker (Debian's prometheus package; 77 = skipped)
find_program(PROMTOOL promtool)
if(PROMTOOL)
  add_test(NAME test_alert_rules COMMAND ${PROMTOOL} test rules alerts_test.yml
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}/tests/prometheus)
  set_tests_properties(test_alert_rules PROPERTIES LABELS unit TIMEOUT 60)
endif()
add_test(NAME it_run_prometheus
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/run_prometheus.sh $<TARGET_FILE:reclass>)
set_tests_properties(it_run_prometheus PROPERTIES LABELS integration TIMEOUT 300 SKIP_RETURN_CODE 77)
# the worker's judged write of a window (sink/drift_judge.c, worker/observe/drift_judge.c,
# migration 020) over two workers' rows equals the SQL judge's on the same windows
add_executable(test_drift_judge ${CMAKE_SOURCE_DIR}/tests/test_drift_judge.c)
target_link_libraries(test_drift_judge PRIVATE reclass_core PkgConfig::CMOCKA)
add_test(NAME test_drift_judge
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_sink.sh $<TARGET_FILE:test_drift_judge>)
set_tests_properties(test_drift_judge PROPERTIES LABELS integration TIMEOUT 300)
