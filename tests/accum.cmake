# The length-sorting accumulator (worker/accum.c) and the classify/bench CLI.
reclass_add_test(NAME test_accum SOURCES ${CMAKE_SOURCE_DIR}/tests/test_accum.c LABELS unit)
