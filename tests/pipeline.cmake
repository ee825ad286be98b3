# The job pipeline: offset tracking (unit), and Kafka -> PostgreSQL end to end (integration).
reclass_add_test(NAME test_offsets SOURCES ${CMAKE_SOURCE_DIR}/tests/test_offsets.c LABELS unit)
reclass_add_test(NAME test_pipeline_mock SOURCES ${CMAKE_SOURCE_DIR}/tests/test_pipeline_mock.c
                 LABELS integration)
set_tests_properties(test_pipeline_mock PROPERTIES TIMEOUT 300)
