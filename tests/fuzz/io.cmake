# io: the GDUNLOCK_IO_* environment parsing of the I/O engine. Its sources
# are compiled in so that coverage instrumentation reaches them.
gdunlock_fuzz_target(fuzz_io_env
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_io_env.c ${CMAKE_SOURCE_DIR}/src/io/io_options.c
          ${CMAKE_SOURCE_DIR}/src/util/units.c
  LIBS m)
