# gdunlock report: the scrubber alone, then the bundle end to end (planted
# secrets must not survive; the scrubbed capture replays; a capture reads
# only itself; no FIFO hangs it; the bundle is made anew).
gdunlock_unit_test(test_report_bundle SOURCES test_report_bundle.c LIBS gdu_report)
target_compile_definitions(test_report_bundle PRIVATE GDUNLOCK_BIN="$<TARGET_FILE:gdunlock>")
add_dependencies(test_report_bundle gdunlock)
