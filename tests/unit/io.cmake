# I/O engine and cuFile loader tests (component: io).
gdunlock_unit_test(test_io_cufile_loader SOURCES test_io_cufile_loader.c LIBS gdu_cuda)
