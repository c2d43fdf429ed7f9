# Driver ABI (src/driverabi): status names, request codes, UVM layouts.
gdunlock_unit_test(test_driverabi_abi SOURCES test_driverabi_abi.c LIBS gdu_driverabi)
