"""posteriordb hmm_example-hmm_example: two-state hidden Markov model, normal emissions.

Stan: theta1, theta2 are simplex[K] with no prior statement (uniform on the simplex,
Dirichlet(1, ..., 1)) and are the rows of the transition matrix (theta[j, k] = P(j -> k));
mu is positive_ordered[K] with target += normal_lpdf(mu[1] | 3, 1) + normal_lpdf(mu[2] | 10, 1);
y[t] | z[t] = k ~ normal(mu[k], 1). The hidden states are marginalised by the forward
algorithm, started from gamma[1, k] = normal_lpdf(y[1] | mu[k], 1), i.e. a uniform
initial distribution (up to the constant log K).

Marginal likelihood as an observed variable (no Potential): by the chain rule
p(y) = prod_t p(y[t] | y[1..t-1]) and p(y[t] | y[1..t-1]) = sum_k W[t, k] normal(y[t] | mu[k], 1),
where W[t] = P(z[t] = . | y[1..t-1]) are the forward algorithm's predictive state
probabilities. So y ~ NormalMixture(w=W, mu, 1) with W computed from (y, mu, theta)
is exactly the HMM likelihood. W[1] is uniform and W[t+1] is proportional to
W[1] A[1] ... A[t] with A[s] = diag(emission[s]) @ Theta; the prefix products are
computed by a parallel (Hillis-Steele) scan in ceil(log2(N - 1)) vectorised rounds,
each product rescaled to sum 1 (W only needs the direction, so scales are irrelevant).
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
    y = np.asarray(data["y"], dtype=float)
    n, k = len(y), int(data["K"])
    with pm.Model() as m:
        theta1 = pm.Dirichlet("theta1", a=np.ones(k))
        theta2 = pm.Dirichlet("theta2", a=np.ones(k))
        mu = pm.Normal("mu", mu=np.array([3.0, 10.0]), sigma=1.0, shape=k,
                       transform=Chain([log, ordered]), initval=np.array([3.0, 10.0]))
        trans = pt.stack([theta1, theta2])
        log_emission = -0.5 * (y[:, None] - mu[None, :]) ** 2 - 0.5 * np.log(2 * np.pi)
        w = predictive_state_probs(log_emission, trans, n, k)
        pm.NormalMixture("y", w=w, mu=mu, sigma=1.0, observed=y)
    return m
