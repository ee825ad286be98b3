# The job pipeline: offset tracking (unit), and Kafka -> PostgreSQL end to end (integration).
# The pipeline's worker pool (worker/pipeline/pool.c).
reclass_add_test(NAME test_pool SOURCES ${CMAKE_SOURCE_DIR}/tests/test_pool.c LABELS unit)
reclass_add_test(NAME test_offsets SOURCES ${CMAKE_SOURCE_DIR}/tests/test_offsets.c LABELS unit)
reclass_add_test(NAME test_pipeline_mock SOURCES ${CMAKE_SOURCE_DIR}/tests/test_pipeline_mock.c
                 ${CMAKE_SOURCE_DIR}/tests/lib/pipe_mock.c LABELS integration)
set_tests_properties(test_pipeline_mock PROPERTIES TIMEOUT 300)
# Two encoders in one worker (--encoders 2) over the one accumulator, and an encoder whose
# backend fails (a test double: the cpu table wrapped at link time) handing its batches back.
reclass_add_test(NAME test_pipeline_encoders
                 SOURCES ${CMAKE_SOURCE_DIR}/tests/test_pipeline_encoders.c
                 ${CMAKE_SOURCE_DIR}/tests/lib/pipe_mock.c LABELS integration)
target_link_options(test_pipeline_encoders PRIVATE -Wl,--wrap=gpu_backend_find)
set_tests_properties(test_pipeline_encoders PROPERTIES TIMEOUT 300)
# An urgent batch passes a bulk backlog queued for a stalled result writer (not timed).
reclass_add_test(NAME test_pipeline_lanes SOURCES ${CMAKE_SOURCE_DIR}/tests/test_pipeline_lanes.c
                 ${CMAKE_SOURCE_DIR}/tests/lib/pipe_mock.c LABELS integration)
set_tests_properties(test_pipeline_lanes PROPERTIES TIMEOUT 300)
# Shell-driven end-to-end tests: reclass dev-broker + submit + migrate + run, own PostgreSQL.
foreach(t run_exactly_n run_crash run_pg_restart run_poison run_join_timeout
          run_submit_retention run_submit_limit run_kafka_guard run_pg_tls run_stop_db_down run_vs_classify run_drift run_families run_lanes
          run_fair run_job_failures run_group_exit run_priority run_tenants run_encoders)
  add_test(NAME it_${t} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/${t}.sh $<TARGET_FILE:reclass>)
  set_tests_properties(it_${t} PROPERTIES LABELS integration TIMEOUT 300)
endforeach()
add_test(NAME it_run_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/run_cli.sh $<TARGET_FILE:reclass>)
set_tests_properties(it_run_cli PROPERTIES LABELS unit TIMEOUT 60)
# The dead-letter producer's retry and truncation policy, against the mock cluster.
reclass_add_test(NAME test_dlq SOURCES ${CMAKE_SOURCE_DIR}/tests/test_dlq.c LABELS unit)
set_tests_properties(test_dlq PROPERTIES TIMEOUT 120)
add_test(NAME it_run_drift_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/run_drift_cli.sh $<TARGET_FILE:reclass>)
set_tests_properties(it_run_drift_cli PROPERTIES LABELS unit TIMEOUT 60)
# reclass jobs: the list, show, --json and a terminal capture of --watch during a job.
add_test(NAME it_run_jobs COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/run_jobs.sh $<TARGET_FILE:reclass>)
set_tests_properties(it_run_jobs PROPERTIES LABELS integration TIMEOUT 300)
# Schema Registry: confluent-kafka's AvroSerializer, submit --schema-registry, an outage
# mid-job (nothing lost, nothing dead-lettered), an unknown id dead-lettered (Tansu: broker.cmake)
add_test(NAME it_run_schema_registry
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/run_schema_registry.sh $<TARGET_FILE:reclass>)
set_tests_properties(it_run_schema_registry PROPERTIES LABELS integration TIMEOUT 300
                     SKIP_RETURN_CODE 77)
# the registry over TLS (stunnel, a throwaway CA): the right CA works, another one is refused
add_test(NAME it_run_registry_tls
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/run_registry_tls.sh $<TARGET_FILE:reclass>)
set_tests_properties(it_run_registry_tls PROPERTIES LABELS integration TIMEOUT 120)
# The consumer's lanes (holds, tracks, lane queues) against the mock cluster.
reclass_add_test(NAME test_consumer_lanes SOURCES ${CMAKE_SOURCE_DIR}/tests/test_consumer_lanes.c
                 LABELS unit)
set_tests_properties(test_consumer_lanes PROPERTIES TIMEOUT 120)
