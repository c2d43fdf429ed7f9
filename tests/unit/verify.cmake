# verify: the nvidia-fs stats parser and the verify verdict logic. The parser
# is compiled in directly so that its tests do not depend on the rest of gdu_probe.
gdunlock_unit_test(test_nvfs_stats
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_nvfs_stats.c ${CMAKE_SOURCE_DIR}/src/probe/nvfs_stats.c
  LIBS gdu_util)
gdu_sees(test_nvfs_stats probe)

# The verdict, shim-report, JSON and pattern code needs no GPU: compiled in
# directly, without the run (CUDA/cuFile) and engine parts.
gdunlock_unit_test(test_verify_verdict
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_verify_verdict.c
          ${CMAKE_SOURCE_DIR}/src/verify/verify_verdict.c ${CMAKE_SOURCE_DIR}/src/verify/verify_shim.c
          ${CMAKE_SOURCE_DIR}/src/verify/verify_json.c
          ${CMAKE_SOURCE_DIR}/src/verify/verify_evidence.c ${CMAKE_SOURCE_DIR}/src/probe/nvfs_stats.c
  LIBS gdu_launch gdu_util_json PkgConfig::JANSSON)
gdu_sees(test_verify_verdict verify probe cuda)

# gdunlock verify end to end without a GPU: fake libcuda.so.1 and libcufile
# in their own folder (never build/lib, which is on the real binary's run path).
set(GDU_VERIFY_FAKES ${CMAKE_BINARY_DIR}/tests/verify-fakes)
add_library(test_verify_fake_cuda SHARED ${CMAKE_CURRENT_SOURCE_DIR}/test_verify_fake_cuda.c
                                         ${CMAKE_CURRENT_SOURCE_DIR}/test_verify_fake_cuda_defaults.c)
gdu_sees(test_verify_fake_cuda cuda)
set_target_properties(test_verify_fake_cuda PROPERTIES OUTPUT_NAME cuda PREFIX lib SUFFIX .so.1
                      LIBRARY_OUTPUT_DIRECTORY ${GDU_VERIFY_FAKES})
add_library(test_verify_fake_cufile SHARED ${CMAKE_CURRENT_SOURCE_DIR}/test_verify_fake_cufile.c)
gdu_sees(test_verify_fake_cufile cuda)
set_target_properties(test_verify_fake_cufile PROPERTIES OUTPUT_NAME fakecufile
                      LIBRARY_OUTPUT_DIRECTORY ${GDU_VERIFY_FAKES})
if(GDUNLOCK_SANITIZE)
  set(GDU_VERIFY_SANITIZED 1)
else()
  set(GDU_VERIFY_SANITIZED 0)
endif()
add_test(NAME test_verify_cli
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_verify_cli.sh $<TARGET_FILE:gdunlock>
                 ${GDU_VERIFY_FAKES} ${GDUNLOCK_FIXTURES} ${GDU_VERIFY_SANITIZED})
set_tests_properties(test_verify_cli PROPERTIES LABELS unit)

# gdunlock verify from a prefix whose path LD_PRELOAD cannot carry, and with a
# shim that does not load in its child.
add_test(NAME cli_verify_preload
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/verify_preload.sh $<TARGET_FILE:gdunlock>
                 $<TARGET_FILE:gdu_shim> ${GDU_VERIFY_FAKES})
set_tests_properties(cli_verify_preload PROPERTIES LABELS unit)
if(GDUNLOCK_SANITIZE)
  set_tests_properties(cli_verify_preload PROPERTIES
                       ENVIRONMENT "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
endif()
# A FIFO given to bench and verify, or put in the file's place after their
# checks (by the fake libcudas at cuInit): no hang, the documented exit.
add_test(NAME cli_fifo_swap
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/fifo_swap.sh $<TARGET_FILE:gdunlock>
                 ${GDU_FAKE_CUDA_DIR} ${GDU_VERIFY_FAKES})
set_tests_properties(cli_fifo_swap PROPERTIES LABELS unit TIMEOUT 600)

# gdunlock verify --rdma: a fake libibverbs.so.1, named by GDUNLOCK_IBVERBS,
# whose queue pair copies between registered ranges, and the fake libcuda
# whose device memory is host memory (test_verify_rdma_cli.sh).
add_library(test_fake_ibverbs SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fake_libibverbs.c)
gdu_sees(test_fake_ibverbs verify)
set_target_properties(test_fake_ibverbs PROPERTIES OUTPUT_NAME ibverbs PREFIX lib SUFFIX .so.1
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/ibverbs-fake)
add_test(NAME test_verify_rdma_cli
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_verify_rdma_cli.sh $<TARGET_FILE:gdunlock>
                 $<TARGET_FILE:test_fake_ibverbs> ${GDU_VERIFY_FAKES})
set_tests_properties(test_verify_rdma_cli PROPERTIES LABELS unit)
add_dependencies(test_fake_ibverbs gdunlock test_verify_fake_cuda)
