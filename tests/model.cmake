# Checkpoint loader, safetensors reader, reference ops and the fp32 CPU backend.
reclass_add_test(NAME test_cpu_golden SOURCES ${CMAKE_SOURCE_DIR}/tests/test_cpu_golden.c LABELS unit)
reclass_add_test(NAME test_cpu_kernels SOURCES ${CMAKE_SOURCE_DIR}/tests/test_cpu_kernels.c LABELS unit)
reclass_add_test(NAME test_model_load SOURCES ${CMAKE_SOURCE_DIR}/tests/test_model_load.c LABELS unit)

# Timing harness for the CPU backend (not a test): build/cpu_micro [model] [golden] [threads]
# [reps] [budgets...]
add_executable(cpu_micro ${CMAKE_SOURCE_DIR}/tests/bench/cpu_micro.c)
target_link_libraries(cpu_micro PRIVATE reclass_core)
target_compile_definitions(cpu_micro PRIVATE RECLASS_FIXTURES="${RECLASS_FIXTURES}"
  RECLASS_DEMO_MODEL="${RECLASS_DEMO_MODEL}")

# Every other family's fixture classifier against its Hugging Face goldens (tests/lib/).
reclass_add_test(NAME test_cpu_families SOURCES ${CMAKE_SOURCE_DIR}/tests/test_cpu_families.c
  ${CMAKE_SOURCE_DIR}/tests/lib/family_golden.c LABELS unit)

# ModernBERT and DeBERTa-v3 fixtures against their Hugging Face goldens, configs and buckets.
reclass_add_test(NAME test_cpu_modern SOURCES ${CMAKE_SOURCE_DIR}/tests/test_cpu_modern.c
  ${CMAKE_SOURCE_DIR}/tests/lib/family_golden.c LABELS unit)

# The reduced-precision agreement gate (agreement, max |delta logit|, flips on thin margins only).
reclass_add_test(NAME test_golden_gate SOURCES ${CMAKE_SOURCE_DIR}/tests/test_golden_gate.c
  ${CMAKE_SOURCE_DIR}/tests/lib/family_golden.c LABELS unit)
