# gdunlock p2p unlock: the plan on the fixture sysroots (tests/fixtures/unlock
# and doctor's), and install / revert / status on a fake root with fake dkms,
# modprobe, mokutil and a stub build program (tests/unlock-cli).
gdunlock_unit_test(test_unlock_plan SOURCES test_unlock_plan.c LIBS gdu_unlock)
if(TARGET gdunlock)
  add_test(NAME cli_p2p_unlock
           COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/p2p_unlock.sh $<TARGET_FILE:gdunlock>
                   ${CMAKE_SOURCE_DIR}/tests/fixtures)
  set_tests_properties(cli_p2p_unlock PROPERTIES LABELS unit TIMEOUT 120)
endif()
