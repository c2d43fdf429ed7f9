# verify: the nvidia-fs stats parser and the verify verdict logic. The parser
# is compiled in directly so that its tests do not depend on the rest of gdu_probe.
gdunlock_unit_test(test_nvfs_stats
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_nvfs_stats.c ${CMAKE_SOURCE_DIR}/src/probe/nvfs_stats.c)

# The verdict, shim-report, JSON and pattern code needs no GPU: compiled in
# directly, without the run (CUDA/cuFile) and engine parts.
gdunlock_unit_test(test_verify_verdict
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_verify_verdict.c
          ${CMAKE_SOURCE_DIR}/src/verify/verify_verdict.c ${CMAKE_SOURCE_DIR}/src/verify/verify_shim.c
          ${CMAKE_SOURCE_DIR}/src/verify/verify_json.c ${CMAKE_SOURCE_DIR}/src/verify/verify_pattern.c
          ${CMAKE_SOURCE_DIR}/src/verify/verify_evidence.c ${CMAKE_SOURCE_DIR}/src/probe/nvfs_stats.c
  LIBS PkgConfig::JANSSON)
