# util: the number parsers behind every command-line option.
gdunlock_fuzz_target(fuzz_util_units
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_util_units.c ${CMAKE_SOURCE_DIR}/src/util/units.c
  LIBS m)
gdunlock_fuzz_target(fuzz_util_device_minor
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_util_device_minor.c
          ${CMAKE_SOURCE_DIR}/src/util/nv_device_file.c)
