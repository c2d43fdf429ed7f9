# safetensors loader: header parsing and validation, sharded indexes, host loads.
gdunlock_unit_test(test_safetensors_header SOURCES test_safetensors_header.c LIBS gdu_safetensors)
gdunlock_unit_test(test_safetensors_open SOURCES test_safetensors_open.c LIBS gdu_safetensors)
gdunlock_unit_test(test_safetensors_load SOURCES test_safetensors_load.c LIBS gdu_safetensors)
gdunlock_unit_test(test_safetensors_files SOURCES test_safetensors_files.c LIBS gdu_safetensors)
gdunlock_unit_test(test_safetensors_memory SOURCES test_safetensors_memory.c LIBS gdu_safetensors)
gdunlock_unit_test(test_safetensors_api SOURCES test_safetensors_api.c LIBS gdu_safetensors)
target_compile_definitions(test_safetensors_api PRIVATE GDUNLOCK_INCLUDE="${CMAKE_SOURCE_DIR}/include")
gdunlock_unit_test(test_safetensors_cli SOURCES test_safetensors_cli.c LIBS PkgConfig::JANSSON)
target_compile_definitions(test_safetensors_cli PRIVATE GDUNLOCK_BIN="$<TARGET_FILE:gdunlock>")
add_dependencies(test_safetensors_cli gdunlock)

# The Python module's CPU tests (ctypes over libgdunlock-load.so). Not in
# sanitizer builds: an ASan library cannot be loaded into a plain python3.
# The torch parts run where a Python with torch is found (Debian's
# python3-torch is for /usr/bin/python3, which may not be the python3 on
# PATH): then a second run with that one.
find_program(GDU_PYTHON3 python3)
if(GDU_PYTHON3 AND NOT GDUNLOCK_SANITIZE)
  add_test(NAME test_safetensors_python
           COMMAND ${GDU_PYTHON3} -m unittest discover -s ${CMAKE_SOURCE_DIR}/tests/python -v)
  set_tests_properties(test_safetensors_python PROPERTIES
                       ENVIRONMENT "BUILD=${CMAKE_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1"
                       LABELS unit)
  foreach(candidate ${GDU_PYTHON3} /usr/bin/python3)
    if(NOT GDU_TORCH_PYTHON AND EXISTS ${candidate})
      execute_process(COMMAND ${candidate} -c "import torch" RESULT_VARIABLE rc
                      OUTPUT_QUIET ERROR_QUIET)
      if(rc EQUAL 0)
        set(GDU_TORCH_PYTHON ${candidate})
      endif()
    endif()
  endforeach()
  if(GDU_TORCH_PYTHON AND NOT GDU_TORCH_PYTHON STREQUAL GDU_PYTHON3)
    add_test(NAME test_safetensors_python_torch
             COMMAND ${GDU_TORCH_PYTHON} -m unittest discover -s ${CMAKE_SOURCE_DIR}/tests/python -v)
    set_tests_properties(test_safetensors_python_torch PROPERTIES
                         ENVIRONMENT "BUILD=${CMAKE_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1"
                         LABELS unit)
  endif()
endif()

# libgdunlock-load.so exports exactly the public API (its explicit map).
add_test(NAME test_load_exports
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.sh $<TARGET_FILE:gdu_safetensors_shared>
                 ${CMAKE_SOURCE_DIR}/include/gdunlock/safetensors.h
                 ${CMAKE_SOURCE_DIR}/include/gdunlock/io.h)
set_tests_properties(test_load_exports PROPERTIES LABELS unit)
