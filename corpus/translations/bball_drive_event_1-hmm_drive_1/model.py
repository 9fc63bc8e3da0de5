"""posteriordb bball_drive_event_1-hmm_drive_1: two-state HMM, normal emissions.

Stan: theta1, theta2 (rows of the transition matrix, theta[j, k] = P(j -> k)) have
target += dirichlet_lpdf(theta[k] | alpha[k, :]); phi and lambda are ordered[2]
with target += normal_lpdf(phi[1] | 0, 1) + normal_lpdf(phi[2] | 3, 1) and the same for
lambda; given state k, u[t] ~ normal(phi[k], tau) and v[t] ~ normal(lambda[k], rho)
(tau, rho from the data), independently. Hidden states are marginalised by the forward algorithm started
from gamma[1, k] = emission log-density, i.e. a uniform initial distribution (up to log K).

Marginal likelihood as observed variables (no Potential): by the chain rule
p(u, v) = prod_t p(u[t] | past) p(v[t] | u[t], past), where past = (u, v)[1..t-1];
p(u[t] | past) = sum_k W[t, k] normal(u[t] | phi[k], tau) with W[t] = P(z[t] = . | past)
the forward algorithm's predictive state probabilities, and
p(v[t] | u[t], past) = sum_k V[t, k] normal(v[t] | lambda[k], rho) with
V[t, k] proportional to W[t, k] normal(u[t] | phi[k], tau). So u and v are two observed
normal mixtures whose weights are computed from (u, v, phi, lambda, theta): exactly
the HMM likelihood. W comes from a parallel (Hillis-Steele) prefix-product scan of the
forward recursion, each product rescaled to sum 1 (only directions matter).
"""
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.transforms import ordered


def predictive_state_probs(log_emission, trans, n, k):
    """W[t, j] = P(z[t] = j | y[1..t-1]) for t = 1..n, uniform initial distribution.

    log_emission: (n, k) tensor of log p(y[t] | z[t] = j); trans: (k, k) tensor with
    trans[i, j] = P(z[t+1] = j | z[t] = i).
    """
    init = np.full(k, 1.0 / k)
    if n == 1:
        return pt.as_tensor_variable(init[None, :])
    if k == 2:
        return _two_state_probs(log_emission, trans, n)
    # emission ratios in [0, 1]; the per-row scale cancels in the normalisations below
    g = pt.exp(log_emission - pt.max(log_emission, axis=1, keepdims=True))
    prods = g[:-1, :, None] * trans[None, :, :]          # A[t] = diag(g[t]) @ trans
    prods = prods / pt.sum(prods, axis=(1, 2), keepdims=True)
    shift = 1
    while shift < n - 1:                                 # inclusive prefix products
        joined = pt.sum(prods[:-shift, :, :, None] * prods[shift:, None, :, :], axis=2)
        joined = joined / pt.sum(joined, axis=(1, 2), keepdims=True)
        prods = pt.concatenate([prods[:shift], joined], axis=0)
        shift *= 2
    alpha = pt.sum(init[None, :, None] * prods, axis=1)  # init @ A[1] ... A[t]
    rest = alpha / pt.sum(alpha, axis=1, keepdims=True)
    return pt.concatenate([pt.as_tensor_variable(init[None, :]), rest], axis=0)


def _two_state_probs(log_emission, trans, n):
    """predictive_state_probs for k = 2 with each 2 x 2 product held as four vectors (its
    entries), so every step is a 1-D elementwise operation: the same numbers (relative
    difference < 1e-11, value and gradient) at about a quarter of the compiled cost."""
    g = pt.exp(log_emission - pt.max(log_emission, axis=1, keepdims=True))
    g0, g1 = g[:-1, 0], g[:-1, 1]
    m = [g0 * trans[0, 0], g0 * trans[0, 1], g1 * trans[1, 0], g1 * trans[1, 1]]
    total = m[0] + m[1] + m[2] + m[3]
    m = [x / total for x in m]
    shift = 1
    while shift < n - 1:                                 # inclusive prefix products
        a, b, c, d = (x[:-shift] for x in m)            # left factors A[t - shift]
        e, f, g_, h = (x[shift:] for x in m)            # right factors A[t]
        joined = [a * e + b * g_, a * f + b * h, c * e + d * g_, c * f + d * h]
        total = joined[0] + joined[1] + joined[2] + joined[3]
        m = [pt.concatenate([x[:shift], y / total]) for x, y in zip(m, joined)]
        shift *= 2
    # uniform init: (row 1 + row 2) / 2, normalised; both weights divided by the sum of
    # their own numerators, so each lies in [0, 1] after rounding (1 - w0 can be -1e-16,
    # which the mixture's weight check rejects)
    first, second = m[0] + m[2], m[1] + m[3]
    rest = pt.stack([first / (first + second), second / (first + second)], axis=1)
    return pt.concatenate([pt.as_tensor_variable(np.full((1, 2), 0.5)), rest], axis=0)


def model(data):
    u = np.asarray(data["u"], dtype=float)
    v = np.asarray(data["v"], dtype=float)
    n, k = len(u), int(data["K"])
    tau, rho = float(data["tau"]), float(data["rho"])
    alpha = np.asarray(data["alpha"], dtype=float).reshape(k, k)
    with pm.Model() as m:
        theta1 = pm.Dirichlet("theta1", a=alpha[0])
        theta2 = pm.Dirichlet("theta2", a=alpha[1])
        phi = pm.Normal("phi", mu=np.array([0.0, 3.0]), sigma=1.0, shape=k,
                        transform=ordered, initval=np.array([-1.0, 1.0]))
        lam = pm.Normal("lambda", mu=np.array([0.0, 3.0]), sigma=1.0, shape=k,
                        transform=ordered, initval=np.array([1.0, 3.0]))
        trans = pt.stack([theta1, theta2])
        log_u = -0.5 * ((u[:, None] - phi[None, :]) / tau) ** 2     # normal log-pdf up to
        log_v = -0.5 * ((v[:, None] - lam[None, :]) / rho) ** 2     # constants (cancel in W)
        w = predictive_state_probs(log_u + log_v, trans, n, k)
        # state probabilities after also seeing u[t]
        w_u = w * pt.exp(log_u - pt.max(log_u, axis=1, keepdims=True))
        w_u = w_u / pt.sum(w_u, axis=1, keepdims=True)
        pm.NormalMixture("u", w=w, mu=phi, sigma=tau, observed=u)
        pm.NormalMixture("v", w=w_u, mu=lam, sigma=rho, observed=v)
    return m
