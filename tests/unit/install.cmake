# `cmake --install` into a fresh prefix, then the installed tree used as a
# user would (check_install.sh says what is checked).
add_test(NAME test_install COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_install.sh ${CMAKE_BINARY_DIR})
set_tests_properties(test_install PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
if(GDUNLOCK_SANITIZE)
  # The installed shim and library carry the ASan runtime, which then is not
  # first in the programs they are loaded into (sh, the pkg-config program).
  set_tests_properties(test_install PROPERTIES
                       ENVIRONMENT "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
endif()
