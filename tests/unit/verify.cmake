# verify: the nvidia-fs stats parser and the verify verdict logic. The parser
# is compiled in directly so that its tests do not depend on the rest of gdu_probe.
gdunlock_unit_test(test_nvfs_stats
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_nvfs_stats.c ${CMAKE_SOURCE_DIR}/src/probe/nvfs_stats.c)
