# p2p: reason logic (fixtures), measurement statistics, report formatting.
gdunlock_unit_test(test_p2p_reason SOURCES test_p2p_reason.c LIBS gdu_p2p_reason PkgConfig::JANSSON)
gdunlock_unit_test(test_p2p_stats SOURCES test_p2p_stats.c LIBS gdu_p2p)
# The renderers live in the CLI; the test compiles them in.
gdunlock_unit_test(test_p2p_format SOURCES test_p2p_format.c LIBS gdu_p2p PkgConfig::JANSSON)

# A fake multi-GPU libcuda.so.1 with known bandwidths (test_p2p_fake_libcuda.c)
# in its own folder, reached only through LD_LIBRARY_PATH; the symbols it
# lacks come from the weak stubs io.cmake generates from cuda_api.h.
set(GDU_P2P_FAKE_CUDA_DIR ${CMAKE_BINARY_DIR}/fake-cuda-p2p)
add_library(gdu_p2p_fake_cuda SHARED test_p2p_fake_libcuda.c
            ${CMAKE_CURRENT_BINARY_DIR}/fake_libcuda_stubs.c)
gdu_sees(gdu_p2p_fake_cuda cuda p2p)
set_target_properties(gdu_p2p_fake_cuda PROPERTIES OUTPUT_NAME cuda PREFIX lib SUFFIX .so.1
                      LIBRARY_OUTPUT_DIRECTORY ${GDU_P2P_FAKE_CUDA_DIR})
# A unit test (and its valgrind twin) that loads the fake GPUs.
function(gdu_p2p_on_fake_cuda name)
  add_dependencies(${name} gdu_p2p_fake_cuda)
  foreach(t ${name} ${name}-valgrind)
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "LD_LIBRARY_PATH=${GDU_P2P_FAKE_CUDA_DIR}")
    endif()
  endforeach()
endfunction()
gdunlock_unit_test(test_p2p_bench_fake SOURCES test_p2p_bench_fake.c LIBS gdu_p2p)
gdu_p2p_on_fake_cuda(test_p2p_bench_fake)

# The command end to end on the fake GPUs (no RM here: its caps are reported missing).
if(TARGET gdunlock)
  add_dependencies(gdunlock gdu_p2p_fake_cuda)
  add_test(NAME test_p2p_cli_fake_smoke COMMAND $<TARGET_FILE:gdunlock> p2p --size 1M --iters 2)
  add_test(NAME test_p2p_cli_fake_json
           COMMAND $<TARGET_FILE:gdunlock> p2p --size 1M --iters 2 --json)
  add_test(NAME test_p2p_cli_fake_one_gpu COMMAND $<TARGET_FILE:gdunlock> p2p --size 1M --iters 2)
  add_test(NAME test_p2p_cli_fake_corrupt COMMAND $<TARGET_FILE:gdunlock> p2p --size 1M --iters 2)
  set_tests_properties(test_p2p_cli_fake_smoke test_p2p_cli_fake_json test_p2p_cli_fake_one_gpu
                       test_p2p_cli_fake_corrupt PROPERTIES LABELS unit
                       ENVIRONMENT "LD_LIBRARY_PATH=${GDU_P2P_FAKE_CUDA_DIR}")
  set_tests_properties(test_p2p_cli_fake_json PROPERTIES PASS_REGULAR_EXPRESSION
                       "\"buffers_checked\": 24,[ \n]*\"buffers_corrupt\": 0")
  set_property(TEST test_p2p_cli_fake_one_gpu APPEND PROPERTY ENVIRONMENT "GDU_FAKE_P2P_GPUS=1")
  set_tests_properties(test_p2p_cli_fake_one_gpu PROPERTIES PASS_REGULAR_EXPRESSION
                       "Only one GPU: there is no pair")
  # Damaged peer copies: reported, exit 1.
  set_property(TEST test_p2p_cli_fake_corrupt APPEND PROPERTY ENVIRONMENT "GDU_FAKE_P2P_CORRUPT=1")
  set_tests_properties(test_p2p_cli_fake_corrupt PROPERTIES WILL_FAIL TRUE)
endif()


