"""nutpie's numba compile and sampling at each LLVM optimisation level (``NUMBA_OPT``).

For each named corpus posterior and each level, a fresh process (the child's environment:
a private copy of the shared PyTensor cache, fastmath off) builds the PyMC program on the
posterior's full data, compiles it with nutpie and samples 4 x 1,000 after 1,000 tuning
(seed 1, low-rank mass matrix, 2 cores), and prints compile and sampling seconds and a
hash of all draws (the level must not change them: without fastmath LLVM may not
reassociate floating-point arithmetic).

    .venv/bin/python benchmarks/numba_opt.py [--levels 1 3] [--repeat 1] NAME [NAME ...]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ONE = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[2])
import nutpie
from corpus.loader import load_data
name = sys.argv[1]
ns = {}
exec(open(f"{sys.argv[2]}/corpus/translations/{name}/model.py").read(), ns)
m = (ns.get("model") or ns.get("make_model"))(load_data(name))
t = time.monotonic()
compiled = nutpie.compile_pymc_model(m, backend="numba")
compile_s = time.monotonic() - t
t = time.monotonic()
idata = nutpie.sample(compiled, draws=1000, tune=1000, chains=4, cores=2, seed=1,
                      progress_bar=False, low_rank_modified_mass_matrix=True)
sample_s = time.monotonic() - t
h = hashlib.sha256()
for v in sorted(idata.posterior.data_vars):
    h.update(idata.posterior[v].values.tobytes())
print(json.dumps({"compile": round(compile_s, 2), "sample": round(sample_s, 2),
                  "draws": h.hexdigest()[:16]}))
"""


def one(name: str, level: int) -> dict:
    from workers.pymc_runner.runner import shared_compile_cache
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(shared_compile_cache(), Path(tmp) / "pytensor")
        env = dict(os.environ, NUMBA_OPT=str(level), NUMBA_CACHE_DIR=f"{tmp}/numba",
                   PYTENSOR_FLAGS=f"base_compiledir={tmp}/pytensor,numba__fastmath=False",
                   PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
        out = subprocess.run([sys.executable, "-c", ONE, name, str(ROOT)], env=env,
                             check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="+")
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    for name in args.names:
        for r in range(args.repeat):
            for level in args.levels:  # alternate levels within each repeat
                res = one(name, level)
                print(json.dumps({"posterior": name, "NUMBA_OPT": level, **res}), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
