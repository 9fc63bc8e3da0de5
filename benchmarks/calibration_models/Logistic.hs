-- Logistic regression for the calibration study (benchmarks/calibration.py):
-- alpha ~ N(0, 2.5), beta[1..K] ~ N(0, 2.5), y_i ~ Bernoulli(logit^-1(alpha + X_i . beta)).
module Model (model) where

import Control.Monad (replicateM)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  alpha <- sample (normal 0 2.5)
  beta <- replicateM (int "K" d) (sample (normal 0 2.5))
  scoreLog (Exp (sum [ bernoulliLogitLogPmf (alpha + sum (zipWith (*) beta x)) (y == 1)
                     | (x, y) <- zip xs ys ]))
  return (draw [scalar "alpha" alpha, vector "beta" beta])
  where
    xs = realMatrix "X" d
    ys = ints "y" d
