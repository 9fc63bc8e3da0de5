-- posteriordb kilpisjarvi_mod-kilpisjarvi: Gaussian linear model with data-given priors.
-- Stan: alpha ~ normal(pmualpha, psalpha); beta ~ normal(pmubeta, psbeta);
-- sigma > 0 has no prior statement (improper flat on (0, inf));
-- y ~ normal(alpha + beta * x, sigma).
-- The flat prior on sigma: a log-normal base whose log-density is subtracted in the
-- single scoreLog below, so the target is exactly flat in sigma.
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  alpha <- sample (normal (real "pmualpha" d) (real "psalpha" d))
  beta <- sample (normal (real "pmubeta" d) (real "psbeta" d))
  sigma <- sample (logNormal 0 2)
  let loglik = sum [normalLogPdf (alpha + beta * x) sigma y | (x, y) <- rows]
  scoreLog (Exp (loglik - logNormalLogPdf 0 2 sigma))
  return (draw [scalar "alpha" alpha, scalar "beta" beta, scalar "sigma" sigma])
  where
    rows = zip (reals "x" d) (reals "y" d)
