# doctor / topo: probe parsers, PCIe path classification, fixture sysroots, capture.
gdunlock_unit_test(test_probe_text SOURCES test_probe_text.c LIBS gdu_probe)
gdunlock_unit_test(test_probe_topo SOURCES test_probe_topo.c LIBS gdu_probe)
gdunlock_unit_test(test_probe_live SOURCES test_probe_live.c LIBS gdu_probe)
gdunlock_unit_test(test_doctor_fixtures SOURCES test_doctor_fixtures.c LIBS gdu_probe)
