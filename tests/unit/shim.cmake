# The shim (src/shim) against the in-process fake RM: synthetic sequences and
# replays of the ioctl traces recorded on the H200 (tests/fixtures/rm-traces).
add_library(gdu_fake_rm STATIC fake_rm.c fake_rm_client.c fake_rm_trace.c)
target_link_libraries(gdu_fake_rm PUBLIC gdu_shim_core PkgConfig::JANSSON)
target_compile_definitions(gdu_fake_rm PRIVATE GDUNLOCK_FIXTURES="${GDUNLOCK_FIXTURES}")
gdunlock_unit_test(test_shim_core SOURCES test_shim_core.c LIBS gdu_fake_rm)
gdunlock_unit_test(test_shim_decode SOURCES test_shim_decode.c LIBS gdu_shim_core)
gdunlock_unit_test(test_shim_replay SOURCES test_shim_replay.c LIBS gdu_fake_rm)
# RM's lifetime program (tests/gpu/shim_rm_lifetime.c, compiled in) on the fake RM.
gdunlock_unit_test(test_shim_rm_lifetime_program SOURCES test_shim_rm_lifetime_program.c
                   LIBS gdu_fake_rm gdu_p2p_window_study)
# gdunlock run, end to end (needs the gdunlock binary and libgdunlock.so built).
gdunlock_unit_test(test_shim_run SOURCES test_shim_run.c LIBS PkgConfig::JANSSON)
target_compile_definitions(test_shim_run PRIVATE GDU_BIN="$<TARGET_FILE:gdunlock>")
add_dependencies(test_shim_run gdunlock gdu_shim)
if(GDUNLOCK_SANITIZE)
  target_compile_definitions(test_shim_run PRIVATE
                             GDU_RUN_ENV="ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
endif()
# The real interposer, preloaded into a test program (no NVIDIA device needed).
gdunlock_unit_test(test_shim_interpose SOURCES test_shim_interpose.c LIBS gdu_driverabi ${CMAKE_DL_LIBS}
                   PRELOAD $<TARGET_FILE:gdu_shim>)
add_dependencies(test_shim_interpose gdu_shim gdu_fake_cuda gdu_fake_cufile)
target_compile_definitions(test_shim_interpose PRIVATE
                           FAKE_LIBCUDA="${CMAKE_BINARY_DIR}/fake-cuda/libcuda.so.1"
                           FAKE_LIBCUFILE="${CMAKE_BINARY_DIR}/fake-cufile/libcufile.so.0")
set(GDU_SHIM_PRELOAD_ENV "CMOCKA_MESSAGE_OUTPUT=stdout")
set(GDU_WITH_SHIM sh ${CMAKE_CURRENT_SOURCE_DIR}/with_preload.sh $<TARGET_FILE:gdu_shim>)
if(GDUNLOCK_SANITIZE)
  list(APPEND GDU_SHIM_PRELOAD_ENV "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
endif()
set_tests_properties(test_shim_interpose PROPERTIES ENVIRONMENT "${GDU_SHIM_PRELOAD_ENV}")
if(GDUNLOCK_VALGRIND)
  set_tests_properties(test_shim_interpose-valgrind PROPERTIES ENVIRONMENT "${GDU_SHIM_PRELOAD_ENV}")
endif()
add_library(shim_trace_probe SHARED shim_trace_probe.c)
set_target_properties(shim_trace_probe PROPERTIES OUTPUT_NAME cufile_trace_probe)
target_link_libraries(shim_trace_probe PRIVATE ${CMAKE_DL_LIBS})
add_dependencies(test_shim_interpose shim_trace_probe)
target_compile_definitions(test_shim_interpose PRIVATE
                           TRACE_PROBE="$<TARGET_FILE:shim_trace_probe>")
# The same at debug log level: the trace of what libcufile asks.
add_test(NAME test_shim_interpose_trace COMMAND ${GDU_WITH_SHIM} $<TARGET_FILE:test_shim_interpose>)
set_tests_properties(test_shim_interpose_trace PROPERTIES LABELS unit
                     ENVIRONMENT "${GDU_SHIM_PRELOAD_ENV};GDUNLOCK_LOG=debug")
# The same under the GeForce stand-in: libcuda's GPUDirect RDMA answers read 0.
add_test(NAME test_shim_interpose_standin COMMAND ${GDU_WITH_SHIM} $<TARGET_FILE:test_shim_interpose>)
set_tests_properties(test_shim_interpose_standin PROPERTIES LABELS unit
                     ENVIRONMENT "${GDU_SHIM_PRELOAD_ENV};GDUNLOCK_TEST_RDMA_ATTR=0")
# The ioctl path allocates nothing from malloc (signal handlers).
gdunlock_unit_test(test_shim_nomalloc SOURCES test_shim_nomalloc.c LIBS gdu_fake_rm)

# A preloaded process under a seccomp filter that kills on process_vm_readv
# runs as without the shim (check_shim_seccomp.sh).
add_executable(shim_seccomp_run shim_seccomp_run.c)
add_test(NAME test_shim_seccomp COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_shim_seccomp.sh
         $<TARGET_FILE:gdu_shim> $<TARGET_FILE:shim_seccomp_run> $<TARGET_FILE:test_shim_interpose>)
set_tests_properties(test_shim_seccomp PROPERTIES LABELS unit ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout")
if(GDUNLOCK_SANITIZE)
  set_tests_properties(test_shim_seccomp PROPERTIES
                       ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout;ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
endif()

# The GPU check program of the attribute routes (tests/gpu/shim_attr_check.c)
# on the fake libcuda, without and with the shim (check_shim_attr_program.sh).
add_test(NAME test_shim_attr_program
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_shim_attr_program.sh $<TARGET_FILE:shim_attr_check>
                 ${GDU_FAKE_CUDA_DIR} $<TARGET_FILE:gdu_shim>)
set_tests_properties(test_shim_attr_program PROPERTIES LABELS unit)
if(GDUNLOCK_SANITIZE)
  set_tests_properties(test_shim_attr_program PROPERTIES
                       ENVIRONMENT "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
endif()
# What the shim costs a process it is preloaded into (check_shim_preload.sh).
add_test(NAME test_shim_preload COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_shim_preload.sh $<TARGET_FILE:gdu_shim>)
set_tests_properties(test_shim_preload PROPERTIES LABELS unit)
if(GDUNLOCK_SANITIZE)
  set_tests_properties(test_shim_preload PROPERTIES
                       ENVIRONMENT "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
endif()
gdunlock_unit_test(test_shim_dmabuf SOURCES test_shim_dmabuf.c LIBS gdu_fake_rm)
