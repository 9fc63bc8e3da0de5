-- kilpisjarvi_mod-kilpisjarvi: linear trend of summer temperature on year
-- (uncentred years, so alpha and beta are correlated at about -0.9999).
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  let xs = reals "x" d
      ys = reals "y" d
  alpha <- sample (normal (real "pmualpha" d) (real "psalpha" d))
  beta  <- sample (normal (real "pmubeta" d) (real "psbeta" d))
  sigma <- sample (halfNormal 10)   -- Stan: flat on sigma > 0; a wide proper prior here
  scoreLog (Exp (sum [normalLogPdf (alpha + beta * x) sigma y | (x, y) <- zip xs ys]))
  return (draw [scalar "alpha" alpha, scalar "beta" beta, scalar "sigma" sigma])
