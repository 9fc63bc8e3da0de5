-- posteriordb arma-arma11: ARMA(1, 1).
-- Stan: mu ~ normal(0, 10); phi ~ normal(0, 2); theta ~ normal(0, 2);
-- sigma > 0 ~ cauchy(0, 2.5) (half-Cauchy). nu[1] = mu + phi * mu (err[0] = 0),
-- nu[t] = mu + phi * y[t-1] + theta * err[t-1], err[t] = y[t] - nu[t];
-- err ~ normal(0, sigma).
module Model (model) where

import Data.List (foldl')
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  mu <- sample (normal 0 10)
  phi <- sample (normal 0 2)
  theta <- sample (normal 0 2)
  sigma <- sample (halfCauchy 2.5)
  let err1 = y1 - (mu + phi * mu)
      -- carry (err[t-1], sum of normal log-densities so far) along (y[t-1], y[t])
      step (errPrev, acc) (yPrev, yt) =
        let e = yt - (mu + phi * yPrev + theta * errPrev)
        in e `seq` (e, acc + normalLogPdf 0 sigma e)
      (_, loglik) = foldl' step (err1, normalLogPdf 0 sigma err1) pairs
  scoreLog (Exp loglik)
  return (draw [scalar "mu" mu, scalar "phi" phi, scalar "theta" theta, scalar "sigma" sigma])
  where
    ys = reals "y" d
    y1 = head ys
    pairs = zip ys (tail ys)
