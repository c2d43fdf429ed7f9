# scripts/test.sh's closing line and exit status over all its stages
# (check_test_verdict.sh, with stand-ins for the tools). Once: nothing in it
# is compiled, so the sanitizer builds have nothing to add.
if(NOT GDUNLOCK_SANITIZE)
  add_test(NAME test_suite_verdict COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_test_verdict.sh
                                           ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_suite_verdict PROPERTIES LABELS unit)
endif()
