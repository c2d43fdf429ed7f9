# The shim-launch contract shared by gdunlock run and verify.
gdunlock_unit_test(test_launch SOURCES test_launch.c LIBS gdu_launch)
target_compile_definitions(test_launch PRIVATE GDU_SHIM="$<TARGET_FILE:gdu_shim>")
add_dependencies(test_launch gdu_shim)
# gdunlock run from a prefix whose path LD_PRELOAD cannot carry, and with a
# shim that does not load.
add_test(NAME cli_run_preload COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/run_preload.sh
         $<TARGET_FILE:gdunlock> $<TARGET_FILE:gdu_shim>)
set_tests_properties(cli_run_preload PROPERTIES LABELS unit)
if(GDUNLOCK_SANITIZE)
  set_tests_properties(cli_run_preload PROPERTIES
                       ENVIRONMENT "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
endif()
