# The shim-launch contract shared by gdunlock run and verify.
gdunlock_unit_test(test_launch SOURCES test_launch.c LIBS gdu_launch)
