# p2p: the RM's answers (outside input) through our RM client, the caps
# decoder, the reason logic and the report renderers. Sources compiled in so
# that coverage instrumentation reaches them.
gdunlock_fuzz_target(fuzz_p2p_rm_answer
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_p2p_rm_answer.c ${CMAKE_SOURCE_DIR}/src/rm/rm_client.c
          ${CMAKE_SOURCE_DIR}/src/rm/rm_p2p_caps.c
          ${CMAKE_SOURCE_DIR}/src/rm/p2p_caps.c ${CMAKE_SOURCE_DIR}/src/p2p/p2p_reason.c
          ${CMAKE_SOURCE_DIR}/src/facts/pair_facts.c ${CMAKE_SOURCE_DIR}/src/p2p/p2p_route.c
          ${CMAKE_SOURCE_DIR}/src/p2p/p2p_table.c ${CMAKE_SOURCE_DIR}/src/p2p/p2p_json.c
          ${CMAKE_SOURCE_DIR}/src/p2p/p2p_verdict_json.c
  LIBS gdu_facts gdu_probe gdu_driverabi gdu_cuda gdu_util_json gdu_util PkgConfig::JANSSON)

# The BAR1 window study's outside input: smaps and status text, card info.
gdunlock_fuzz_target(fuzz_p2p_window
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_p2p_window.c ${CMAKE_SOURCE_DIR}/src/rm/rm_client.c
          ${CMAKE_SOURCE_DIR}/src/rm/rm_device.c ${CMAKE_SOURCE_DIR}/tests/gpu/rm_bar1.c
          ${CMAKE_SOURCE_DIR}/tests/gpu/p2p_window_study.c
  LIBS gdu_driverabi)
if(TARGET fuzz_p2p_window)
  target_include_directories(fuzz_p2p_window PRIVATE ${CMAKE_SOURCE_DIR}/tests/gpu)
endif()
