# GPU programs of gdunlock p2p (run by tests/gpu/p2p.sh on the accelerator machine).
# The BAR1 window study (docs/p2p.md): its RM mapping of video memory and the
# attribution of a refusal, beside the program that runs it.
add_library(gdu_p2p_window_study STATIC rm_bar1.c p2p_window_study.c)
target_include_directories(gdu_p2p_window_study PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(gdu_p2p_window_study PUBLIC gdu_facts)
add_executable(p2p_window p2p_window.c)
target_link_libraries(p2p_window PRIVATE gdu_p2p_window_study gdu_p2p PkgConfig::JANSSON)
