-- posteriordb hudson_lynx_hare-lotka_volterra: Lotka-Volterra ODE for hare/lynx pelts.
-- Stan: theta = (alpha, beta, gamma, delta) > 0 with theta[1], theta[3] ~ normal(1, 0.5)
-- and theta[2], theta[4] ~ normal(0.05, 0.05) (on theta > 0); z_init > 0 ~
-- lognormal(log(10), 1); sigma > 0 ~ lognormal(-1, 1); z = solution at ts of
-- du/dt = (alpha - beta v) u, dv/dt = (-gamma + delta u) v from z(0) = z_init;
-- y_init[k] ~ lognormal(log(z_init[k]), sigma[k]); y[:, k] ~ lognormal(log(z[:, k]), sigma[k]).
-- theta > 0: the normal draws are restricted to positive values (weight zero
-- otherwise), Stan's density on that region up to a constant.
-- The ODE: Stan uses an adaptive Dormand-Prince 5(4) solver (integrate_ode_rk45, rel.
-- tol 1e-5, abs. tol 1e-3); here the same method (LazyPPL.ODE.dormandPrince) with
-- tolerances 1e-6: over posteriordb's reference draws the log-likelihood errs by at most
-- 2.7e-4 against a tight solution (Stan's tolerances: 8.2e-3; benchmarks/ode_accuracy.py
-- --lazyppl). A solver failure, as in Stan, gives weight zero.
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge
import LazyPPL.ODE (dormandPrince)

model :: Data -> Meas Draw
model d = do
  alpha <- sample (normal 1 0.5)
  beta' <- sample (normal 0.05 0.05)
  gamma' <- sample (normal 1 0.5)
  delta <- sample (normal 0.05 0.05)
  u0 <- sample (logNormal (log 10) 1)
  v0 <- sample (logNormal (log 10) 1)
  s1 <- sample (logNormal (-1) 1)
  s2 <- sample (logNormal (-1) 1)
  let rhs _ [u, v] = [(alpha - beta' * v) * u, (-gamma' + delta * u) * v]
      rhs _ _ = error "the Lotka-Volterra state has two components"
      positive = all (> 0) [alpha, beta', gamma', delta]
      loglik = case (positive, dormandPrince 1e-6 1e-6 rhs 0 [u0, v0] ts) of
        (True, Just zs) ->
          logNormalLogPdf (log u0) s1 yInitU + logNormalLogPdf (log v0) s2 yInitV
            + sum [ logNormalLogPdf (log u) s1 yu + logNormalLogPdf (log v) s2 yv
                  | ([u, v], [yu, yv]) <- zip zs ys ]
        _ -> -1 / 0
  scoreLog (Exp loglik)
  return (draw [ vector "theta" [alpha, beta', gamma', delta], vector "z_init" [u0, v0]
               , vector "sigma" [s1, s2] ])
  where
    ts = reals "ts" d
    ys = realMatrix "y" d
    [yInitU, yInitV] = reals "y_init" d
