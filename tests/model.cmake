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

# The bf16 GEMM kernels this CPU has against the fp32 references; then `reclass classify
# --precision bf16` against the Hugging Face fp32 goldens (CLINC150 >= 99.7%, the long CFPB
# narratives >= 99.5%; max |delta logit| printed).
reclass_add_test(NAME test_cpu_bf16 SOURCES ${CMAKE_SOURCE_DIR}/tests/test_cpu_bf16.c LABELS unit)
# The AMX kernel where a minimal tile probe runs (else skipped, exit 77, the reason printed).
reclass_add_test(NAME test_cpu_bf16_amx SOURCES ${CMAKE_SOURCE_DIR}/tests/test_cpu_bf16_amx.c LABELS unit)
set_tests_properties(test_cpu_bf16_amx PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME test_cpu_bf16_agreement
  COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/bf16_agreement.py $<TARGET_FILE:reclass>)
set_tests_properties(test_cpu_bf16_agreement PROPERTIES LABELS unit TIMEOUT 600)

# GEMM microbench of both precisions (not a test): build/tests/cpu_bf16_bench [m] [seconds].
# It also times oneDNN's bf16 matmul where libdnnl is installed (Debian: libdnnl-dev); only
# the bench links it, never the product.
add_executable(cpu_bf16_bench ${CMAKE_SOURCE_DIR}/tests/bench/cpu_bf16_bench.c)
target_link_libraries(cpu_bf16_bench PRIVATE reclass_core)
find_library(RECLASS_DNNL_LIB dnnl)
find_path(RECLASS_DNNL_INCLUDE dnnl.h)
if(RECLASS_DNNL_LIB AND RECLASS_DNNL_INCLUDE)
  target_compile_definitions(cpu_bf16_bench PRIVATE RECLASS_BENCH_DNNL=1)
  target_include_directories(cpu_bf16_bench PRIVATE ${RECLASS_DNNL_INCLUDE})
  target_link_libraries(cpu_bf16_bench PRIVATE ${RECLASS_DNNL_LIB})
endif()

# ModernBERT and DeBERTa-v3 fixtures against their Hugging Face goldens, configs and buckets.
reclass_add_test(NAME test_cpu_modern SOURCES ${CMAKE_SOURCE_DIR}/tests/test_cpu_modern.c
  ${CMAKE_SOURCE_DIR}/tests/lib/family_golden.c LABELS unit)

# The reduced-precision agreement gate (agreement, max |delta logit|, flips on thin margins only).
reclass_add_test(NAME test_golden_gate SOURCES ${CMAKE_SOURCE_DIR}/tests/test_golden_gate.c
  ${CMAKE_SOURCE_DIR}/tests/lib/family_golden.c LABELS unit)

# The FP8 reference (--precision fp8 on the CPU backend): E4M3 conversion (against CUDA's own
# where its headers are) and the agreement gates on the demo model against HF fp32.
reclass_add_test(NAME test_cpu_fp8 SOURCES ${CMAKE_SOURCE_DIR}/tests/test_cpu_fp8.c
  ${CMAKE_SOURCE_DIR}/tests/lib/family_golden.c LABELS unit)

# Which projections can run in FP8 (not a test): the C reference per plan against the HF fp32
# goldens, build/tests/fp8_sensitivity [--model DIR] [--sets a,b] PLAN... (gpu/NOTES-cuda.md).
add_executable(fp8_sensitivity ${CMAKE_SOURCE_DIR}/tests/bench/fp8_sensitivity.c
  ${CMAKE_SOURCE_DIR}/tests/lib/family_golden.c)
target_link_libraries(fp8_sensitivity PRIVATE reclass_test_lib reclass_core)
target_compile_definitions(fp8_sensitivity PRIVATE RECLASS_FIXTURES="${RECLASS_FIXTURES}"
  RECLASS_DEMO_MODEL="${RECLASS_DEMO_MODEL}")

# The graph's ops x precisions x backends against the reference ops (ggml's test-backend-ops):
# a backend not built or without a device prints its rows as skipped.
reclass_add_test(NAME test_graph_ops SOURCES ${CMAKE_SOURCE_DIR}/tests/test_graph_ops.c
  LABELS unit)
# Every family's graph and memory plan at every precision, without weights.
reclass_add_test(NAME test_graph_plans SOURCES ${CMAKE_SOURCE_DIR}/tests/test_graph_plans.c
  LABELS unit)

# Per-op timing through the backend table (profile_ops, reclass bench --profile-ops).
reclass_add_test(NAME test_profile_ops SOURCES ${CMAKE_SOURCE_DIR}/tests/test_profile_ops.c
  LABELS unit)
