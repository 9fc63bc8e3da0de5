-- posteriordb earnings-logearn_height (ARM ch. 4): log earnings on height.
-- Stan: log_earn = log(earn) (transformed data); beta[1..2] and sigma > 0 are flat;
-- log_earn ~ normal(beta[1] + beta[2] * height, sigma).
-- Flat priors: proper base distributions whose log-density is subtracted in the
-- single scoreLog below, so the target is exactly flat.
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  b1 <- sample (normal 0 100)
  b2 <- sample (normal 0 10)
  sigma <- sample (logNormal 0 2)
  let base = normalLogPdf 0 100 b1 + normalLogPdf 0 10 b2 + logNormalLogPdf 0 2 sigma
      loglik = sum [normalLogPdf (b1 + b2 * h) sigma y | (h, y) <- rows]
  scoreLog (Exp (loglik - base))
  return (draw [vector "beta" [b1, b2], scalar "sigma" sigma])
  where
    rows = zip (reals "height" d) (map log (reals "earn" d))
