# p2p: caps decoding, reason logic (fixtures), the RM client against a fake
# RM, measurement statistics and data pattern, report formatting.
gdunlock_unit_test(test_p2p_reason SOURCES test_p2p_reason.c LIBS gdu_p2p PkgConfig::JANSSON)
gdunlock_unit_test(test_p2p_caps SOURCES test_p2p_caps.c LIBS gdu_p2p)
gdunlock_unit_test(test_p2p_rm SOURCES test_p2p_rm.c LIBS gdu_p2p PkgConfig::JANSSON)
gdunlock_unit_test(test_p2p_stats SOURCES test_p2p_stats.c LIBS gdu_p2p)
# The renderers live in the CLI; the test compiles them in.
gdunlock_unit_test(test_p2p_format SOURCES test_p2p_format.c ${CMAKE_SOURCE_DIR}/src/cli/p2p_table.c
                   ${CMAKE_SOURCE_DIR}/src/cli/p2p_json.c LIBS gdu_p2p PkgConfig::JANSSON)
