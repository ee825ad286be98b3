# Fuzz targets (tests/fuzz/fuzz_<name>.c, one parser each). Every build replays each target's
# seed corpus and its kept crashers (tests/fuzz/corpus/<name>, tests/fuzz/regressions/<name>)
# through a plain main() as a unit test; -DRECLASS_FUZZ=ON with clang also builds the
# libFuzzer binaries fuzz_<name> that tests/fuzz/run.sh runs.
set(RECLASS_FUZZ_TARGETS codec submit_csv submit_jsonl tokenizer tokenizer_json model_config
    safetensors)
foreach(t ${RECLASS_FUZZ_TARGETS})
  set(src ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_${t}.c)
  add_executable(fuzz_replay_${t} ${src} ${CMAKE_SOURCE_DIR}/tests/fuzz/replay.c)
  target_link_libraries(fuzz_replay_${t} PRIVATE reclass_core)
  add_test(NAME fuzz_${t}
           COMMAND fuzz_replay_${t} ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${t}
                   ${CMAKE_SOURCE_DIR}/tests/fuzz/regressions/${t})
  set_tests_properties(fuzz_${t} PROPERTIES LABELS unit TIMEOUT 120)
  if(RECLASS_FUZZ)
    add_executable(fuzz_${t} ${src})
    target_link_libraries(fuzz_${t} PRIVATE reclass_core)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
  endif()
endforeach()
