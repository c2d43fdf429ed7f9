# facts: the live answers and their capture file, each GPU pair's facts from
# the fixture sysroots.
gdunlock_unit_test(test_facts_live SOURCES test_facts_live.c LIBS gdu_facts)
gdunlock_unit_test(test_facts_pair SOURCES test_facts_pair.c LIBS gdu_p2p)

# Live collection against p2p's fake two-GPU libcuda.so.1 (built by p2p.cmake
# into fake-cuda-p2p/, reached only through LD_LIBRARY_PATH).
if(NOT GDUNLOCK_SANITIZE)
  gdunlock_unit_test(test_facts_live_fake SOURCES test_facts_live_fake.c LIBS gdu_facts)
  add_dependencies(test_facts_live_fake gdu_p2p_fake_cuda)
  foreach(t test_facts_live_fake test_facts_live_fake-valgrind)
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
                   "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fake-cuda-p2p"
                   "GDUNLOCK_LIBCUFILE=/nonexistent/libcufile.so.0")
    endif()
  endforeach()
endif()

# A capture is the snapshot written out: every fixture replays from its own
# capture to the same report, and reads only the files the capture lists.
gdunlock_unit_test(test_facts_capture SOURCES test_facts_capture.c LIBS gdu_doctor)
