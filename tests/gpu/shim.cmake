# GPU test programs of the shim (run by tests/gpu/shim.sh with the shim preloaded).
add_library(shim_gpu_common STATIC shim_gpu_common.c)
target_include_directories(shim_gpu_common PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(shim_gpu_common PUBLIC gdu_cuda gdu_driverabi)
foreach(prog shim_gpu_buffers shim_gpu_stress shim_gpu_lifecycle)
  add_executable(${prog} ${prog}.c)
  target_link_libraries(${prog} PRIVATE shim_gpu_common Threads::Threads)
endforeach()
