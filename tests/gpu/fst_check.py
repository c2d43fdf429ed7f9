#!/usr/bin/env python3
"""fastsafetensors (vLLM's --load-format fastsafetensors) on one checkpoint:
which copier it chose (GDS through cuFile, or its nogds bounce buffer after
warning "GDS is not supported"), and every tensor compared with
safetensors.torch.load_file's. Prints one JSON line. Run under the shim's
GeForce stand-in by fastsafetensors.sh.

    python3 fst_check.py FILE..."""
import json
import sys
import warnings

import torch
import safetensors.torch
from fastsafetensors import fastsafe_open


def main(files):
    torch.cuda.init()
    ref = {}
    for f in files:
        ref.update(safetensors.torch.load_file(f, device="cuda:0"))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with fastsafe_open(files, device="cuda:0", nogds=False) as f:
            differ = [k for k in f.keys() if not torch.equal(f.get_tensor(k), ref[k])]
            keys = f.keys()
    fell_back = [str(w.message) for w in seen if "nogds" in str(w.message)]
    print(json.dumps({"copier": "nogds" if fell_back else "gds", "warnings": fell_back,
                      "tensors": len(keys), "missing": sorted(set(ref) - set(keys)),
                      "differ": differ}))


if __name__ == "__main__":
    main(sys.argv[1:])