# The SM kernels: the embedded PTX's header, kernel signatures and pattern;
# with a CUDA toolkit here, ptxas compiles it for every target it knows and
# the committed PTX is what p2p_kernels_gen.sh makes of p2p_kernels.cu.
gdunlock_unit_test(test_p2p_kernels SOURCES test_p2p_kernels.c LIBS gdu_p2p)
find_program(GDU_PTXAS ptxas PATHS /usr/local/cuda/bin)
find_program(GDU_NVCC nvcc PATHS /usr/local/cuda/bin)
if(GDU_PTXAS)
  add_test(NAME test_p2p_ptx_ptxas COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/test_p2p_ptx.sh ptxas
           ${GDU_PTXAS} ${CMAKE_SOURCE_DIR}/src/p2p/p2p_kernels.ptx)
  set_tests_properties(test_p2p_ptx_ptxas PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
endif()
if(GDU_NVCC)
  add_test(NAME test_p2p_ptx_current COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/test_p2p_ptx.sh current
           ${GDU_NVCC} ${CMAKE_SOURCE_DIR}/src/p2p/p2p_kernels_gen.sh
           ${CMAKE_SOURCE_DIR}/src/p2p/p2p_kernels.ptx)
  set_tests_properties(test_p2p_ptx_current PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
endif()

# The SM part of the command end to end on the fake GPUs: exit status,
# route table and reasons. gdu_p2p_cli_case(NAME RC REGEX [VAR=value...] --
# ARGS...): gdunlock p2p ARGS exits RC and its stdout matches REGEX (grep -E;
# no single quotes in REGEX).
if(TARGET gdunlock)
  function(gdu_p2p_cli_case name rc regex)
    cmake_parse_arguments(C "" "" "ENV;ARGS" ${ARGN})
    add_test(NAME ${name} COMMAND sh -c "\"$0\" p2p \"$@\" >\"${CMAKE_CURRENT_BINARY_DIR}/${name}.out\"; \
rc=$?; [ $rc -eq ${rc} ] || { echo \"exit $rc, expected ${rc}\"; cat \"${CMAKE_CURRENT_BINARY_DIR}/${name}.out\"; exit 1; }; \
grep -Eq -- '${regex}' \"${CMAKE_CURRENT_BINARY_DIR}/${name}.out\" || { echo 'no match for: ${regex}'; cat \"${CMAKE_CURRENT_BINARY_DIR}/${name}.out\"; exit 1; }"
             $<TARGET_FILE:gdunlock> ${C_ARGS})
    set_tests_properties(${name} PROPERTIES LABELS unit
                         ENVIRONMENT "LD_LIBRARY_PATH=${GDU_P2P_FAKE_CUDA_DIR};${C_ENV}")
  endfunction()
  gdu_p2p_cli_case(test_p2p_cli_fake_sm 0 "^1 -> 0   ok           ok           ok$"
                   ARGS --size 1M --iters 2)
  gdu_p2p_cli_case(test_p2p_cli_fake_sm_json 0 "\"chase_hops\": 10000"
                   ARGS --size 1M --iters 2 --json)
  # An SM fault between GPUs is a finding with its reason (exit 0).
  gdu_p2p_cli_case(test_p2p_cli_fake_sm_fault 0
                   "0 -> 1 SM write: \\[unknown\\] SM stores into the peer.s memory fault although peer access is enabled \\(cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS \\(700\\)\\)"
                   ENV GDU_FAKE_P2P_SM_FAULT=1 ARGS --size 1M --iters 2)
  # Wrong data through an SM route fails the run.
  gdu_p2p_cli_case(test_p2p_cli_fake_sm_corrupt 1 "0 -> 1 SM write: \\[unknown\\] SM stores into the peer.s memory completed with wrong data"
                   ENV GDU_FAKE_P2P_SM_CORRUPT=1 ARGS --size 1M --iters 2)
  gdu_p2p_cli_case(test_p2p_cli_fake_sm_jit 1 "SM part: GPU 0: loading the SM kernels \\(PTX ISA 6.3, sm_75\\): CUDA_ERROR_INVALID_PTX"
                   ENV GDU_FAKE_P2P_JIT_FAIL=1 ARGS --size 1M --iters 2)
  gdu_p2p_cli_case(test_p2p_cli_fake_no_sm 0 "SM routes: not measured \\(--no-sm\\)"
                   ARGS --size 1M --iters 2 --no-sm)
  gdu_p2p_cli_case(test_p2p_cli_fake_sm_one_gpu 0 "^0 -> 0   ok           ok           ok$"
                   ENV GDU_FAKE_P2P_GPUS=1 ARGS --size 1M --iters 2)
endif()

# The BAR1 window study's library code (RM mapping of video memory, the
# I/O-memory probe, the smaps/CapEff parsers, refusal attribution) against
# an in-process fake RM.
gdunlock_unit_test(test_p2p_window SOURCES test_p2p_window.c LIBS gdu_p2p_window_study)

# The BAR1 window feasibility program itself (tests/gpu/p2p_window.c,
# compiled in) on the fake GPUs and a fake RM.
gdunlock_unit_test(test_p2p_window_program SOURCES test_p2p_window_program.c
                   LIBS gdu_p2p_window_study gdu_p2p PkgConfig::JANSSON)
gdu_p2p_on_fake_cuda(test_p2p_window_program)

# doctor and gdunlock p2p (the binaries) give the same P2P verdicts on every
# fixture sysroot.
gdunlock_unit_test(test_p2p_agreement SOURCES test_p2p_agreement.c LIBS PkgConfig::JANSSON)
target_compile_definitions(test_p2p_agreement PRIVATE GDUNLOCK_BIN="$<TARGET_FILE:gdunlock>")
add_dependencies(test_p2p_agreement gdunlock)
