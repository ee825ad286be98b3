# PostgreSQL sink and migrations. Integration tests start their own
# throwaway server (tests/lib/pg_tmp.sh) through a shell wrapper that always stops it.
reclass_add_test(NAME test_sink_unit SOURCES ${CMAKE_SOURCE_DIR}/tests/test_sink_unit.c
                 LABELS unit)
add_executable(test_sink ${CMAKE_SOURCE_DIR}/tests/test_sink.c)
target_link_libraries(test_sink PRIVATE reclass_test_lib reclass_core PkgConfig::CMOCKA)
add_test(NAME test_sink COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_sink.sh $<TARGET_FILE:test_sink>)
set_tests_properties(test_sink PROPERTIES LABELS integration TIMEOUT 300)
# A job's total fixed once, its dead letters counted (migrations/008_job_failures.sql).
add_executable(test_sink_jobs ${CMAKE_SOURCE_DIR}/tests/test_sink_jobs.c)
target_link_libraries(test_sink_jobs PRIVATE reclass_test_lib reclass_core PkgConfig::CMOCKA)
add_test(NAME test_sink_jobs COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_sink.sh $<TARGET_FILE:test_sink_jobs>)
set_tests_properties(test_sink_jobs PROPERTIES LABELS integration TIMEOUT 120)

# Sink throughput benchmark: not a test (it writes 500k rows); run by hand, see
# tests/bench/RESULTS-sink.md.
add_executable(sink_bench ${CMAKE_SOURCE_DIR}/tests/bench/sink_bench.c)
target_link_libraries(sink_bench PRIVATE reclass_test_lib reclass_core)

add_test(NAME test_migrate COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_migrate.sh $<TARGET_FILE:reclass>)
set_tests_properties(test_migrate PROPERTIES LABELS integration TIMEOUT 300)


# Drift scores (migrations/004_drift.sql) against numpy/scipy on synthetic windows.
add_test(NAME test_drift_scores COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_drift_scores.sh $<TARGET_FILE:reclass>)
set_tests_properties(test_drift_scores PROPERTIES LABELS integration TIMEOUT 300)

# Migration 009 at scale: upgrade of a populated database, roll-ups, retention, and plans that
# use indexes or partition pruning (tests/test_drift_scale.sh; not timed).
add_test(NAME test_drift_scale COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_drift_scale.sh $<TARGET_FILE:reclass>)
set_tests_properties(test_drift_scale PROPERTIES LABELS integration TIMEOUT 900)
