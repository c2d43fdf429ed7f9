# `cmake --install` into a fresh prefix, then the installed tree used as a
# user would (check_install.sh says what is checked), and the loader library
# of the next minor release under a program linked against this one (built
# from the source, so not again in sanitizer builds).
if(GDUNLOCK_SANITIZE)
  add_test(NAME test_install COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_install.sh ${CMAKE_BINARY_DIR})
else()
  add_test(NAME test_install COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_install.sh ${CMAKE_BINARY_DIR}
                                     ${CMAKE_SOURCE_DIR})
endif()
set_tests_properties(test_install PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
if(GDUNLOCK_SANITIZE)
  # The installed shim and library carry the ASan runtime, which then is not
  # first in the programs they are loaded into (sh, the pkg-config program).
  set_tests_properties(test_install PROPERTIES
                       ENVIRONMENT "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
endif()

# The Python package (check_wheel.sh): the wheel as published
# (scripts/wheel.sh: sdist, wheel from it, auditwheel repair) and the editable
# install, each offline into a fresh venv. Not in sanitizer builds: the
# package's build is its own.
find_program(GDU_WHEEL_PYTHON python3)
if(NOT GDUNLOCK_SANITIZE)
  foreach(mode wheel editable)
    add_test(NAME test_${mode} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_wheel.sh ${mode}
                                       ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} ${GDU_WHEEL_PYTHON})
    set_tests_properties(test_${mode} PROPERTIES LABELS unit)
  endforeach()
endif()

# bundle-runtime's copies of the build's libraries appear whole or not at
# all (check_replace_file.sh).
add_test(NAME test_replace_file COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_replace_file.sh
                                        ${CMAKE_SOURCE_DIR})
set_tests_properties(test_replace_file PROPERTIES LABELS unit)

# The symbol versions of the loader library and the shim (check_lib_versions.sh).
add_test(NAME test_lib_versions COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_lib_versions.sh
                                        $<TARGET_FILE:gdu_safetensors_shared> $<TARGET_FILE:gdu_shim>)
set_tests_properties(test_lib_versions PROPERTIES LABELS unit)
