# The model of the kernel's persistent pin (src/pinmodel), rule by rule.
gdunlock_unit_test(test_pin_model SOURCES test_pin_model.c LIBS gdu_pinmodel)
