# rm: our RM client, the P2P caps and BAR1 figures against a fake RM (no
# driver needed), and the caps decoder.
gdunlock_unit_test(test_rm_client SOURCES test_rm_client.c LIBS gdu_rm PkgConfig::JANSSON)
gdunlock_unit_test(test_rm_bar1 SOURCES test_rm_bar1.c LIBS gdu_rm)
gdunlock_unit_test(test_rm_p2p_caps SOURCES test_rm_p2p_caps.c LIBS gdu_rm)
# The client calls no ioctl or close of its own (check_rm_calls.sh).
add_test(NAME test_rm_calls COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_rm_calls.sh $<TARGET_FILE:gdu_rm>)
set_tests_properties(test_rm_calls PROPERTIES LABELS unit)
