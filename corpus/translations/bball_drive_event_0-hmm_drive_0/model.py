"""posteriordb bball_drive_event_0-hmm_drive_0: two-state HMM, exponential emissions.

Stan: theta1, theta2 (rows of the transition matrix, theta[j, k] = P(j -> k)) have
target += dirichlet_lpdf(theta[k] | alpha[k, :]); phi and lambda are positive_ordered[2]
with target += normal_lpdf(phi[1] | 0, 1) + normal_lpdf(phi[2] | 3, 1) and the same for
lambda; given state k, u[t] ~ exponential(phi[k]) and v[t] ~ exponential(lambda[k])
(rates), independently. Hidden states are marginalised by the forward algorithm started
from gamma[1, k] = emission log-density, i.e. a uniform initial distribution (up to log K).

Marginal likelihood as observed variables (no Potential): by the chain rule
p(u, v) = prod_t p(u[t] | past) p(v[t] | u[t], past), where past = (u, v)[1..t-1];
p(u[t] | past) = sum_k W[t, k] exponential(u[t] | phi[k]) with W[t] = P(z[t] = . | past)
the forward algorithm's predictive state probabilities, and
p(v[t] | u[t], past) = sum_k V[t, k] exponential(v[t] | lambda[k]) with
V[t, k] proportional to W[t, k] exponential(u[t] | phi[k]). So u and v are two observed
exponential mixtures whose weights are computed from (u, v, phi, lambda, theta): exactly
the HMM likelihood. W comes from a parallel (Hillis-Steele) prefix-product scan of the
forward recursion, each product rescaled to sum 1 (only directions matter).
"""
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.transforms import Chain, log, ordered


def predictive_state_probs(log_emission, trans, n, k):
    """W[t, j] = P(z[t] = j | y[1..t-1]) for t = 1..n, uniform initial distribution.

    log_emission: (n, k) tensor of log p(y[t] | z[t] = j); trans: (k, k) tensor with
    trans[i, j] = P(z[t+1] = j | z[t] = i).
    """
    init = np.full(k, 1.0 / k)
    if n == 1:
        return pt.as_tensor_variable(init[None, :])
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


def model(data):
    u = np.asarray(data["u"], dtype=float)
    v = np.asarray(data["v"], dtype=float)
    n, k = len(u), int(data["K"])
    alpha = np.asarray(data["alpha"], dtype=float).reshape(k, k)
    positive_ordered = Chain([log, ordered])
    with pm.Model() as m:
        theta1 = pm.Dirichlet("theta1", a=alpha[0])
        theta2 = pm.Dirichlet("theta2", a=alpha[1])
        phi = pm.Normal("phi", mu=np.array([0.0, 3.0]), sigma=1.0, shape=k,
                        transform=positive_ordered, initval=np.array([1.0, 3.0]))
        lam = pm.Normal("lambda", mu=np.array([0.0, 3.0]), sigma=1.0, shape=k,
                        transform=positive_ordered, initval=np.array([0.5, 1.0]))
        trans = pt.stack([theta1, theta2])
        log_u = pt.log(phi)[None, :] - u[:, None] * phi[None, :]      # exponential log-pdf
        log_v = pt.log(lam)[None, :] - v[:, None] * lam[None, :]
        w = predictive_state_probs(log_u + log_v, trans, n, k)
        # state probabilities after also seeing u[t]
        w_u = w * pt.exp(log_u - pt.max(log_u, axis=1, keepdims=True))
        w_u = w_u / pt.sum(w_u, axis=1, keepdims=True)
        pm.Mixture("u", w=w, comp_dists=pm.Exponential.dist(lam=phi, shape=(n, k)), observed=u)
        pm.Mixture("v", w=w_u, comp_dists=pm.Exponential.dist(lam=lam, shape=(n, k)), observed=v)
    return m
