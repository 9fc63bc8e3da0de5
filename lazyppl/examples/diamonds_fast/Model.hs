-- diamonds-diamonds with the LazyPPL.Linear fast path for X b.
module Model (model) where

import Control.Monad (replicateM)
import Data.List (transpose)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge
import LazyPPL.Linear

model :: Data -> Meas Draw
model d = do
  let ys = reals "Y" d
      cols = drop 1 (transpose (realMatrix "X" d))
      means = [sum c / fromIntegral (length c) | c <- cols]
      xc = denseMatrix (transpose [map (subtract m) c | (m, c) <- zip means cols])
  b <- replicateM (denseCols xc) (sample (normal 0 1))
  intercept <- sample (studentT 3 8 10)
  sigma <- sample (abs <$> studentT 3 0 10)
  let mu = mulVec xc b
  scoreLog (Exp (sum (zipWith (\m y -> normalLogPdf (intercept + m) sigma y) mu ys)))
  return (draw [vector "b" b, scalar "Intercept" intercept, scalar "sigma" sigma])
