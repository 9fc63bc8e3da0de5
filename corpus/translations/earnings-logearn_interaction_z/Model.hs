-- posteriordb earnings-logearn_interaction_z (ARM ch. 4): standardised height x sex.
-- Stan: log_earn = log(earn); z_height = (height - mean(height)) / sd(height) with
-- Stan's sample SD (divisor N - 1), from this scope's data; inter = z_height .* male;
-- beta[1..4] and sigma > 0 are flat;
-- log_earn ~ normal(beta[1] + beta[2] * z_height + beta[3] * male + beta[4] * inter, sigma).
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
  b3 <- sample (normal 0 10)
  b4 <- sample (normal 0 10)
  sigma <- sample (logNormal 0 2)
  let base = normalLogPdf 0 100 b1 + normalLogPdf 0 10 b2 + normalLogPdf 0 10 b3
             + normalLogPdf 0 10 b4 + logNormalLogPdf 0 2 sigma
      loglik = sum [ normalLogPdf (b1 + b2 * z + b3 * m + b4 * zm) sigma y
                   | (z, m, zm, y) <- rows ]
  scoreLog (Exp (loglik - base))
  return (draw [vector "beta" [b1, b2, b3, b4], scalar "sigma" sigma])
  where
    heights = reals "height" d
    males = reals "male" d
    n = fromIntegral (length heights)
    meanH = sum heights / n
    sdH = sqrt (sum [(h - meanH) ^ (2 :: Int) | h <- heights] / (n - 1))
    zs = [(h - meanH) / sdH | h <- heights]
    rows = zip4 zs males (zipWith (*) zs males) (map log (reals "earn" d))
