-- posteriordb garch-garch11: GARCH(1, 1) with flat priors.
-- Stan: mu (real), alpha0 > 0, alpha1 in (0, 1), beta1 in (0, 1 - alpha1), none with a
-- prior statement: the prior is flat on that region. sigma[1] = sigma1 (data),
-- sigma[t] = sqrt(alpha0 + alpha1 * (y[t-1] - mu)^2 + beta1 * sigma[t-1]^2);
-- y ~ normal(mu, sigma).
-- Flat priors: mu and alpha0 are drawn from proper bases (normal, log-normal) whose
-- log-densities are subtracted in the single scoreLog. alpha1 ~ beta(1, 2) (density
-- 2(1 - alpha1)) and beta1 | alpha1 ~ uniform(0, 1 - alpha1) (density 1/(1 - alpha1))
-- multiply to a constant on the region, i.e. exactly flat.
module Model (model) where

import Data.List (foldl')
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  mu <- sample (normal 0 100)
  alpha0 <- sample (logNormal 0 3)
  alpha1 <- sample (beta 1 2)
  beta1 <- sample (uniformbounded 0 (1 - alpha1))
  let base = normalLogPdf 0 100 mu + logNormalLogPdf 0 3 alpha0
      -- carry (sigma[t-1]^2, log-likelihood so far) along (y[t-1], y[t])
      step (varPrev, acc) (yPrev, yt) =
        let v = alpha0 + alpha1 * (yPrev - mu) ^ (2 :: Int) + beta1 * varPrev
        in v `seq` (v, acc + normalLogPdf mu (sqrt v) yt)
      (_, loglik) = foldl' step (sigma1 * sigma1, normalLogPdf mu sigma1 y1) pairs
  scoreLog (Exp (loglik - base))
  return (draw [ scalar "mu" mu, scalar "alpha0" alpha0, scalar "alpha1" alpha1
               , scalar "beta1" beta1 ])
  where
    ys = reals "y" d
    y1 = head ys
    sigma1 = real "sigma1" d
    pairs = zip ys (tail ys)
