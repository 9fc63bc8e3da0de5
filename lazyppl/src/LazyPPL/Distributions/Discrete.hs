{-# LANGUAGE Trustworthy #-}
{-# LANGUAGE BangPatterns #-}
-- | Discrete distributions: inverse-CDF samplers (one uniform per draw) and
-- log-mass functions.  See "LazyPPL.Distributions" for the conventions.
module LazyPPL.Distributions.Discrete
  ( bernoulli, bernoulliLogPmf, bernoulliLogitLogPmf
  , uniformdiscrete
  , categorical, categoricalLogPmf
  , poisson, poissonPdf, poissonLogPmf
  , binomial, binomialLogPmf, binomialLogitLogPmf
  , negBinomialLogPmf, negBinomial2LogPmf
  , iid
  ) where

import Numeric (log1p)
import Numeric.SpecFunctions (incompleteBeta, incompleteGamma, logChoose, logGamma)

import LazyPPL.Distributions.Special
import LazyPPL.Internal.Core (Prob, uniform)

-- | Bernoulli distribution: 'True' with probability @p@.
bernoulli :: Double -> Prob Bool
bernoulli p = (< p) <$> uniform

-- | Bernoulli log-mass: @bernoulliLogPmf p b@.
bernoulliLogPmf :: Double -> Bool -> Double
bernoulliLogPmf p b
  | not (p >= 0 && p <= 1) = invalid
  | b = log p
  | otherwise = log1p (-p)

-- | Bernoulli log-mass with the probability given on the logit scale
-- (Stan's bernoulli_logit): @bernoulliLogitLogPmf alpha b@.
bernoulliLogitLogPmf :: Double -> Bool -> Double
bernoulliLogitLogPmf alpha b
  | isNaN alpha = invalid
  | b = -log1pExp (-alpha)
  | otherwise = -log1pExp alpha

-- | Uniform distribution on {0, …, n − 1}.
uniformdiscrete :: Int -> Prob Int
uniformdiscrete n = (\u -> min (n - 1) (floor (fromIntegral n * u))) <$> uniform

-- | Categorical distribution: index i ∈ {0, …, k − 1} with probability pᵢ.
-- The probabilities must be non-negative and sum to 1 within 1e-6 (they are
-- rescaled by their sum to absorb rounding); otherwise this is an error.
categorical :: [Double] -> Prob Int
categorical ps
  | any (\p -> isNaN p || p < 0) ps || abs (total - 1) > 1e-6 =
      error ("categorical: probabilities must be non-negative and sum to 1, got " ++ show ps)
  | otherwise = pick <$> uniform
  where
    total = sum ps
    cumulative = scanl1 (+) (map (/ total) ps)
    lastPositive = length ps - 1 - length (takeWhile (== 0) (reverse ps))
    pick u = case [i | (i, c) <- zip [0 ..] cumulative, c > u] of
      (i : _) -> i
      [] -> lastPositive

-- | Categorical log-mass: @categoricalLogPmf ps i@ = log pᵢ (−∞ outside
-- 0 … k − 1).
categoricalLogPmf :: [Double] -> Int -> Double
categoricalLogPmf ps i
  | any (\p -> isNaN p || p < 0) ps = invalid
  | i < 0 || i >= length ps = negInf
  | otherwise = log (ps !! i)

-- | Poisson distribution with the given rate (upstream type: 'Integer').
poisson :: Double -> Prob Integer
poisson rate
  | isNaN rate || rate < 0 = error ("poisson: rate must be non-negative, got " ++ show rate)
  | rate == 0 = pure 0
  | otherwise = (\u -> toInteger (smallestAbove cdf u (max 0 (floor rate)) maxBound)) <$> uniform
  where
    -- P(X ≤ k) = Q(k + 1, λ), the regularised upper incomplete gamma
    cdf :: Int -> Double
    cdf k = 1 - incompleteGamma (fromIntegral k + 1) rate

-- | Poisson probability mass: @poissonPdf rate n@ (upstream name).
poissonPdf :: Double -> Integer -> Double
poissonPdf rate n = exp (poissonLogPmf rate n)

-- | Poisson log-mass: @poissonLogPmf rate n@.
poissonLogPmf :: Double -> Integer -> Double
poissonLogPmf rate n
  | isNaN rate || rate < 0 = invalid
  | n < 0 = negInf
  | otherwise = xLogY (fromIntegral n) rate - rate - logGamma (fromIntegral n + 1)

-- | Binomial distribution: successes in @n@ trials with probability @p@.
binomial :: Int -> Double -> Prob Int
binomial n p
  | n < 0 || not (p >= 0 && p <= 1) =
      error ("binomial: need n >= 0 and 0 <= p <= 1, got " ++ show (n, p))
  | p == 0 || n == 0 = pure 0
  | p == 1 = pure n
  | otherwise = (\u -> smallestAbove cdf u (floor (fromIntegral n * p)) n) <$> uniform
  where
    -- P(X ≤ k) = I_{1−p}(n − k, k + 1), the regularised incomplete beta
    cdf k
      | k >= n = 1
      | otherwise = incompleteBeta (fromIntegral (n - k)) (fromIntegral k + 1) (1 - p)

-- | Binomial log-mass: @binomialLogPmf n p k@.
binomialLogPmf :: Int -> Double -> Int -> Double
binomialLogPmf n p k
  | n < 0 || not (p >= 0 && p <= 1) = invalid
  | k < 0 || k > n = negInf
  | otherwise = logChoose n k + xLogY (fromIntegral k) p + xLog1pY (fromIntegral (n - k)) (-p)

-- | Binomial log-mass with the probability on the logit scale (Stan's
-- binomial_logit): @binomialLogitLogPmf n alpha k@.
binomialLogitLogPmf :: Int -> Double -> Int -> Double
binomialLogitLogPmf n alpha k
  | n < 0 || isNaN alpha = invalid
  | k < 0 || k > n = negInf
  | otherwise =
      logChoose n k - fromIntegral k * log1pExp (-alpha) - fromIntegral (n - k) * log1pExp alpha

-- | Negative binomial log-mass of @k@ failures before the @r@-th success with
-- success probability @p@ (SciPy's nbinom(r, p)): @negBinomialLogPmf r p k@.
negBinomialLogPmf :: Double -> Double -> Int -> Double
negBinomialLogPmf r p k
  | not (r > 0 && p > 0 && p <= 1) = invalid
  | k < 0 = negInf
  | otherwise =
      logGamma (fromIntegral k + r) - logGamma r - logGamma (fromIntegral k + 1)
        + r * log p + xLog1pY (fromIntegral k) (-p)

-- | Negative binomial log-mass with mean @mu@ and dispersion @phi@ (Stan's
-- neg_binomial_2, variance μ + μ²/φ): @negBinomial2LogPmf mu phi k@.
negBinomial2LogPmf :: Double -> Double -> Int -> Double
negBinomial2LogPmf mu phi k
  | not (mu >= 0 && phi > 0) = invalid
  | k < 0 = negInf
  | otherwise =
      logGamma (fromIntegral k + phi) - logGamma phi - logGamma (fromIntegral k + 1)
        + phi * (log phi - log (mu + phi)) + xLogY (fromIntegral k) mu
        - xLogY (fromIntegral k) (mu + phi)

-- | An infinite stream of independent draws (lazy; take what you need).
iid :: Prob a -> Prob [a]
iid p = do
  x <- p
  xs <- iid p
  return (x : xs)

-- | The smallest k ≥ 0 (and ≤ @hi@) with cdf k > u, for a non-decreasing cdf,
-- found by galloping from a guess and then bisection: O(log k) cdf calls.
smallestAbove :: (Int -> Double) -> Double -> Int -> Int -> Int
smallestAbove cdf u guess hi
  | cdf g > u = downFrom g 1
  | otherwise = upFrom g 1
  where
    g = min hi (max 0 guess)
    -- invariant: cdf k > u
    downFrom !k !step
      | k == 0 = 0
      | cdf lo' > u = downFrom lo' (2 * step)
      | otherwise = bisect lo' k
      where
        lo' = max 0 (k - step)
    -- invariant: cdf k <= u
    upFrom !k !step
      | k >= hi = hi
      | cdf hi' > u = bisect k hi'
      | otherwise = upFrom hi' (2 * step)
      where
        hi' = if hi - k <= step then hi else k + step
    -- cdf lo <= u < cdf hi'
    bisect !lo !up
      | up - lo <= 1 = up
      | cdf mid > u = bisect lo mid
      | otherwise = bisect mid up
      where
        mid = lo + (up - lo) `div` 2
