# gdu_replace_file(SRC DST): DST becomes a copy of SRC, replaced in one
# rename: a program starting meanwhile (the build runs gdunlock for its man
# pages while bundle-runtime copies the libraries that gdunlock loads from
# build/lib first) sees the old file or the whole new one, never a part. A
# library loaded while only part of it was written killed that program with
# SIGBUS. DST already equal to SRC is left alone.
# As a script: cmake -DSRC=FILE -DDST=FILE -P replace-file.cmake
cmake_minimum_required(VERSION 3.20)

function(gdu_replace_file src dst)
  if(EXISTS "${dst}")
    file(SHA256 "${src}" want)
    file(SHA256 "${dst}" have)
    if(want STREQUAL have)
      return()
    endif()
  endif()
  get_filename_component(dir "${dst}" DIRECTORY)
  get_filename_component(name "${dst}" NAME)
  string(RANDOM LENGTH 8 tag)
  set(part "${dir}/.${name}.${tag}.part") # same folder: the rename stays in one file system
  configure_file("${src}" "${part}" COPYONLY)
  file(RENAME "${part}" "${dst}")
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT SRC OR NOT DST)
    message(FATAL_ERROR "usage: cmake -DSRC=FILE -DDST=FILE -P replace-file.cmake")
  endif()
  gdu_replace_file("${SRC}" "${DST}")
endif()
