# Fuzz targets of the shim: its decoders, and the whole core (differential:
# with and without the shim, in front of the fake RM of tests/unit). The
# shim's sources are compiled into each target so that the fuzzer sees their
# branches.
set(GDU_SHIM_FUZZ_SOURCES
    ${CMAKE_SOURCE_DIR}/src/shim/shim_pool.c ${CMAKE_SOURCE_DIR}/src/shim/shim_map.c
    ${CMAKE_SOURCE_DIR}/src/shim/shim_decode.c
    ${CMAKE_SOURCE_DIR}/src/shim/shim_objects.c ${CMAKE_SOURCE_DIR}/src/shim/shim_core.c ${CMAKE_SOURCE_DIR}/src/shim/shim_tpp.c ${CMAKE_SOURCE_DIR}/src/shim/shim_testmode.c
    ${CMAKE_SOURCE_DIR}/src/shim/shim_pin.c ${CMAKE_SOURCE_DIR}/src/shim/shim_attr.c
    ${CMAKE_SOURCE_DIR}/src/shim/shim_report.c ${CMAKE_SOURCE_DIR}/src/pinmodel/pin_model.c
    ${CMAKE_SOURCE_DIR}/src/util/jsonw.c ${CMAKE_SOURCE_DIR}/src/util/utf8.c
    ${CMAKE_SOURCE_DIR}/src/util/pci_addr.c)
gdunlock_fuzz_target(fuzz_shim_decode SOURCES fuzz_shim_decode.c ${CMAKE_SOURCE_DIR}/src/shim/shim_decode.c
                     LIBS gdu_driverabi)
gdunlock_fuzz_target(fuzz_shim_sequence
                     SOURCES fuzz_shim_sequence.c ${GDU_SHIM_FUZZ_SOURCES} ${CMAKE_SOURCE_DIR}/tests/unit/fake_rm.c
                             ${CMAKE_SOURCE_DIR}/tests/unit/fake_rm_client.c
                     LIBS gdu_driverabi PkgConfig::JANSSON Threads::Threads)
