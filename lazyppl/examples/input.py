#!/usr/bin/env python3
"""Print a harness-protocol input for an example: input.py NAME [key=value ...]."""
import json, pathlib, sys
here = pathlib.Path(__file__).parent
name = sys.argv[1]
msg = {"data": json.loads((here / name / "data.json").read_text()), "seed": 1,
       "chains": 4, "warmup": 4000, "draws": 1000, "thin": 10, "kernel": "default"}
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    msg[k] = v if k == "kernel" else float(v) if "." in v else int(v)
print(json.dumps(msg))
