# Checkpoint loader, safetensors reader, reference ops and the fp32 CPU backend.
reclass_add_test(NAME test_cpu_golden SOURCES ${CMAKE_SOURCE_DIR}/tests/test_cpu_golden.c LABELS unit)
