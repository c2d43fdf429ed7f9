# Every command given nonsense answers with a named error and a documented exit code.
add_test(NAME cli_nonsense COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/nonsense.sh $<TARGET_FILE:gdunlock>)
set_tests_properties(cli_nonsense PROPERTIES LABELS unit TIMEOUT 900)
if(GDUNLOCK_SANITIZE)
  # verify re-executes itself with the shim preloaded, ahead of the dynamic
  # ASan runtime gcc links; ASan would refuse that order, though it works.
  set_tests_properties(cli_nonsense PROPERTIES
                       ENVIRONMENT "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=1:abort_on_error=1")
endif()
# gdunlock run ended by signals: passed on to CMD, nothing left behind.
add_test(NAME cli_run_signals COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/run_signals.sh $<TARGET_FILE:gdunlock>)
set_tests_properties(cli_run_signals PROPERTIES LABELS unit TIMEOUT 300)
add_dependencies(gdunlock gdu_shim)
if(GDUNLOCK_SANITIZE)
  set_tests_properties(cli_run_signals PROPERTIES
                       ENVIRONMENT "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
endif()
