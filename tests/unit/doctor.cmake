# doctor / topo: probe parsers, PCIe path classification, fixture sysroots, capture.
gdunlock_unit_test(test_probe_text SOURCES test_probe_text.c LIBS gdu_probe)
gdunlock_unit_test(test_probe_topo SOURCES test_probe_topo.c LIBS gdu_probe)
gdunlock_unit_test(test_probe_sysroot SOURCES test_probe_sysroot.c LIBS gdu_probe)
gdunlock_unit_test(test_doctor_fixtures SOURCES test_doctor_fixtures.c LIBS gdu_doctor)
gdunlock_unit_test(test_doctor_cli SOURCES test_doctor_cli.c LIBS PkgConfig::JANSSON)
target_compile_definitions(test_doctor_cli PRIVATE GDUNLOCK_BIN="$<TARGET_FILE:gdunlock>")
add_dependencies(test_doctor_cli gdunlock)
