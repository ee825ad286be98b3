# The length-sorting accumulator (worker/pipeline/accum.c) and the classify/bench CLI.
reclass_add_test(NAME test_accum SOURCES ${CMAKE_SOURCE_DIR}/tests/test_accum.c LABELS unit)
# Its property tests against a model (seeded random operations).
reclass_add_test(NAME test_accum_property SOURCES ${CMAKE_SOURCE_DIR}/tests/test_accum_property.c
  LABELS unit)
add_test(NAME test_classify_cli
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_classify.sh $<TARGET_FILE:reclass>)
set_tests_properties(test_classify_cli PROPERTIES LABELS unit TIMEOUT 600)
# The classification engine's results: softmax, top-k, JSON (worker/classify/result.c).
reclass_add_test(NAME test_classify_result SOURCES ${CMAKE_SOURCE_DIR}/tests/test_classify_result.c LABELS unit)
reclass_add_test(NAME test_classify_engine SOURCES ${CMAKE_SOURCE_DIR}/tests/test_classify_engine.c LABELS unit)
reclass_add_test(NAME test_accum_workload SOURCES ${CMAKE_SOURCE_DIR}/tests/test_accum_workload.c LABELS unit)
# Lanes and tenants' fair shares over the accumulator (worker/pipeline/fair.c).
reclass_add_test(NAME test_fair SOURCES ${CMAKE_SOURCE_DIR}/tests/test_fair.c LABELS unit)
