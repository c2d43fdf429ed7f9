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
# Every command's --json document against the schemas docs/cli-json.md and
# docs/doctor-json.md document, text that is not UTF-8 included; the GPU
# commands on the fakes p2p.cmake and verify.cmake build (their folders).
add_test(NAME cli_json_schemas
         COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/json_schemas.sh $<TARGET_FILE:gdunlock>
                 ${CMAKE_BINARY_DIR}/fake-cuda-p2p ${CMAKE_BINARY_DIR}/tests/verify-fakes)
set_tests_properties(cli_json_schemas PROPERTIES LABELS unit TIMEOUT 120)
if(GDUNLOCK_SANITIZE)
  set_tests_properties(cli_json_schemas PROPERTIES
                       ENVIRONMENT "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=1:abort_on_error=1")
endif()
# The man pages scripts/man.sh made at build time: whole synopses.
if(HELP2MAN)
  add_test(NAME cli_man_pages COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/man_pages.sh
                                      $<TARGET_FILE:gdunlock> ${CMAKE_BINARY_DIR}/man/man1)
  set_tests_properties(cli_man_pages PROPERTIES LABELS unit)
endif()
# load --list --json writes its tensor table one tensor at a time. Not under
# the sanitizers: ASan's quarantine keeps freed memory, which is the point.
find_program(GDU_PYTHON3 python3)
if(GDU_PYTHON3 AND NOT GDUNLOCK_SANITIZE)
  add_test(NAME cli_list_memory
           COMMAND ${GDU_PYTHON3} ${CMAKE_SOURCE_DIR}/tests/cli/list_memory.py $<TARGET_FILE:gdunlock>)
  set_tests_properties(cli_list_memory PROPERTIES LABELS unit TIMEOUT 300)
endif()
