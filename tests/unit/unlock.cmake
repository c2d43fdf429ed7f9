# gdunlock p2p unlock: the plan on the fixture sysroots (tests/fixtures/unlock
# and doctor's).
gdunlock_unit_test(test_unlock_plan SOURCES test_unlock_plan.c LIBS gdu_unlock_plan)
