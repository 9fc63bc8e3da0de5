{-# LANGUAGE Trustworthy #-}
-- | Numerically careful helpers shared by the distributions and useful in
-- models (logistic regression, mixtures).
module LazyPPL.Distributions.Special
  ( logSumExp
  , invLogit
  , logit
  , log1pExp
  , xLogY
  , xLog1pY
  , invalid
  , negInf
  ) where

import Numeric (log1p)

-- | log (Σ exp xᵢ), computed without overflow; −∞ for an empty list.
logSumExp :: [Double] -> Double
logSumExp [] = negInf
logSumExp xs
  | isInfinite top = top
  | otherwise = top + log (sum [exp (x - top) | x <- xs])
  where
    top = maximum xs

-- | The logistic function 1 / (1 + e^(−x)).
invLogit :: Double -> Double
invLogit x
  | x >= 0 = 1 / (1 + exp (-x))
  | otherwise = let e = exp x in e / (1 + e)

-- | log (p / (1 − p)).
logit :: Double -> Double
logit p = log p - log1p (-p)

-- | log (1 + e^x), accurate for large positive and negative x.
log1pExp :: Double -> Double
log1pExp x
  | x > 33 = x + exp (-x)
  | x > -37 = log1p (exp x)
  | otherwise = exp x

-- | x · log y with 0 · log 0 = 0 (so boundary points of a support get the
-- right density).
xLogY :: Double -> Double -> Double
xLogY x y = if x == 0 && not (isNaN y) then 0 else x * log y

-- | x · log (1 + y) with 0 · log 0 = 0.
xLog1pY :: Double -> Double -> Double
xLog1pY x y = if x == 0 && not (isNaN y) then 0 else x * log1p y

-- | The value of a density at invalid parameters: NaN (weight zero when
-- scored).
invalid :: Double
invalid = 0 / 0

-- | −∞, the log-density outside the support.
negInf :: Double
negInf = -1 / 0
