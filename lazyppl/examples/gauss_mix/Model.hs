-- low_dim_gauss_mix: two-component normal mixture with ordered means
-- (ordering imposed by sorting two normal draws: the ordered pair has twice
-- the density of the unordered one on mu1 < mu2, which is a constant factor).
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge
import Numeric (log1p)

model :: Data -> Meas Draw
model d = do
  let ys = reals "y" d
  a <- sample (normal 0 2)
  b <- sample (normal 0 2)
  let (mu1, mu2) = (min a b, max a b)
  s1 <- sample (halfNormal 2)
  s2 <- sample (halfNormal 2)
  theta <- sample (beta 5 5)
  scoreLog (Exp (sum [ logSumExp [log theta + normalLogPdf mu1 s1 y, log1p (-theta) + normalLogPdf mu2 s2 y] | y <- ys ]))
  return (draw [vector "mu" [mu1, mu2], vector "sigma" [s1, s2], scalar "theta" theta])
