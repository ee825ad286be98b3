# Ticket codec, CSV reader, submit and dev-broker (owner: codec/deploy helper).
reclass_add_test(NAME test_codec SOURCES ${CMAKE_SOURCE_DIR}/tests/test_codec.c LABELS unit)
reclass_add_test(NAME test_csv SOURCES ${CMAKE_SOURCE_DIR}/tests/test_csv.c LABELS unit)
