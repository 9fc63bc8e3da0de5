"""posteriordb hudson_lynx_hare-lotka_volterra: Lotka-Volterra ODE for hare/lynx pelts.

Stan: theta = (alpha, beta, gamma, delta) > 0 with theta[1], theta[3] ~ normal(1, 0.5) and
theta[2], theta[4] ~ normal(0.05, 0.05) on theta > 0 (truncated normals: the truncation
changes only a constant); z_init > 0 ~ lognormal(log(10), 1); sigma > 0 ~ lognormal(-1, 1);
z = solution at ts of du/dt = (alpha - beta v) u, dv/dt = (-gamma + delta u) v from
z(0) = z_init; y_init[k] ~ lognormal(log(z_init[k]), sigma[k]);
y[:, k] ~ lognormal(log(z[:, k]), sigma[k]).

The ODE: Stan uses an adaptive Dormand-Prince 5(4) solver (integrate_ode_rk45, rel. tol
1e-5, abs. tol 1e-3). Here classical fixed-step Runge-Kutta 4 run by pytensor.scan, each
interval between consecutive times of the scope (from t = 0) cut into equal steps of at
most H_MAX years. Against a 1e-12 solution over posteriordb's reference draws the
log-likelihood errs by at most ~1e-4 (Stan's own solver at its tolerances: 3.4e-2); see
NOTES.md. Needs the `standard` profile (pytensor.scan).
"""
import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

# largest RK4 step (years); 1/8: log-likelihood error <= 1.2e-4 over the reference draws
H_MAX = 0.125


def rk4_step(h, u, v, alpha, beta, gamma, delta):
    """One classical Runge-Kutta step of size h for the Lotka-Volterra system."""
    def rhs(u, v):
        return (alpha - beta * v) * u, (-gamma + delta * u) * v

    k1u, k1v = rhs(u, v)
    k2u, k2v = rhs(u + 0.5 * h * k1u, v + 0.5 * h * k1v)
    k3u, k3v = rhs(u + 0.5 * h * k2u, v + 0.5 * h * k2v)
    k4u, k4v = rhs(u + h * k3u, v + h * k3v)
    return (u + h / 6.0 * (k1u + 2.0 * k2u + 2.0 * k3u + k4u),
            v + h / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v))


def model(data):
    ts = np.asarray(data["ts"], dtype=float)
    y = np.asarray(data["y"], dtype=float).reshape(len(ts), 2)
    y_init = np.asarray(data["y_init"], dtype=float)
    # the step sizes: each interval (t[i-1], t[i]] (t[0] = 0) in equal steps <= H_MAX
    steps, ends = [], []
    previous = 0.0
    for t in ts:
        n = max(1, math.ceil((t - previous) / H_MAX - 1e-9))
        steps.extend([(t - previous) / n] * n)
        ends.append(len(steps) - 1)  # the scan output after the last step of the interval
        previous = t
    steps = np.asarray(steps, dtype=float)
    ends = np.asarray(ends, dtype="int64")
    with pm.Model() as m:
        location = np.array([1.0, 0.05, 1.0, 0.05])
        # NUTS starts near the prior's location (PyMC's default start for a
        # TruncatedNormal with lower=0 is theta = 1: beta, delta 20 times their prior
        # scale, from where chains can settle in a minor mode; see NOTES.md)
        theta = pm.TruncatedNormal("theta", mu=location,
                                   sigma=np.array([0.5, 0.05, 0.5, 0.05]), lower=0.0,
                                   shape=4, initval=location)
        z_init = pm.LogNormal("z_init", mu=math.log(10.0), sigma=1.0, shape=2)
        sigma = pm.LogNormal("sigma", mu=-1.0, sigma=1.0, shape=2)
        (us, vs), _ = pytensor.scan(
            fn=rk4_step, sequences=[pt.as_tensor(steps)],
            outputs_info=[z_init[0], z_init[1]],
            non_sequences=[theta[0], theta[1], theta[2], theta[3]])
        z = pt.stack([us[ends], vs[ends]], axis=1)
        pm.LogNormal("y_init", mu=pt.log(z_init), sigma=sigma, observed=y_init)
        pm.LogNormal("y", mu=pt.log(z), sigma=sigma, observed=y)
    return m
