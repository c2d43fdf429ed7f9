# doctor: the sysfs/procfs text parsers, cufile.json and the capture file
# gdunlock-live.json (user-supplied with --sysroot). Parser sources are
# compiled into the targets so that coverage instrumentation reaches them.
gdunlock_fuzz_target(fuzz_doctor_text
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_doctor_text.c ${CMAKE_SOURCE_DIR}/src/probe/text_parse.c
          ${CMAKE_SOURCE_DIR}/src/probe/topo_path.c ${CMAKE_SOURCE_DIR}/src/probe/driver_probe.c
          ${CMAKE_SOURCE_DIR}/src/probe/sysroot.c ${CMAKE_SOURCE_DIR}/src/util/pci_resource.c)
gdunlock_fuzz_target(fuzz_doctor_cufile_json
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_doctor_cufile_json.c
          ${CMAKE_SOURCE_DIR}/src/probe/cufile_config.c ${CMAKE_SOURCE_DIR}/src/probe/text_parse.c
          ${CMAKE_SOURCE_DIR}/src/probe/sysroot.c
  LIBS PkgConfig::JANSSON)
gdunlock_fuzz_target(fuzz_doctor_live_json
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_doctor_live_json.c ${CMAKE_SOURCE_DIR}/src/facts/live_json.c
  LIBS gdu_doctor PkgConfig::JANSSON)
