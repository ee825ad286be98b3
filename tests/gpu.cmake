# The CUDA backend's tests. test_gpu_plan runs everywhere (no GPU); the others need a GPU
# and report SKIPPED (exit 77) where there is none or the build has no CUDA.
reclass_add_test(NAME test_gpu_plan SOURCES ${CMAKE_SOURCE_DIR}/tests/test_gpu_plan.c LABELS unit)
foreach(t test_gpu_kernels test_gpu_golden test_gpu_memory)
  reclass_add_test(NAME ${t} SOURCES ${CMAKE_SOURCE_DIR}/tests/${t}.c LABELS gpu)
  set_tests_properties(${t} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endforeach()

# gpu_bench: throughput, GEMM ceiling and phase breakdown on tickets-mix (device_run.sh).
add_executable(gpu_bench ${CMAKE_SOURCE_DIR}/tests/test_gpu_bench.c
  ${CMAKE_SOURCE_DIR}/tests/bench/gpu_energy.c)
target_link_libraries(gpu_bench PRIVATE reclass_core)
