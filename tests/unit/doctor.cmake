# doctor / topo: probe parsers, PCIe path classification, fixture sysroots, capture.
gdunlock_unit_test(test_probe_text SOURCES test_probe_text.c LIBS gdu_probe)
gdunlock_unit_test(test_probe_topo SOURCES test_probe_topo.c LIBS gdu_probe)
gdunlock_unit_test(test_doctor_live SOURCES test_doctor_live.c LIBS gdu_doctor)
gdunlock_unit_test(test_probe_sysroot SOURCES test_probe_sysroot.c LIBS gdu_probe)
gdunlock_unit_test(test_doctor_fixtures SOURCES test_doctor_fixtures.c LIBS gdu_doctor)
gdunlock_unit_test(test_doctor_cli SOURCES test_doctor_cli.c LIBS PkgConfig::JANSSON)
target_compile_definitions(test_doctor_cli PRIVATE GDUNLOCK_BIN="$<TARGET_FILE:gdunlock>")
add_dependencies(test_doctor_cli gdunlock)

# Live collection against p2p's fake two-GPU libcuda.so.1 (built by p2p.cmake
# into fake-cuda-p2p/, reached only through LD_LIBRARY_PATH).
if(NOT GDUNLOCK_SANITIZE)
  gdunlock_unit_test(test_doctor_live_fake SOURCES test_doctor_live_fake.c LIBS gdu_doctor)
  add_dependencies(test_doctor_live_fake gdu_p2p_fake_cuda)
  foreach(t test_doctor_live_fake test_doctor_live_fake-valgrind)
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
                   "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fake-cuda-p2p"
                   "GDUNLOCK_LIBCUFILE=/nonexistent/libcufile.so.0")
    endif()
  endforeach()
endif()
