# The CUDA backend's tests. test_gpu_plan runs everywhere (no GPU); the others need a GPU
# and report SKIPPED (exit 77) where there is none or the build has no CUDA.
reclass_add_test(NAME test_gpu_plan SOURCES ${CMAKE_SOURCE_DIR}/tests/test_gpu_plan.c LABELS unit)

# Single kernels behind plain C calls (tests/lib/cuda_test_api.h), for the GPU tests and
# gpu_bench only: the product (reclass, reclass_core) does not contain it.
if(RECLASS_HAVE_CUDA)
  add_library(reclass_cuda_test STATIC ${CMAKE_SOURCE_DIR}/tests/lib/cuda_test_api.cu
    ${CMAKE_SOURCE_DIR}/tests/lib/cuda_test_fp8.cu
    ${CMAKE_SOURCE_DIR}/tests/lib/cuda_test_modern.cu)
  target_link_libraries(reclass_cuda_test PUBLIC reclass_test_lib reclass_core)
  set_target_properties(reclass_cuda_test PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  target_compile_options(reclass_cuda_test PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-O3 --use_fast_math -lineinfo>)
  set(RECLASS_CUDA_TEST_LIB reclass_cuda_test)
endif()

# test_gpu_fp8: the FP8 kernels against the CPU FP8 reference (gpu/model/fp8.h).
foreach(t test_gpu_kernels test_gpu_golden test_gpu_memory test_gpu_fp8)
  reclass_add_test(NAME ${t} SOURCES ${CMAKE_SOURCE_DIR}/tests/${t}.c LABELS gpu)
  target_link_libraries(${t} PRIVATE ${RECLASS_CUDA_TEST_LIB})
  set_tests_properties(${t} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endforeach()
foreach(t test_gpu_golden test_gpu_fp8)
  target_sources(${t} PRIVATE ${CMAKE_SOURCE_DIR}/tests/lib/family_golden.c)
endforeach()

# gpu_bench: throughput, GEMM ceiling and phase breakdown on tickets-mix (device_run.sh).
add_executable(gpu_bench ${CMAKE_SOURCE_DIR}/tests/test_gpu_bench.c
  ${CMAKE_SOURCE_DIR}/tests/bench/gpu_energy.c)
target_link_libraries(gpu_bench PRIVATE ${RECLASS_CUDA_TEST_LIB} reclass_core)

# Two encoders on one GPU (reclass run --encoders 2 --backend cuda): exact after SIGKILL and a
# restart, each encoder's arena flat (tests/integration/run_encoders.sh).
if(RECLASS_HAVE_CUDA)
  add_test(NAME it_run_encoders_cuda
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/run_encoders.sh $<TARGET_FILE:reclass> cuda)
  set_tests_properties(it_run_encoders_cuda PROPERTIES LABELS gpu TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
