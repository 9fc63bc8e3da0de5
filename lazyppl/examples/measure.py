#!/work/main/.venv/bin/python
"""Run an example binary through the harness protocol and summarise the fit.

    measure.py NAME [key=value ...]      e.g. measure.py kidiq kernel=mh thin=1

BIN_DIR overrides where the binary is (default examples/bin).

Prints wall and CPU time, peak RSS, per-chain statistics and, per parameter, mean, sd, bulk/tail
ESS and R-hat (ArviZ), plus min bulk ESS per wall second.
"""
import json, os, pathlib, subprocess, sys, time
import numpy as np
import arviz as az

here = pathlib.Path(__file__).parent
name = sys.argv[1]
msg = json.loads(subprocess.run([sys.executable, here / "input.py", *sys.argv[1:]],
                                capture_output=True, check=True).stdout)
t0 = time.monotonic()
proc = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", pathlib.Path(os.environ.get("BIN_DIR", here / "bin")) / name, "+RTS", "-N2"],
                      input=json.dumps(msg).encode(), capture_output=True)
wall = time.monotonic() - t0
if proc.returncode != 0:
    sys.exit(f"exit {proc.returncode}: {proc.stderr.decode()}")
rss_kb, user, system = proc.stderr.decode().split()[-3:]
rss_mb = int(rss_kb) / 1024
cpu = float(user) + float(system)
out = json.loads(proc.stdout)
draws = np.array([c["draws"] for c in out["chains"]], dtype=float)  # chain, draw, name
print(f"{name}: kernel={out['kernel']} warmup={out['warmup']} draws={out['draws']} "
      f"thin={out['thin']} wall={wall:.2f}s cpu={cpu:.2f}s peakRSS={rss_mb:.0f}MB")
for c in out["chains"]:
    t = c["tuning"]
    print(f"  chain acc={c['acceptance']:.3f} evals={c['evaluations']} invalid={c['invalid_weights']} "
          f"{c['seconds']:.2f}s " + " ".join(f"{k}={v:.3g}" for k, v in t.items()))
idata = az.from_dict(posterior={n: draws[:, :, i] for i, n in enumerate(out["names"])})
s = az.summary(idata, kind="all")
print(s[["mean", "sd", "mcse_mean", "ess_bulk", "ess_tail", "r_hat"]].to_string())
print(f"min bulk ESS {s.ess_bulk.min():.0f}, min tail ESS {s.ess_tail.min():.0f}, "
      f"max R-hat {s.r_hat.max():.3f}, min bulk ESS/s {s.ess_bulk.min() / wall:.1f} (wall), "
      f"{s.ess_bulk.min() / cpu:.1f} (cpu); median bulk ESS/cpu-s {s.ess_bulk.median() / cpu:.1f}")
