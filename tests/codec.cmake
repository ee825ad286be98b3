# Ticket codec, CSV reader, submit and dev-broker.
reclass_add_test(NAME test_codec SOURCES ${CMAKE_SOURCE_DIR}/tests/test_codec.c LABELS unit)
reclass_add_test(NAME test_csv SOURCES ${CMAKE_SOURCE_DIR}/tests/test_csv.c LABELS unit)
# secrets in messages (common/redact.c)
reclass_add_test(NAME test_redact SOURCES ${CMAKE_SOURCE_DIR}/tests/test_redact.c LABELS unit)
reclass_add_test(NAME test_codec_submit SOURCES ${CMAKE_SOURCE_DIR}/tests/test_codec_submit.c LABELS integration)
set_tests_properties(test_codec_submit PROPERTIES TIMEOUT 120)
# dev-broker's partition log bound (needs the vendored librdkafka's mock patch; a system
# librdkafka build checks that the flags are refused) and the librdkafka version gate.
reclass_add_test(NAME test_dev_broker SOURCES ${CMAKE_SOURCE_DIR}/tests/test_dev_broker.c LABELS integration)
set_tests_properties(test_dev_broker PROPERTIES TIMEOUT 120)

# submit's file readers: records, the end and files to fix as the one status enum
reclass_add_test(NAME test_submit_input SOURCES ${CMAKE_SOURCE_DIR}/tests/test_submit_input.c LABELS unit)
