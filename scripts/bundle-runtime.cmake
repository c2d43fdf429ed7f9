# Copies the shared objects we link from the system (and their non-glibc
# dependencies) into OUT, following symlinks, so that a carried build folder
# runs where they are not installed. Which ones:
#   LIBS="jansson pci uring"  the named libraries, found by ldconfig (the build folder);
#   ELF="a;b"                 every non-glibc library these files load (the wheel);
#   LICENSES=DIR              also copies each one's Debian copyright file there.
# Without OUT nothing is copied but the copyright files: the wheel's libraries
# are bundled by `auditwheel repair` (scripts/wheel.sh), which renames them
# and rewrites the run paths of every ELF file in the wheel; copying them here
# too would put a second copy in the wheel. The licenses still travel from
# here (auditwheel copies none).
# A library that cannot be found stops it with an error: nothing is left
# without a dependency it needs.
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/replace-file.cmake)
string(REPLACE " " ";" names "${LIBS}")
set(queue "")
foreach(n ${names})
  execute_process(COMMAND sh -c "ldconfig -p | awk '/lib${n}\\.so\\.[0-9]+ .*x86-64/ {print $NF; exit}'"
                  OUTPUT_VARIABLE path OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT path)
    message(FATAL_ERROR "bundle-runtime: lib${n} is not known to ldconfig; install it (scripts/debian-packages.txt)")
  endif()
  list(APPEND queue ${path})
endforeach()

# The libraries FILE loads, as ldd resolves them, glibc's own left out (they
# come from the system it runs on).
function(gdu_dependencies file out)
  execute_process(COMMAND ldd ${file} OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "bundle-runtime: ldd ${file} failed")
  endif()
  string(REPLACE "\n" ";" lines "${text}")
  set(deps "")
  foreach(line ${lines})
    if(line MATCHES "^[ \t]*([^ ]+) => not found")
      message(FATAL_ERROR "bundle-runtime: ${file} needs ${CMAKE_MATCH_1}, which is not installed")
    elseif(line MATCHES "=> (/[^ ]+)")
      set(dep ${CMAKE_MATCH_1})
      if(NOT dep MATCHES "/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\\.so")
        list(APPEND deps ${dep})
      endif()
    endif()
  endforeach()
  set(${out} ${deps} PARENT_SCOPE)
endfunction()

foreach(f ${ELF})
  gdu_dependencies(${f} deps)
  list(APPEND queue ${deps})
endforeach()

set(seen "")
while(queue)
  list(POP_FRONT queue lib)
  get_filename_component(base ${lib} NAME)
  if(base IN_LIST seen)
    continue()
  endif()
  list(APPEND seen ${base})
  file(REAL_PATH ${lib} real)
  # Already in OUT (found through our own run path): nothing to copy.
  if(OUT AND NOT real STREQUAL "${OUT}/${base}")
    gdu_replace_file(${real} ${OUT}/${base})
  endif()
  if(LICENSES)
    get_filename_component(real_name ${real} NAME)
    execute_process(COMMAND dpkg-query -S "*/${real_name}" OUTPUT_VARIABLE owner
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    string(REGEX REPLACE "[:,].*" "" package "${owner}")
    if(NOT package OR NOT EXISTS /usr/share/doc/${package}/copyright)
      message(FATAL_ERROR "bundle-runtime: no Debian copyright file for ${real} "
                          "(the licenses of bundled libraries must travel with them)")
    endif()
    configure_file(/usr/share/doc/${package}/copyright ${LICENSES}/${package}.copyright COPYONLY)
  endif()
  gdu_dependencies(${lib} deps)
  list(APPEND queue ${deps})
endwhile()
