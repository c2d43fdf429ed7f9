# safetensors loader: header parsing and validation, sharded indexes, host loads.
gdunlock_unit_test(test_safetensors_header SOURCES test_safetensors_header.c LIBS gdu_safetensors)
gdunlock_unit_test(test_safetensors_open SOURCES test_safetensors_open.c LIBS gdu_safetensors)
gdunlock_unit_test(test_safetensors_load SOURCES test_safetensors_load.c LIBS gdu_safetensors)
