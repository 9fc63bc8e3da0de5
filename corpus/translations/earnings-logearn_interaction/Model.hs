-- posteriordb earnings-logearn_interaction (ARM ch. 4): height x sex interaction.
-- Stan: log_earn = log(earn), inter = height .* male (transformed data);
-- beta[1..4] and sigma > 0 are flat;
-- log_earn ~ normal(beta[1] + beta[2] * height + beta[3] * male + beta[4] * inter, sigma).
-- Flat priors: proper base distributions whose log-density is subtracted in the
-- single scoreLog below, so the target is exactly flat.
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge
import Data.List (zip4)

model :: Data -> Meas Draw
model d = do
  b1 <- sample (normal 0 100)
  b2 <- sample (normal 0 10)
  b3 <- sample (normal 0 100)
  b4 <- sample (normal 0 10)
  sigma <- sample (logNormal 0 2)
  let base = normalLogPdf 0 100 b1 + normalLogPdf 0 10 b2 + normalLogPdf 0 100 b3
             + normalLogPdf 0 10 b4 + logNormalLogPdf 0 2 sigma
      loglik = sum [ normalLogPdf (b1 + b2 * h + b3 * m + b4 * hm) sigma y
                   | (h, m, hm, y) <- rows ]
  scoreLog (Exp (loglik - base))
  return (draw [vector "beta" [b1, b2, b3, b4], scalar "sigma" sigma])
  where
    heights = reals "height" d
    males = reals "male" d
    rows = zip4 heights males (zipWith (*) heights males) (map log (reals "earn" d))
