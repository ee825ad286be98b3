# Tokenizer (HF BertTokenizerFast parity), stdin reader, and the `reclass tokenize` CLI.
reclass_add_test(NAME test_tokenizer SOURCES ${CMAKE_SOURCE_DIR}/tests/test_tokenizer.c LABELS unit)
reclass_add_test(NAME test_input SOURCES ${CMAKE_SOURCE_DIR}/tests/test_input.c LABELS unit)
add_test(NAME test_cli_tokenize
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_cli_tokenize.sh $<TARGET_FILE:reclass>
          ${RECLASS_DEMO_MODEL})
set_tests_properties(test_cli_tokenize PROPERTIES LABELS unit)
# tokenizer.json (worker/text/hf/) against tokenizers' ids on every fixture text.
reclass_add_test(NAME test_tokenizer_json SOURCES ${CMAKE_SOURCE_DIR}/tests/test_tokenizer_json.c
                 LABELS unit)

# Tokenization speed on one core (not a test): tests/bench/tok_speed.py runs it.
add_executable(tok_speed ${CMAKE_SOURCE_DIR}/tests/bench/tok_speed.c)
target_link_libraries(tok_speed PRIVATE reclass_core)
