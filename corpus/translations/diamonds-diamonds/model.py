"""posteriordb diamonds-diamonds: brms linear regression with 24 centred predictors.

Stan (brms 2.10): Xc = columns 2..K of X centred by their means (transformed data,
computed here from this scope's X); b ~ normal(0, 1); Intercept ~ student_t(3, 8, 10);
sigma > 0 ~ student_t(3, 0, 10) truncated at 0 (a half-t); prior_only = 0 in the data,
so Y ~ normal(Intercept + Xc * b, sigma) (normal_id_glm). Needs a dense or low-rank
mass matrix (strongly correlated b).
"""
import numpy as np
import pymc as pm


def model(data):
    K = int(data["K"])
    X = np.asarray(data["X"], dtype=float).reshape(-1, K)
    Y = np.asarray(data["Y"], dtype=float)
    Xc = X[:, 1:] - np.sum(X[:, 1:], axis=0) / X.shape[0]
    with pm.Model() as m:
        b = pm.Normal("b", mu=0.0, sigma=1.0, shape=K - 1)
        intercept = pm.StudentT("Intercept", nu=3.0, mu=8.0, sigma=10.0)
        sigma = pm.HalfStudentT("sigma", nu=3.0, sigma=10.0)
        if int(data["prior_only"]) == 0:
            pm.Normal("Y", mu=intercept + pm.math.dot(Xc, b), sigma=sigma, observed=Y)
    return m
