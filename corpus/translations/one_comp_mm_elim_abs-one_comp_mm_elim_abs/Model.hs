-- posteriordb one_comp_mm_elim_abs-one_comp_mm_elim_abs: one-compartment
-- pharmacokinetics with first-order absorption and Michaelis-Menten elimination.
-- Stan: k_a, K_m, V_m, sigma > 0, each ~ cauchy(0, 1) (half-Cauchy);
-- dC/dt = dose(t) - (V_m / V) * C / (K_m + C) with dose(t) = exp(-k_a t) * D * k_a / V for
-- t > 0 and 0 at t = 0 (as in the Stan function), C(t0) = 0 (transformed data C0 = {0.0});
-- C_hat[n] ~ lognormal(log(C(times[n])), sigma).
-- The ODE: Stan uses integrate_ode_bdf (rel. and abs. tol 1e-6); here an adaptive
-- Dormand-Prince 5(4) solver (LazyPPL.ODE.dormandPrince) with tolerances 1e-6 / 1e-8:
-- over posteriordb's reference draws the log-likelihood errs by at most 3.8e-6 against a
-- tight solution (benchmarks/ode_accuracy.py --lazyppl). A solver failure gives weight zero.
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge
import LazyPPL.ODE (dormandPrince)

model :: Data -> Meas Draw
model d = do
  kA <- sample (halfCauchy 1)
  kM <- sample (halfCauchy 1)
  vM <- sample (halfCauchy 1)
  sigma <- sample (halfCauchy 1)
  let rhs t [c] = [dose t - (vM / vol) * c / (kM + c)]
      rhs _ _ = error "the one-compartment state has one component"
      dose t = if t > 0 then exp (-kA * t) * dose0 * kA / vol else 0
      loglik = case dormandPrince 1e-6 1e-8 rhs t0 [0] times of
        Just cs -> sum [logNormalLogPdf (log c) sigma obs | ([c], obs) <- zip cs cHat]
        Nothing -> -1 / 0
  scoreLog (Exp loglik)
  return (draw [ scalar "k_a" kA, scalar "K_m" kM, scalar "V_m" vM, scalar "sigma" sigma ])
  where
    t0 = real "t0" d
    dose0 = real "D" d
    vol = real "V" d
    times = reals "times" d
    cHat = reals "C_hat" d
