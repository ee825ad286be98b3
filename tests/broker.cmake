# The integration tests' Kafka side: kafka_tool (create topics, produce raw records, read the
# dead-letter topic; through reclass's own librdkafka, so it talks to every broker reclass
# does), and the pipeline's shell cases against a real broker, Tansu (tests/lib/services.sh
# fetches it from PyPI into tansu/ of the build directory; without it these tests skip).
add_executable(kafka_tool ${CMAKE_SOURCE_DIR}/tests/tools/kafka_tool.c)
target_link_libraries(kafka_tool PRIVATE reclass_core)
# tests/integration/lib.sh looks for it here when RECLASS_KAFKA_TOOL is not set
set_target_properties(kafka_tool PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

set(RECLASS_IT_ENV "RECLASS_KAFKA_TOOL=$<TARGET_FILE:kafka_tool>"
    "RECLASS_TANSU_DIR=${CMAKE_BINARY_DIR}/tansu")
# two workers of one group, the second joining mid-job (the dev broker; Tansu below)
add_test(NAME it_run_rebalance
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/run_rebalance.sh $<TARGET_FILE:reclass>)
set_tests_properties(it_run_rebalance PROPERTIES LABELS integration TIMEOUT 300
                     ENVIRONMENT "${RECLASS_IT_ENV}")
foreach(t run_exactly_n run_crash run_poison run_rebalance run_schema_registry run_submit_limit
          run_kafka_tls run_lanes)
  add_test(NAME it_${t}_tansu
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/${t}.sh $<TARGET_FILE:reclass>)
  set_tests_properties(it_${t}_tansu PROPERTIES LABELS "integration;tansu" TIMEOUT 300
                       SKIP_RETURN_CODE 77 ENVIRONMENT "IT_BROKER=tansu;${RECLASS_IT_ENV}")
endforeach()
