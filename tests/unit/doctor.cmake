# doctor / topo: probe parsers, PCIe path classification, fixture sysroots, capture.
gdunlock_unit_test(test_probe_text SOURCES test_probe_text.c LIBS gdu_probe)
gdunlock_unit_test(test_probe_topo SOURCES test_probe_topo.c LIBS gdu_probe)
gdunlock_unit_test(test_probe_sysroot SOURCES test_probe_sysroot.c LIBS gdu_probe)
gdunlock_unit_test(test_doctor_fixtures SOURCES test_doctor_fixtures.c LIBS gdu_doctor)
gdunlock_unit_test(test_doctor_cli SOURCES test_doctor_cli.c LIBS PkgConfig::JANSSON)
target_compile_definitions(test_doctor_cli PRIVATE GDUNLOCK_BIN="$<TARGET_FILE:gdunlock>")
add_dependencies(test_doctor_cli gdunlock)
# doctor links the P2P reasons, not the P2P measurement (check_doctor_link.sh).
add_test(NAME test_doctor_link COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_doctor_link.sh
                                       $<TARGET_FILE:test_doctor_fixtures> $<TARGET_FILE:gdu_p2p>)
set_tests_properties(test_doctor_link PROPERTIES LABELS unit)
