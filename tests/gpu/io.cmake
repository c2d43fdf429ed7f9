# GPU checks of the I/O engine (run by tests/gpu/io.sh on the accelerator machine).
add_executable(io_gpu_roundtrip io_gpu_roundtrip.c)
target_link_libraries(io_gpu_roundtrip PRIVATE gdu_io)
