# I/O engine, cuFile loader and bench tests (component: io).
gdunlock_unit_test(test_io_cufile_loader SOURCES test_io_cufile_loader.c LIBS gdu_cuda)
gdunlock_unit_test(test_io_options SOURCES test_io_options.c LIBS gdu_io)
gdunlock_unit_test(test_io_roundtrip SOURCES test_io_roundtrip.c LIBS gdu_io)
gdunlock_unit_test(test_io_faults SOURCES test_io_faults.c LIBS gdu_io)
gdunlock_unit_test(test_io_open SOURCES test_io_open.c LIBS gdu_io)
gdunlock_unit_test(test_io_dispatch SOURCES test_io_dispatch.c LIBS gdu_io)
gdunlock_unit_test(test_io_staging SOURCES test_io_staging.c LIBS gdu_io)
gdunlock_unit_test(test_io_fork SOURCES test_io_fork.c LIBS gdu_io)
gdunlock_unit_test(test_io_bench_pattern SOURCES test_io_bench_pattern.c LIBS gdu_bench)

# A fake libcuda.so.1 (tests/unit/fake_libcuda.c) lets CI run the engine's
# CUDA path and gdunlock bench. It lives in its own folder, reached only via
# LD_LIBRARY_PATH in these tests, never in build/lib (which the accelerator
# machine uses). Symbols it does not implement are generated weak stubs, so it
# keeps loading when GDU_CUDA_FUNCTIONS grows.
set(GDU_FAKE_CUDA_DIR ${CMAKE_BINARY_DIR}/fake-cuda)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cuda/cuda_api.h)
file(READ ${CMAKE_SOURCE_DIR}/src/cuda/cuda_api.h GDU_CUDA_API_TEXT)
string(REGEX MATCHALL "\"cu[A-Za-z0-9_]+\"" GDU_CUDA_SYMBOLS "${GDU_CUDA_API_TEXT}")
list(REMOVE_DUPLICATES GDU_CUDA_SYMBOLS)
set(GDU_FAKE_STUBS "/* generated from src/cuda/cuda_api.h by tests/unit/io.cmake */\n")
foreach(sym ${GDU_CUDA_SYMBOLS})
  string(REPLACE "\"" "" sym "${sym}")
  string(APPEND GDU_FAKE_STUBS "__attribute__((weak)) int ${sym}(void) { return 801; }\n")
endforeach()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/fake_libcuda_stubs.c "${GDU_FAKE_STUBS}")
add_library(gdu_fake_cuda SHARED fake_libcuda.c ${CMAKE_CURRENT_BINARY_DIR}/fake_libcuda_stubs.c)
gdu_sees(gdu_fake_cuda cuda)
target_link_libraries(gdu_fake_cuda PRIVATE Threads::Threads)
set_target_properties(gdu_fake_cuda PROPERTIES OUTPUT_NAME cuda PREFIX lib SUFFIX .so.1
                      LIBRARY_OUTPUT_DIRECTORY ${GDU_FAKE_CUDA_DIR})

gdunlock_unit_test(test_io_cuda_fake SOURCES test_io_cuda_fake.c LIBS gdu_io)
add_dependencies(test_io_cuda_fake gdu_fake_cuda)
# The environment goes to the valgrind twin (GDUNLOCK_VALGRIND) too.
function(gdu_io_test_env name)
  foreach(t ${name} ${name}-valgrind)
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT ${ARGN})
    endif()
  endforeach()
endfunction()
gdu_io_test_env(test_io_cuda_fake "LD_LIBRARY_PATH=${GDU_FAKE_CUDA_DIR}")
gdunlock_unit_test(test_cuda_ctx SOURCES test_cuda_ctx.c LIBS gdu_cuda)
add_dependencies(test_cuda_ctx gdu_fake_cuda)
gdu_io_test_env(test_cuda_ctx "LD_LIBRARY_PATH=${GDU_FAKE_CUDA_DIR}")

