# I/O engine and cuFile loader tests (component: io).
gdunlock_unit_test(test_io_cufile_loader SOURCES test_io_cufile_loader.c LIBS gdu_cuda)
gdunlock_unit_test(test_io_options SOURCES test_io_options.c LIBS gdu_io)
gdunlock_unit_test(test_io_roundtrip SOURCES test_io_roundtrip.c LIBS gdu_io)
gdunlock_unit_test(test_io_faults SOURCES test_io_faults.c LIBS gdu_io)
