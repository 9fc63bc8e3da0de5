"""Experiment (session 19, issue 14): the transported hyper move on gp_pois_regr in
NumPy, with an exact Laplace (Newton to convergence, Levenberg-damped) at each grid node.

    .venv/bin/python docs/experiments/gp_joint/one_hyper.py [0|1]   # one hyper site (rho or alpha)
    .venv/bin/python docs/experiments/gp_joint/two_hypers.py [N_RHO N_ALPHA]  # joint (rho, alpha) grid

Coordinates as in LazyPPL's tree: z ~ N(0, I); rho = Gamma(25, rate 4) quantile of Phi(z0),
alpha = half-normal(2) quantile of Phi(z1), f = chol(K(rho, alpha) + 1e-10 I) z[2:].
"""
import json, pathlib, zipfile, numpy as np, arviz as az, sys
from scipy import stats, special
data = json.loads(zipfile.ZipFile(pathlib.Path(__file__).resolve().parents[3] / 'corpus/posterior_database/data/data/gp_pois_regr.json.zip').read('gp_pois_regr.json'))
x = np.array(data['x'], float); k = np.array(data['k'], float); n = len(x)
D2 = (x[:, None] - x[None, :]) ** 2
lgk = special.gammaln(k + 1)
def params(z):
    u = special.ndtr(z[0]); rho = stats.gamma.ppf(u, 25, scale=0.25)
    alpha = 2 * special.ndtri(0.5 + 0.5 * special.ndtr(z[1]))
    return rho, alpha
def logpost(z):
    rho, alpha = params(z)
    if not (np.isfinite(rho) and np.isfinite(alpha)) or rho <= 0 or alpha <= 0: return -np.inf
    K = alpha * alpha * np.exp(-0.5 * D2 / rho ** 2) + 1e-10 * np.eye(n)
    try: L = np.linalg.cholesky(K)
    except np.linalg.LinAlgError: return -np.inf
    f = L @ z[2:]
    return np.sum(k * f - np.exp(f) - lgk) - 0.5 * z @ z
HYP = int(sys.argv[1]) if len(sys.argv) > 1 else 0
R = [i for i in range(n + 2) if i != HYP]
def full(xv, zr):
    z = np.empty(n + 2); z[HYP] = xv; z[R] = zr; return z
def laplace(xv, zr):
    f = lambda v: logpost(full(xv, v))
    r = len(zr); e = 1e-4
    for it in range(30):
        f0 = f(zr)
        g = np.array([(f(zr + e * np.eye(r)[i]) - f(zr - e * np.eye(r)[i])) / (2 * e) for i in range(r)])
        H = np.empty((r, r))
        for i in range(r):
            for j in range(i, r):
                ei, ej = e * np.eye(r)[i], e * np.eye(r)[j]
                H[i, j] = H[j, i] = -(f(zr + ei + ej) - f(zr + ei - ej) - f(zr - ei + ej) + f(zr - ei - ej)) / (4 * e * e)
        lam = 0.0
        while True:
            try: np.linalg.cholesky(H + lam * np.eye(r)); break
            except np.linalg.LinAlgError: lam = max(2 * lam, 1e-3)
        step = np.linalg.solve(H + lam * np.eye(r), g)
        t = 1.0
        while f(zr + t * step) < f0 and t > 1e-3: t /= 2
        zr = zr + t * step
        if np.abs(t * step).max() < 1e-7: break
    lam = 0.0
    while True:
        try: return zr, np.linalg.cholesky(np.linalg.inv(H + lam * np.eye(r)))
        except np.linalg.LinAlgError: lam = max(2 * lam, 1e-3)
# grid
grid = np.linspace(-3.5, 2.5, 61) if HYP == 0 else np.linspace(-0.5, 3.5, 61)
ms, Ss = [], []
zr = np.zeros(n + 1)
c = len(grid) // 2
order = list(range(c, len(grid))) + list(range(c - 1, -1, -1))
res = {}
for i in order:
    if i == c - 1: zr = res[c][0]
    zr, S = laplace(grid[i], zr); res[i] = (zr, S)
M = np.array([res[i][0] for i in range(len(grid))]); SS = np.array([res[i][1] for i in range(len(grid))])
def interp(xv):
    j = np.clip(np.searchsorted(grid, xv) - 1, 0, len(grid) - 2)
    t = np.clip((xv - grid[j]) / (grid[j + 1] - grid[j]), 0, 1)
    return M[j] + t * (M[j + 1] - M[j]), SS[j] + t * (SS[j + 1] - SS[j])
def dens(xv, w):
    m, S = interp(xv)
    return logpost(full(xv, m + S @ w)) + np.log(np.abs(np.diag(S))).sum()
rng = np.random.default_rng(0)
def slice1(f, x0, width=1.0):
    f0 = f(x0); lvl = f0 + np.log(rng.uniform())
    lo = x0 - width * rng.uniform(); hi = lo + width
    while f(lo) > lvl: lo -= width
    while f(hi) > lvl: hi += width
    while True:
        x1 = rng.uniform(lo, hi)
        if f(x1) > lvl: return x1
        if x1 < x0: lo = x1
        else: hi = x1
def ess_step(xv, w):
    m, S = interp(xv)
    L = lambda w_: logpost(full(xv, m + S @ w_)) + 0.5 * w_ @ w_
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
    xv = grid[c] + 0.3 * rng.standard_normal(); m, S = interp(xv); w = rng.standard_normal(n + 1) * 0.1
    tr = []
    for it in range(1500):
        xv = slice1(lambda v: dens(v, w), xv)
        w = ess_step(xv, w)
        m, S = interp(xv); z = full(xv, m + S @ w)
        tr.append(params(z))
    chains.append(tr[200:])
A = np.array(chains)
print('hyp', HYP, 'rho mean %.3f sd %.3f ess %.0f' % (A[..., 0].mean(), A[..., 0].std(), az.ess(A[..., 0])),
      'alpha mean %.3f sd %.3f ess %.0f' % (A[..., 1].mean(), A[..., 1].std(), az.ess(A[..., 1])), 'of', A.shape[0] * A.shape[1], 'moves')
