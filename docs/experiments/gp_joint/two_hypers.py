"""Experiment (session 19, issue 14): the transported hyper move on gp_pois_regr in
NumPy, with an exact Laplace (Newton to convergence, Levenberg-damped) at each grid node.

    .venv/bin/python docs/experiments/gp_joint/one_hyper.py [0|1]   # one hyper site (rho or alpha)
    .venv/bin/python docs/experiments/gp_joint/two_hypers.py [N_RHO N_ALPHA]  # joint (rho, alpha) grid

Coordinates as in LazyPPL's tree: z ~ N(0, I); rho = Gamma(25, rate 4) quantile of Phi(z0),
alpha = half-normal(2) quantile of Phi(z1), f = chol(K(rho, alpha) + 1e-10 I) z[2:].
"""
import json, zipfile, numpy as np, arviz as az, sys
from scipy import stats, special
import pathlib
_ONE = (pathlib.Path(__file__).resolve().parent / 'one_hyper.py').read_text()
exec(_ONE.split('HYP = ')[0])
R = list(range(2, n + 2))
def full2(a, b, zr):
    z = np.empty(n + 2); z[0] = a; z[1] = b; z[2:] = zr; return z
def laplace(a, b, zr, iters=30):
    f = lambda v: logpost(full2(a, b, v))
    r = len(zr); e = 1e-4; E = e * np.eye(r)
    for it in range(iters):
        f0 = f(zr)
        g = np.array([(f(zr + E[i]) - f(zr - E[i])) / (2 * e) for i in range(r)])
        H = np.empty((r, r))
        for i in range(r):
            for j in range(i, r):
                H[i, j] = H[j, i] = -(f(zr + E[i] + E[j]) - f(zr + E[i] - E[j]) - f(zr - E[i] + E[j]) + f(zr - E[i] - E[j])) / (4 * e * e)
        lam = 0.0
        while True:
            try: np.linalg.cholesky(H + lam * np.eye(r)); break
            except np.linalg.LinAlgError: lam = max(2 * lam, 1e-3)
        step = np.linalg.solve(H + lam * np.eye(r), g)
        t = 1.0
        while f(zr + t * step) < f0 and t > 1e-3: t /= 2
        zr = zr + t * step
        if np.abs(t * step).max() < 1e-6: break
    return zr, np.linalg.cholesky(np.linalg.inv(H + lam * np.eye(r)))
ga = np.linspace(-2.5, 1.5, int(sys.argv[1]) if len(sys.argv) > 1 else 17)
gb = np.linspace(0.0, 3.0, int(sys.argv[2]) if len(sys.argv) > 2 else 13)
M = np.zeros((len(ga), len(gb), n)); SS = np.zeros((len(ga), len(gb), n, n))
zr = np.zeros(n)
for i, a in enumerate(ga):
    zrow = zr
    for j, b in enumerate(gb):
        zrow, S = laplace(a, b, zrow); M[i, j] = zrow; SS[i, j] = S
        if j == 0: zr = zrow
print('grid built', flush=True)
def interp(a, b):
    i = np.clip(np.searchsorted(ga, a) - 1, 0, len(ga) - 2); j = np.clip(np.searchsorted(gb, b) - 1, 0, len(gb) - 2)
    t = np.clip((a - ga[i]) / (ga[i + 1] - ga[i]), 0, 1); u = np.clip((b - gb[j]) / (gb[j + 1] - gb[j]), 0, 1)
    bl = lambda X: (1 - t) * (1 - u) * X[i, j] + t * (1 - u) * X[i + 1, j] + (1 - t) * u * X[i, j + 1] + t * u * X[i + 1, j + 1]
    return bl(M), bl(SS)
def dens(a, b, w):
    m, S = interp(a, b)
    return logpost(full2(a, b, m + S @ w)) + np.log(np.abs(np.diag(S))).sum()
rng = np.random.default_rng(0)
exec('def slice1' + _ONE.split('def slice1')[1].split('def ess_step')[0])
def ess_step(a, b, w):
    m, S = interp(a, b)
    L = lambda w_: logpost(full2(a, b, m + S @ w_)) + 0.5 * w_ @ w_
    nu = rng.standard_normal(len(w)); lvl = L(w) + np.log(rng.uniform())
    th = rng.uniform(0, 2 * np.pi); lo, hi = th - 2 * np.pi, th
    while True:
        w1 = w * np.cos(th) + nu * np.sin(th)
        if L(w1) > lvl: return w1
        if th < 0: lo = th
        else: hi = th
        th = rng.uniform(lo, hi)
chains = []
for ch in range(4):
    a, b = -0.4 + 0.3 * rng.standard_normal(), 1.4 + 0.3 * rng.standard_normal(); w = rng.standard_normal(n) * 0.1
    tr = []
    for it in range(1000):
        if rng.uniform() < 0.5: a = slice1(lambda v: dens(v, b, w), a)
        else: b = slice1(lambda v: dens(a, v, w), b)
        w = ess_step(a, b, w)
        m, S = interp(a, b); tr.append(params(full2(a, b, m + S @ w)))
    chains.append(tr[100:])
A = np.array(chains)
print('2D rho mean %.3f sd %.3f ess %.0f' % (A[..., 0].mean(), A[..., 0].std(), az.ess(A[..., 0])),
      'alpha mean %.3f sd %.3f ess %.0f' % (A[..., 1].mean(), A[..., 1].std(), az.ess(A[..., 1])), 'of', A.shape[0] * A.shape[1], 'moves')