# The cuFile backend against a fake libcufile (tests/unit/fake_libcufile.c).
add_library(gdu_fake_cufile SHARED fake_libcufile.c)
gdu_sees(gdu_fake_cufile cuda)
set_target_properties(gdu_fake_cufile PROPERTIES OUTPUT_NAME cufile PREFIX lib SUFFIX .so.0
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fake-cufile)
gdunlock_unit_test(test_io_cufile_fake SOURCES test_io_cufile_fake.c LIBS gdu_io)
add_dependencies(test_io_cufile_fake gdu_fake_cuda gdu_fake_cufile)
# GDUNLOCK_NVFS_PROC: an existing folder stands in for /proc/driver/nvidia-fs,
# so that AUTO goes on to ask the fake libcufile.
gdu_io_test_env(test_io_cufile_fake "LD_LIBRARY_PATH=${GDU_FAKE_CUDA_DIR}"
  "GDUNLOCK_LIBCUFILE=${CMAKE_BINARY_DIR}/fake-cufile/libcufile.so.0"
  "GDUNLOCK_NVFS_PROC=${CMAKE_BINARY_DIR}/fake-cufile")
# Its ring of registered buffers under a simulated small BAR1.
gdunlock_unit_test(test_io_cufile_ring SOURCES test_io_cufile_ring.c LIBS gdu_io ${CMAKE_DL_LIBS})
add_dependencies(test_io_cufile_ring gdu_fake_cuda gdu_fake_cufile)
gdu_io_test_env(test_io_cufile_ring "LD_LIBRARY_PATH=${GDU_FAKE_CUDA_DIR}"
  "GDUNLOCK_LIBCUFILE=${CMAKE_BINARY_DIR}/fake-cufile/libcufile.so.0"
  "GDUNLOCK_NVFS_PROC=${CMAKE_BINARY_DIR}/fake-cufile")

