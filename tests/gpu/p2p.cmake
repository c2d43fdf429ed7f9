# GPU programs of gdunlock p2p (run by tests/gpu/p2p.sh on the accelerator machine).
add_executable(p2p_window p2p_window.c)
target_link_libraries(p2p_window PRIVATE gdu_p2p PkgConfig::JANSSON)
