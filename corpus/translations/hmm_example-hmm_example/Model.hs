-- posteriordb hmm_example-hmm_example: two-state hidden Markov model, normal emissions.
-- Stan: theta1, theta2 are simplex[K] with no prior statement (uniform on the simplex)
-- and are the rows of the transition matrix (theta[j][k] = P(j -> k)); mu is
-- positive_ordered[K] with target += normal_lpdf(mu[1] | 3, 1) + normal_lpdf(mu[2] | 10, 1);
-- y[t] | z[t] = k ~ normal(mu[k], 1). The hidden states are marginalised by Stan's
-- forward algorithm, written here the same way (log-space, log-sum-exp per state).
-- positive_ordered: the normal draws are restricted to 0 < mu[1] < mu[2] (weight zero
-- otherwise), which is Stan's density on that region up to a constant.
module Model (model) where

import Data.List (foldl', transpose)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  theta1 <- sample (dirichlet [1, 1])
  theta2 <- sample (dirichlet [1, 1])
  mu1 <- sample (normal 3 1)
  mu2 <- sample (normal 10 1)
  let mus = [mu1, mu2]
      emission y = [normalLogPdf m 1 y | m <- mus]
      -- logTransT !! k !! j = log theta[j][k]: transitions into state k
      logTransT = transpose [map log theta1, map log theta2]
      forward gammaPrev y =
        let e = emission y
        in force [logSumExp (zipWith (+) gammaPrev lt) + ek | (lt, ek) <- zip logTransT e]
      gammaN = foldl' forward (emission (head ys)) (tail ys)
      loglik = if 0 < mu1 && mu1 < mu2 then logSumExp gammaN else -1 / 0
  scoreLog (Exp loglik)
  return (draw [vector "theta1" theta1, vector "theta2" theta2, vector "mu" mus])
  where
    ys = reals "y" d
    force xs = foldr seq xs xs
