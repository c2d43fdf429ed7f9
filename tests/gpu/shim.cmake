# GPU test programs of the shim (run by tests/gpu/shim.sh with the shim preloaded).
add_library(shim_gpu_common STATIC shim_gpu_common.c)
target_include_directories(shim_gpu_common PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(shim_gpu_common PUBLIC gdu_cuda gdu_driverabi)
foreach(prog shim_gpu_buffers shim_gpu_stress shim_gpu_lifecycle)
  add_executable(${prog} ${prog}.c)
  target_link_libraries(${prog} PRIVATE shim_gpu_common Threads::Threads)
endforeach()
add_executable(shim_ioctl_cost shim_ioctl_cost.c)
# The GPUDirect RDMA attribute through every route, and libcufile's gate
# (tests/gpu/shim_attr.sh). They reach CUDA the way other programs do
# (dlopen + dlsym, or linked), not through src/cuda.
add_executable(shim_attr_check shim_attr_check.c)
target_link_libraries(shim_attr_check PRIVATE ${CMAKE_DL_LIBS})
add_library(nccl_gdunlock_probe SHARED nccl_gdunlock_probe.c)
set_target_properties(nccl_gdunlock_probe PROPERTIES OUTPUT_NAME nccl_gdunlock_probe
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_dependencies(shim_attr_check nccl_gdunlock_probe)
# What NCCL's GPUDirect RDMA decision reads, and the lookup of NCCL's buffers
# (tests/gpu/rdma_differential.sh).
add_executable(rdma_nccl_check rdma_nccl_check.c)
target_link_libraries(rdma_nccl_check PRIVATE shim_gpu_common ${CMAKE_DL_LIBS})
add_dependencies(rdma_nccl_check nccl_gdunlock_probe)
add_executable(cufile_gate cufile_gate.c)
target_link_libraries(cufile_gate PRIVATE ${CMAKE_DL_LIBS})
# cuFile's types only (cufile_api.h, asserted against the real header).
target_include_directories(cufile_gate PRIVATE $<TARGET_PROPERTY:gdu_cuda,INTERFACE_INCLUDE_DIRECTORIES>)
find_library(GDU_CUDA_STUB cuda PATHS /usr/local/cuda/lib64/stubs NO_DEFAULT_PATH)
if(GDU_CUDA_STUB)
  add_executable(shim_attr_direct shim_attr_direct.c)
  target_link_libraries(shim_attr_direct PRIVATE ${GDU_CUDA_STUB})
endif()
# RM's lifetime rules and UVM's P2PDMA call (tests/gpu/shim_rm_lifetime.sh).
add_executable(shim_rm_lifetime shim_rm_lifetime.c)
target_link_libraries(shim_rm_lifetime PRIVATE gdu_p2p_window_study) # its card info (rm_bar1.h)
add_executable(uvm_device_p2p uvm_device_p2p.c)
target_link_libraries(uvm_device_p2p PRIVATE shim_gpu_common ${CMAKE_DL_LIBS})