# gdunlock bench end to end on the fake GPU: every path runs or says why,
# reads and writes, VMM memory, random order, O_DIRECT; data verified (exit 0).
# Each run uses its own scratch file in the build folder (a disk that takes
# O_DIRECT): see io_bench_fake.sh.
if(TARGET gdunlock)
  set(bench sh ${CMAKE_CURRENT_SOURCE_DIR}/io_bench_fake.sh $<TARGET_FILE:gdunlock>
      ${CMAKE_CURRENT_BINARY_DIR} -s 24M -i 1M -w 3 --chunk 256K)
  foreach(variant "read" "write" "read-vmm-rand" "read-cold" "write-cold")
    set(args --create)
    if(variant MATCHES "write")
      list(APPEND args --rw write)
    endif()
    if(variant MATCHES "vmm")
      list(APPEND args --mem vmm -m rand)
    endif()
    if(variant MATCHES "cold")
      list(APPEND args --cold)
    endif()
    add_test(NAME test_io_bench_fake_${variant} COMMAND ${bench} ${args} --json)
    set_tests_properties(test_io_bench_fake_${variant} PROPERTIES
      ENVIRONMENT "LD_LIBRARY_PATH=${GDU_FAKE_CUDA_DIR};GDUNLOCK_LIBCUFILE=/nonexistent/libcufile.so.0"
      LABELS unit)
  endforeach()
  # The cuFile rows through the fake libcufile: direct with nvidia-fs, and
  # compat mode refusing the file with 5027 (a row that says why, exit 0).
  set(fake_cufile ${CMAKE_BINARY_DIR}/fake-cufile/libcufile.so.0)
  set(ran_ok "\"ran\": true,[^}]*\"verified\": true")
  foreach(variant "direct|FAKE_CUFILE_NVFS_MAJOR=2|read|\"direct\",[^}]*${ran_ok}"
                  "compat-5027|FAKE_CUFILE_REGISTER=5027|read|refused [^\"]*: CU_FILE_HANDLE_NOT_REGISTERED \\(5027\\)"
                  "compat-write|FAKE_CUFILE_NVFS_MAJOR=0|write|\"cufile-compat\",[^}]*${ran_ok}")
    string(REPLACE "|" ";" parts "${variant}")
    list(GET parts 0 name)
    list(GET parts 1 env)
    list(GET parts 2 op)
    list(GET parts 3 expect)
    add_test(NAME test_io_bench_fake_${name}
             COMMAND ${bench} --create --rw ${op} --paths direct,cufile-compat,engine --json)
    set_tests_properties(test_io_bench_fake_${name} PROPERTIES
      ENVIRONMENT "LD_LIBRARY_PATH=${GDU_FAKE_CUDA_DIR};GDUNLOCK_LIBCUFILE=${fake_cufile};${env}"
      PASS_REGULAR_EXPRESSION "${expect}" LABELS unit)
  endforeach()
  add_dependencies(gdunlock gdu_fake_cuda gdu_fake_cufile)
  # --rounds: every path measured that many times, its median reported with
  # every round's GB/s and the range.
  add_test(NAME test_io_bench_fake_rounds
           COMMAND ${bench} --create --rounds 2 --paths engine,host --json)
  set_tests_properties(test_io_bench_fake_rounds PROPERTIES
    ENVIRONMENT "LD_LIBRARY_PATH=${GDU_FAKE_CUDA_DIR};GDUNLOCK_LIBCUFILE=/nonexistent/libcufile.so.0"
    PASS_REGULAR_EXPRESSION "\"path\": \"engine\",[^}]*\"gbps_rounds\": \\[[^],]+,[^],]+\\],[^}]*\"gbps_min\"[^}]*\"verified\": true"
    LABELS unit)

  # GDUNLOCK_IO_WORKERS is bench's default; -w wins over it.
  set(bench_small sh ${CMAKE_CURRENT_SOURCE_DIR}/io_bench_fake.sh $<TARGET_FILE:gdunlock>
      ${CMAKE_CURRENT_BINARY_DIR} -s 4M -i 1M --create --paths host --json)
  add_test(NAME test_io_bench_fake_env_default COMMAND ${bench_small})
  add_test(NAME test_io_bench_fake_env_explicit COMMAND ${bench_small} -w 2)
  foreach(t "env_default|5" "env_explicit|2")
    string(REPLACE "|" ";" parts "${t}")
    list(GET parts 0 name)
    list(GET parts 1 workers)
    set_tests_properties(test_io_bench_fake_${name} PROPERTIES
      ENVIRONMENT "LD_LIBRARY_PATH=${GDU_FAKE_CUDA_DIR};GDUNLOCK_LIBCUFILE=/nonexistent/libcufile.so.0;GDUNLOCK_IO_WORKERS=5"
      PASS_REGULAR_EXPRESSION "\"workers\": ${workers}[,\n ]" LABELS unit)
  endforeach()

  # Argument and file errors: the documented exit codes, with no GPU needed.
  set(bin $<TARGET_FILE:gdunlock>)
  set(n 0)
  foreach(case "64|bench" "64|bench -f x -D y" "64|bench -f x -s 1000" "64|bench -f x -i 0"
               "64|bench -f x --paths engine,gds" "64|bench -f x -x copy" "64|bench -f x extra"
               "64|bench -f x --rounds 0" "64|bench -f x --rounds 10"
               "66|bench -f no-such-bench-file.dat"
               "0|bench --help")
    string(REPLACE "|" ";" parts "${case}")
    list(GET parts 0 code)
    list(GET parts 1 args)
    math(EXPR n "${n} + 1")
    # The program's path travels as $0, never inside the command line: a
    # build folder may hold spaces.
    add_test(NAME test_io_bench_exit_${code}_${n}
             COMMAND sh -c "\"\$0\" ${args} >/dev/null 2>&1; test $? -eq ${code}" ${bin})
    set_tests_properties(test_io_bench_exit_${code}_${n} PROPERTIES LABELS unit
                         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  endforeach()
endif()

# The GDUNLOCK_IO_* defaults in processes that start with them set (they are
# read once per process, so each case runs on its own).
add_executable(test_io_env_defaults test_io_env_defaults.c)
target_link_libraries(test_io_env_defaults PRIVATE gdu_safetensors)
target_compile_definitions(test_io_env_defaults PRIVATE GDUNLOCK_FIXTURES="${GDUNLOCK_FIXTURES}")
function(io_env_case name)
  add_test(NAME test_io_env_defaults-${name} COMMAND test_io_env_defaults ${name})
  set_tests_properties(test_io_env_defaults-${name} PROPERTIES ENVIRONMENT "${ARGN}" LABELS unit)
endfunction()
io_env_case(direct-chunk GDUNLOCK_IO_DIRECT=on)
io_env_case(direct-and-chunk GDUNLOCK_IO_DIRECT=on GDUNLOCK_IO_CHUNK=1M)
io_env_case(invalid GDUNLOCK_IO_WORKERS=many)
gdunlock_unit_test(test_io_gather SOURCES test_io_gather.c LIBS gdu_io)
gdunlock_unit_test(test_io_deferred SOURCES test_io_deferred.c LIBS gdu_io)

# gdunlock bench as gdsio users type it: any file read (unchecked, with a
# note), -T SECONDS, libcuda's message once without a GPU.
if(TARGET gdunlock)
  add_test(NAME cli_bench_gdsio COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/bench_gdsio.sh
                                        $<TARGET_FILE:gdunlock> ${GDU_FAKE_CUDA_DIR})
  set_tests_properties(cli_bench_gdsio PROPERTIES LABELS unit TIMEOUT 120)
endif()
