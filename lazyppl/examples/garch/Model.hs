-- garch-garch11: GARCH(1,1) volatility.  Stan's priors are flat on the
-- constrained space; mu and alpha0 get wide proper priors here, and the
-- flat prior of beta1 on (0, 1 - alpha1) is a uniform there times the
-- length 1 - alpha1 (to undo the uniform's normalisation).
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  let ys = reals "y" d
      sigma1 = real "sigma1" d
  mu <- sample (normal 0 10)
  alpha0 <- sample (halfNormal 10)
  alpha1 <- sample (uniformbounded 0 1)
  beta1 <- sample (uniformbounded 0 (1 - alpha1))
  score (1 - alpha1)
  let sigmas = scanl (\s yPrev -> sqrt (alpha0 + alpha1 * (yPrev - mu) ^ (2 :: Int) + beta1 * s * s)) sigma1 ys
  scoreLog (Exp (sum (zipWith (normalLogPdf mu) sigmas ys)))
  return (draw [scalar "mu" mu, scalar "alpha0" alpha0, scalar "alpha1" alpha1, scalar "beta1" beta1])
