# Every command given nonsense answers with a named error and a documented exit code.
add_test(NAME cli_nonsense COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/nonsense.sh $<TARGET_FILE:gdunlock>)
set_tests_properties(cli_nonsense PROPERTIES LABELS unit TIMEOUT 900)
