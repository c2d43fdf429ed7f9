# verify: the nvidia-fs stats parser (compiled in directly, like its unit test).
gdunlock_fuzz_target(fuzz_verify_nvfs_stats
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_verify_nvfs_stats.c ${CMAKE_SOURCE_DIR}/src/probe/nvfs_stats.c
          ${CMAKE_SOURCE_DIR}/src/util/text.c ${CMAKE_SOURCE_DIR}/src/util/utf8.c)
# verify: its reader of the shim's GDUNLOCK_REPORT (any JSON layout, or garbage).
gdunlock_fuzz_target(fuzz_verify_shim_report
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_verify_shim_report.c ${CMAKE_SOURCE_DIR}/src/verify/verify_shim.c
          ${CMAKE_SOURCE_DIR}/src/verify/verify_verdict.c ${CMAKE_SOURCE_DIR}/src/probe/nvfs_stats.c
          ${CMAKE_SOURCE_DIR}/src/util/pci_addr.c ${CMAKE_SOURCE_DIR}/src/util/text.c
          ${CMAKE_SOURCE_DIR}/src/util/utf8.c
  LIBS gdu_launch PkgConfig::JANSSON)
