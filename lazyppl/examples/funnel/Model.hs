-- Neal's funnel, d = 10: v ~ N(0, 3), x_i | v ~ N(0, e^{v/2}), i = 1..9.
-- The x_i are drawn from N(0, 1) and re-weighted to N(0, e^{v/2}), so the
-- target in the tree's Gaussian coordinates is the funnel itself (drawing
-- x_i from normal 0 (exp (v/2)) would make it N(0, I) for the sampler).
-- Known posterior: v ~ N(0, 3) exactly; each x_i has mean 0 and SD e^{9/4} (heavy tails).
module Model (model) where

import Control.Monad (replicateM)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model _ = do
  v <- sample (normal 0 3)
  xs <- replicateM 9 (sample (normal 0 1))
  scoreLog (Exp (sum [normalLogPdf 0 (exp (v / 2)) x - normalLogPdf 0 1 x | x <- xs]))
  return (draw [scalar "v" v, vector "x" xs])
