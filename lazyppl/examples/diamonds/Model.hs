-- diamonds-diamonds: brms linear regression with 24 centred predictors.
module Model (model) where

import Control.Monad (replicateM)
import Data.List (foldl', transpose)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  let ys = reals "Y" d
      cols = drop 1 (transpose (realMatrix "X" d))
      means = [sum c / fromIntegral (length c) | c <- cols]
      xc = transpose [map (subtract m) c | (m, c) <- zip means cols]
      kc = length cols
  b <- replicateM kc (sample (normal 0 1))
  intercept <- sample (studentT 3 8 10)
  sigma <- sample (abs <$> studentT 3 0 10)
  let dot row = foldl' (+) 0 (zipWith (*) row b)
  scoreLog (Exp (foldl' (+) 0 [normalLogPdf (intercept + dot row) sigma y | (row, y) <- zip xc ys]))
  return (draw [vector "b" b, scalar "Intercept" intercept, scalar "sigma" sigma])
