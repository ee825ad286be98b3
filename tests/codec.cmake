# Ticket codec, CSV reader, submit and dev-broker (owner: codec/deploy helper).
reclass_add_test(NAME test_codec SOURCES ${CMAKE_SOURCE_DIR}/tests/test_codec.c LABELS unit)
reclass_add_test(NAME test_csv SOURCES ${CMAKE_SOURCE_DIR}/tests/test_csv.c LABELS unit)
reclass_add_test(NAME test_codec_submit SOURCES ${CMAKE_SOURCE_DIR}/tests/test_codec_submit.c LABELS integration)
set_tests_properties(test_codec_submit PROPERTIES TIMEOUT 120)
