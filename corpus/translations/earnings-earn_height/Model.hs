-- posteriordb earnings-earn_height (ARM ch. 4): earnings on height.
-- Stan: beta[1..2] and sigma > 0 have no prior statements (improper flat priors);
-- earn ~ normal(beta[1] + beta[2] * height, sigma).
-- Flat priors: each parameter is drawn from a proper base distribution (wide for
-- earnings in dollars, up to 2e5) whose log-density is subtracted in the single
-- scoreLog below, so the target is exactly flat on the parameter space.
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  b1 <- sample (normal 0 1e5)
  b2 <- sample (normal 0 1e4)
  sigma <- sample (logNormal (log 2e4) 2)
  let base = normalLogPdf 0 1e5 b1 + normalLogPdf 0 1e4 b2
             + logNormalLogPdf (log 2e4) 2 sigma
      loglik = sum [normalLogPdf (b1 + b2 * h) sigma y | (h, y) <- rows]
  scoreLog (Exp (loglik - base))
  return (draw [vector "beta" [b1, b2], scalar "sigma" sigma])
  where
    rows = zip (reals "height" d) (reals "earn" d)
