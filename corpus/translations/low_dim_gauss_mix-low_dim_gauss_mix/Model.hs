-- posteriordb low_dim_gauss_mix-low_dim_gauss_mix: two-component normal mixture.
-- Stan: mu (ordered[2]) ~ normal(0, 2); sigma[1..2] > 0 ~ normal(0, 2) (half-normal);
-- theta in (0, 1) ~ beta(5, 5); each y[n] has density
-- theta * normal(y | mu[1], sigma[1]) + (1 - theta) * normal(y | mu[2], sigma[2]).
-- ordered[2]: the two normal(0, 2) draws are restricted to mu[1] < mu[2] (weight
-- zero otherwise), which is Stan's prior on the ordered region up to a constant.
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  mu1 <- sample (normal 0 2)
  mu2 <- sample (normal 0 2)
  s1 <- sample (halfNormal 2)
  s2 <- sample (halfNormal 2)
  theta <- sample (beta 5 5)
  let logT = log theta
      log1T = log (1 - theta)
      mix y = logSumExp2 (logT + normalLogPdf mu1 s1 y) (log1T + normalLogPdf mu2 s2 y)
      loglik = if mu1 < mu2 then sum (map mix ys) else -1 / 0
  scoreLog (Exp loglik)
  return (draw [vector "mu" [mu1, mu2], vector "sigma" [s1, s2], scalar "theta" theta])
  where
    ys = reals "y" d
    logSumExp2 a b = let m = max a b in m + log (exp (a - m) + exp (b - m))
