-- kidiq-kidscore_momiq with proper wide priors on the coefficients
-- (posteriordb's Stan program has flat priors, which cannot be sampled).
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  let kid = reals "kid_score" d
      iq  = reals "mom_iq" d
  b1    <- sample (normal 0 100)
  b2    <- sample (normal 0 100)
  sigma <- sample (halfCauchy 2.5)
  scoreLog (Exp (sum [normalLogPdf (b1 + b2 * x) sigma y | (x, y) <- zip iq kid]))
  return (draw [vector "beta" [b1, b2], scalar "sigma" sigma])
