"""posteriordb one_comp_mm_elim_abs-one_comp_mm_elim_abs: one-compartment
pharmacokinetics with first-order absorption and Michaelis-Menten elimination.

Stan: k_a, K_m, V_m, sigma > 0, each ~ cauchy(0, 1) (half-Cauchy);
dC/dt = dose(t) - (V_m / V) * C / (K_m + C) with dose(t) = exp(-k_a t) * D * k_a / V for
t > 0 and 0 at t = 0 (as in the Stan function), C(t0) = 0 (transformed data C0 = {0.0});
C_hat[n] ~ lognormal(log(C(times[n])), sigma).

The ODE: Stan uses integrate_ode_bdf (rel. and abs. tol 1e-6). Here classical fixed-step
Runge-Kutta 4 run by pytensor.scan on a mesh graded from t0: the elimination term is stiff
while C < K_m (K_m down to 1e-4 in the reference draws), which lasts ~1e-5 days, so the
steps start at H0 and grow by RATIO up to H_MAX, then stay at most H_MAX, landing on every
measurement time. Against a tight implicit (Radau) solution over posteriordb's reference
draws the log-likelihood errs by at most ~2e-5 (Stan's BDF at its tolerances: 3.9e-4);
see NOTES.md. Needs the `standard` profile (pytensor.scan).
"""
import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

H0 = 1e-6     # first step (days)
RATIO = 1.5   # growth of consecutive steps
H_MAX = 0.125  # largest step (days)


def mesh(t0, times):
    """Step start times and sizes from t0 through every measurement time, and for each
    measurement time the index of the step that ends on it."""
    starts, sizes, ends = [], [], []
    t, h = t0, H0
    for target in times:
        while target - t > 1e-12:
            if h >= H_MAX:  # equal steps of at most H_MAX up to the target
                n = max(1, math.ceil((target - t) / H_MAX - 1e-9))
                for i in range(n):
                    starts.append(t + i * (target - t) / n)
                    sizes.append((target - t) / n)
                t = target
            else:
                step = min(h, target - t)
                starts.append(t)
                sizes.append(step)
                t, h = t + step, min(h * RATIO, H_MAX)
        ends.append(len(sizes) - 1)
    return (np.asarray(starts, dtype=float), np.asarray(sizes, dtype=float),
            np.asarray(ends, dtype="int64"))


def model(data):
    t0 = float(data["t0"])
    dose0 = float(data["D"])
    volume = float(data["V"])
    times = np.asarray(data["times"], dtype=float)
    c_hat = np.asarray(data["C_hat"], dtype=float)
    starts, sizes, ends = mesh(t0, times)

    def rhs(t, c, k_a, K_m, V_m):
        dose = pt.switch(t > 0, pt.exp(-k_a * t) * dose0 * k_a / volume, 0.0)
        return dose - (V_m / volume) * c / (K_m + c)

    def rk4_step(t, h, c, k_a, K_m, V_m):
        k1 = rhs(t, c, k_a, K_m, V_m)
        k2 = rhs(t + 0.5 * h, c + 0.5 * h * k1, k_a, K_m, V_m)
        k3 = rhs(t + 0.5 * h, c + 0.5 * h * k2, k_a, K_m, V_m)
        k4 = rhs(t + h, c + h * k3, k_a, K_m, V_m)
        return c + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)

    with pm.Model() as m:
        k_a = pm.HalfCauchy("k_a", beta=1.0)
        K_m = pm.HalfCauchy("K_m", beta=1.0)
        V_m = pm.HalfCauchy("V_m", beta=1.0)
        sigma = pm.HalfCauchy("sigma", beta=1.0)
        c, _ = pytensor.scan(fn=rk4_step, sequences=[pt.as_tensor(starts), pt.as_tensor(sizes)],
                             outputs_info=[pt.as_tensor(np.float64(0.0))],
                             non_sequences=[k_a, K_m, V_m])
        pm.LogNormal("C_hat", mu=pt.log(c[ends]), sigma=sigma, observed=c_hat)
    return m
