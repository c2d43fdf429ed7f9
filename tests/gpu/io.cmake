# GPU checks of the I/O engine (run by tests/gpu/io.sh on the accelerator machine).
add_executable(io_gpu_roundtrip io_gpu_roundtrip.c)
target_link_libraries(io_gpu_roundtrip PRIVATE gdu_io)
# What a column slice costs by every route a loader could take (issue 21's study).
add_executable(gather_costs gather_costs.c)
target_link_libraries(gather_costs PRIVATE gdu_cuda PkgConfig::URING Threads::Threads)
# What a fresh engine's start spends, call by call (issue 21's first ranks).
add_executable(engine_start_parts engine_start_parts.c)
target_link_libraries(engine_start_parts PRIVATE gdu_io)
