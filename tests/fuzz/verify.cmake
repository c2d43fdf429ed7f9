# verify: the nvidia-fs stats parser (compiled in directly, like its unit test).
gdunlock_fuzz_target(fuzz_verify_nvfs_stats
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_verify_nvfs_stats.c ${CMAKE_SOURCE_DIR}/src/probe/nvfs_stats.c)
