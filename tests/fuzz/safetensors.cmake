# safetensors parsers. Their sources are compiled into the targets so that
# libFuzzer's coverage instrumentation reaches them.
set(GDU_ST_PARSER_SOURCES
    ${CMAKE_SOURCE_DIR}/src/safetensors/st_header.c ${CMAKE_SOURCE_DIR}/src/safetensors/st_dtype.c
    ${CMAKE_SOURCE_DIR}/src/safetensors/st_error.c ${CMAKE_SOURCE_DIR}/src/safetensors/st_pread.c
    ${CMAKE_SOURCE_DIR}/src/safetensors/st_json.c ${CMAKE_SOURCE_DIR}/src/util/text.c
    ${CMAKE_SOURCE_DIR}/src/util/utf8.c)
gdunlock_fuzz_target(fuzz_safetensors_header
                     SOURCES fuzz_safetensors_header.c ${GDU_ST_PARSER_SOURCES}
                     LIBS PkgConfig::JANSSON)
gdunlock_fuzz_target(fuzz_safetensors_index
                     SOURCES fuzz_safetensors_index.c ${CMAKE_SOURCE_DIR}/src/safetensors/st_index.c
                             ${GDU_ST_PARSER_SOURCES}
                     LIBS PkgConfig::JANSSON)
