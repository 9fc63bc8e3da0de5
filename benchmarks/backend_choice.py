"""NUTS backend choice: compile (cold, warm process, cached), sampling and ESS per corpus posterior.

Run on demand (not in CI)::

    heavy .venv/bin/python benchmarks/backend_choice.py                 # all, ~40 min
    heavy .venv/bin/python benchmarks/backend_choice.py --posterior arK-arK --backend nutpie

FIGURES: see the table below (filled in from a run) and docs/ARCHITECTURE.md.

What is measured, per corpus posterior (corpus/translations/<p>/model.py on the
posteriordb data) and backend, each phase in a fresh Python process with exactly the
sandboxed child's environment (``runner.child_environment``: ``PYTENSOR_FLAGS`` with a
private ``base_compiledir`` and ``numba__fastmath=False``, one BLAS thread, private
numba/JAX/matplotlib caches; JAX backends get one XLA host device per chain as in the
child). These are our own programs, so they run unsandboxed here; the sampling code is
the child's own (``backends.sampler``), 4 chains x 1000 draws after 1000 tuning steps,
cores=2, seed 1, target_accept 0.8, no divergence retries, mass matrix ``low_rank``
(nutpie's low-rank; ``dense`` for pymc and numpyro; the runner's default) unless the
configuration says ``diag``.

- cold:   empty compile directory; the first compile in a fresh process.
- warm:   empty compile directory; the process first fits a tiny model (two parameters,
          five observations, 4 x 20 draws) with the same backend, as the pre-warmed
          child does, then compiles and samples the posterior.
- cached: the cold run's compile directory (now holding this program's PyTensor C or
          numba cache), warm-up as above: what a trusted, repeated program sees (the
          corpus batch with the shared cache). JAX backends have no persistent cache in
          the child, so they skip this phase.

``compile`` is the backend's split (``Sampled.compile_seconds``): nutpie builds its
numba/JAX functions before sampling; pm.sample compiles inside and its sampling time is
subtracted; for the JAX backends the XLA compilation happens inside ``sample``. So
compare ``compile + sample`` (end to end, after import) across backends. ESS is ArviZ's
bulk ESS, the minimum over every scalar of the posterior's reported parameters
(meta.json); ESS/s = min ESS / (warm compile + sample).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Smallest first; diamonds (dense posterior, 5000 rows) last.
POSTERIORS = [
    "eight_schools-eight_schools_noncentered",
    "kidiq-kidscore_momiq",
    "earnings-earn_height",
    "mesquite-logmesquite_logvash",
    "nes2000-nes",
    "arK-arK",
    "garch-garch11",
    "low_dim_gauss_mix-low_dim_gauss_mix",
    "gp_pois_regr-gp_pois_regr",
    "mcycle_gp-accel_gp",
    "diamonds-diamonds",
]
# (label, backend, mass matrix)
CONFIGS = [
    ("nutpie", "nutpie", "low_rank"),
    ("nutpie-diag", "nutpie", "diag"),
    ("nutpie-jax", "nutpie-jax", "low_rank"),
    ("pymc", "pymc", "low_rank"),
    ("numpyro", "numpyro", "low_rank"),
]
JAX_BACKENDS = ("nutpie-jax", "numpyro")
# Diagonal adaptation on diamonds takes minutes on every backend (PITFALLS.md).
DIAG_SKIP = ("diamonds-diamonds",)

TINY = '''
import numpy as np
import pymc as pm

def model(data):
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", mu, sigma, observed=np.asarray(data["y"], dtype=float))
    return m
'''
TINY_DATA = {"y": [0.3, -1.2, 0.8, 0.1, 1.5]}


# ---------------------------------------------------------------------------- child side

def _build(source: str, data: dict):
    namespace: dict = {"__name__": "benchmark_program"}
    exec(compile(source, "model.py", "exec"), namespace)  # noqa: S102 - our corpus
    entry = namespace.get("model") or namespace.get("make_model")
    return entry(data)


def _nutpie_jax(model, job: dict):
    """nutpie with its JAX backend (log-density and gradient through JAX)."""
    import nutpie

    from workers.pymc_runner.backends import Sampled

    started = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax")
    compile_seconds = time.perf_counter() - started

    def run(accept: float):
        begun = time.perf_counter()
        idata = nutpie.sample(compiled, draws=job["draws"], tune=job["tune"],
                              chains=job["chains"], cores=job["cores"], seed=job["seed"],
                              target_accept=accept, progress_bar=False, save_warmup=False,
                              low_rank_modified_mass_matrix=job["mass_matrix"] == "low_rank")
        return Sampled(idata, compile_seconds, time.perf_counter() - begun)

    return run


def _fit(model, job: dict):
    from workers.pymc_runner import backends

    if job["backend"] == "nutpie-jax":
        return _nutpie_jax(model, job)(job["target_accept"])
    return backends.sampler(model, job)(job["target_accept"])


def child_main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    started = time.perf_counter()
    import arviz as az
    import numpy as np
    import pymc  # noqa: F401

    from workers.pymc_runner.choice import model_size
    out: dict = {"import": time.perf_counter() - started}
    job = {"chains": 4, "tune": 1000, "draws": 1000, "cores": 2, "seed": 1,
           "target_accept": 0.8, "backend": spec["backend"], "mass_matrix": spec["mass_matrix"]}
    if spec["phase"] != "cold":
        t = time.perf_counter()
        _fit(_build(TINY, TINY_DATA), {**job, "tune": 20, "draws": 20})
        out["warmup"] = time.perf_counter() - t
    t = time.perf_counter()
    model = _build(spec["source"], spec["data"])
    out["build"] = time.perf_counter() - t
    out["size"] = model_size(model)
    sampled = _fit(model, job)
    out["compile"] = sampled.compile_seconds
    out["sample"] = sampled.sample_seconds
    out["drawn_by"] = sampled.backend or spec["backend"]
    posterior = sampled.idata.posterior
    names = [n for n in spec["parameters"] if n in posterior] or list(posterior.data_vars)
    ess = az.ess(posterior[names], method="bulk")
    out["min_ess"] = float(min(np.nanmin(ess[n].values) for n in names))
    out["divergences"] = int(np.asarray(sampled.idata.sample_stats["diverging"]).sum())
    print(json.dumps(out), flush=True)


# --------------------------------------------------------------------------- parent side

def run_phase(posterior: str, backend: str, mass: str, phase: str, workdir: Path,
              wall: float) -> dict:
    from corpus.loader import load_data
    from workers.pymc_runner.runner import child_environment

    meta_path = ROOT / "corpus" / "translations" / posterior / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    spec = {"source": (ROOT / "corpus" / "translations" / posterior / "model.py").read_text(),
            "data": load_data(posterior), "parameters": meta.get("parameters", []),
            "backend": backend, "mass_matrix": mass, "phase": phase}
    workdir.mkdir(parents=True, exist_ok=True)
    for sub in ("home", "numba", "matplotlib"):
        (workdir / sub).mkdir(exist_ok=True)
    spec_path = workdir / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = child_environment(workdir)
    if backend in JAX_BACKENDS:
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, __file__, "--child", str(spec_path)], env=env,
                              cwd=workdir, capture_output=True, text=True, timeout=wall)
    except subprocess.TimeoutExpired:
        return {"error": f"over {wall:.0f} s", "process": time.monotonic() - started}
    process = time.monotonic() - started
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1][:160] if done.stderr else
                f"exit {done.returncode}", "process": process}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process"] = process
    return result


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posterior", action="append", choices=POSTERIORS)
    parser.add_argument("--config", action="append", choices=[c[0] for c in CONFIGS])
    parser.add_argument("--phase", action="append", choices=["cold", "warm", "cached"])
    parser.add_argument("--wall", type=float, default=300.0)
    parser.add_argument("--jsonl", type=Path, help="append one JSON line per phase here")
    args = parser.parse_args()
    phases = args.phase or ["cold", "warm", "cached"]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {load()}", flush=True)
    print(f"{'posterior':40} {'config':11} {'phase':6} {'import':>6} {'warmup':>6} "
          f"{'compile':>7} {'sample':>7} {'minESS':>7} {'ESS/s':>7} {'div':>4}  load", flush=True)
    for posterior in args.posterior or POSTERIORS:
        for label, backend, mass in CONFIGS:
            if args.config and label not in args.config:
                continue
            with tempfile.TemporaryDirectory(prefix="ppl-audit-choice-") as tmp:
                for phase in phases:
                    if phase == "cached" and (backend in JAX_BACKENDS or "cold" not in phases):
                        continue
                    if label == "nutpie-diag" and (phase != "warm" or posterior in DIAG_SKIP):
                        continue  # the mass matrix does not change compile times
                    workdir = Path(tmp) / ("cold" if phase == "cached" else phase)
                    r = run_phase(posterior, backend, mass, phase, workdir, args.wall)
                    r.update(posterior=posterior, config=label, phase=phase, load=load())
                    _print(r)
                    if args.jsonl:
                        with args.jsonl.open("a") as f:
                            f.write(json.dumps(r) + "\n")


def _print(r: dict) -> None:
    prefix = f"{r['posterior']:40} {r['config']:11} {r['phase']:6}"
    if "error" in r:
        print(f"{prefix} after {r['process']:.0f} s: {r['error']}  {r['load']}", flush=True)
        return
    total = r["compile"] + r["sample"]
    print(f"{prefix} {r['import']:6.1f} {r.get('warmup', 0):6.1f} {r['compile']:7.2f} "
          f"{r['sample']:7.2f} {r['min_ess']:7.0f} {r['min_ess'] / total:7.0f} "
          f"{r['divergences']:4d}  {r['load']}  {r['size']}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child_main(sys.argv[2])
    else:
        main()
