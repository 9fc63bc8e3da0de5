{-# LANGUAGE Trustworthy #-}
-- | Continuous distributions: quantile-transform samplers and log-densities.
-- See "LazyPPL.Distributions" for the conventions.
module LazyPPL.Distributions.Continuous
  ( normal, normalPdf, normalLogPdf, normalCdf
  , exponential, expPdf, exponentialLogPdf
  , gamma, gammaLogPdf
  , invGamma, invGammaLogPdf
  , beta, betaLogPdf
  , dirichlet, dirichletLogPdf
  , uniformbounded, uniformBoundedLogPdf
  , logNormal, logNormalLogPdf
  , cauchy, cauchyLogPdf
  , halfCauchy, halfCauchyLogPdf
  , halfNormal, halfNormalLogPdf
  , studentT, studentTLogPdf
  , logistic, logisticLogPdf
  ) where

import Numeric (log1p)
import Numeric.SpecFunctions (invIncompleteBeta, invIncompleteGamma, logBeta, logGamma)

import LazyPPL.Distributions.Special
import LazyPPL.Internal.Core (Prob, standardNormal, uniform)
import qualified LazyPPL.Internal.Random as R

-- | Normal distribution with mean @mu@ and standard deviation @sd@: the
-- site's Gaussian coordinate Φ⁻¹(u), scaled (exact even far in the tails).
normal :: Double -> Double -> Prob Double
normal mu sd = (\z -> mu + sd * z) <$> standardNormal

-- | Normal density: @normalPdf mu sd x@.
normalPdf :: Double -> Double -> Double -> Double
normalPdf mu sd x = exp (normalLogPdf mu sd x)

-- | Normal log-density: @normalLogPdf mu sd x@.
normalLogPdf :: Double -> Double -> Double -> Double
normalLogPdf mu sd x
  | not (sd > 0) = invalid
  | otherwise = let z = (x - mu) / sd in -0.9189385332046728 - log sd - 0.5 * z * z

-- | Normal cumulative distribution function: @normalCdf mu sd x@ = P(X ≤ x).
normalCdf :: Double -> Double -> Double -> Double
normalCdf mu sd x
  | not (sd > 0) = invalid
  | otherwise = R.normalCdf ((x - mu) / sd)

-- | Exponential distribution with the given rate (mean 1/rate).
exponential :: Double -> Prob Double
exponential rate = (\u -> -log u / rate) <$> uniform

-- | Exponential density: @expPdf rate x@ (0 for x < 0).
expPdf :: Double -> Double -> Double
expPdf rate x = exp (exponentialLogPdf rate x)

-- | Exponential log-density: @exponentialLogPdf rate x@.
exponentialLogPdf :: Double -> Double -> Double
exponentialLogPdf rate x
  | not (rate > 0) = invalid
  | x < 0 = negInf
  | otherwise = log rate - rate * x

-- | Gamma distribution with @shape@ k and @scale@ θ (mean kθ; upstream's
-- parameterisation, not Stan's rate).
gamma :: Double -> Double -> Prob Double
gamma shape scale = (\u -> scale * invIncompleteGamma shape u) <$> uniform

-- | Gamma log-density: @gammaLogPdf shape scale x@.
gammaLogPdf :: Double -> Double -> Double -> Double
gammaLogPdf k theta x
  | not (k > 0 && theta > 0) = invalid
  | x < 0 = negInf
  | otherwise = xLogY (k - 1) x - x / theta - k * log theta - logGamma k

-- | Inverse-gamma distribution with @shape@ α and @scale@ β (Stan's
-- inv_gamma(α, β)): 1/X with X ~ gamma α (1/β).
invGamma :: Double -> Double -> Prob Double
invGamma shape scale = (\u -> scale / invIncompleteGamma shape (1 - u)) <$> uniform

-- | Inverse-gamma log-density: @invGammaLogPdf shape scale x@.
invGammaLogPdf :: Double -> Double -> Double -> Double
invGammaLogPdf a b x
  | not (a > 0 && b > 0) = invalid
  | x <= 0 = negInf
  | otherwise = a * log b - logGamma a - (a + 1) * log x - b / x

-- | Beta distribution with shape parameters α and β.
beta :: Double -> Double -> Prob Double
beta a b = invIncompleteBeta a b <$> uniform

-- | Beta log-density: @betaLogPdf a b x@.
betaLogPdf :: Double -> Double -> Double -> Double
betaLogPdf a b x
  | not (a > 0 && b > 0) = invalid
  | x < 0 || x > 1 = negInf
  | otherwise = xLogY (a - 1) x + xLog1pY (b - 1) (-x) - logBeta a b

-- | Dirichlet distribution with the given concentrations (one gamma draw per
-- component, normalised, as upstream).
dirichlet :: [Double] -> Prob [Double]
dirichlet as = do
  xs <- mapM (`gamma` 1) as
  let s = sum xs
  return (map (/ s) xs)

-- | Dirichlet log-density: @dirichletLogPdf alphas xs@.  Points off the
-- simplex (a negative coordinate, or a sum differing from 1 by more than
-- 1e-8 per coordinate) have log-density −∞; lists of different lengths are a
-- programming error.
dirichletLogPdf :: [Double] -> [Double] -> Double
dirichletLogPdf as xs
  | length as /= length xs =
      error ("dirichletLogPdf: " ++ show (length as) ++ " concentrations but "
             ++ show (length xs) ++ " coordinates")
  | not (all (> 0) as) = invalid
  | any (< 0) xs || abs (sum xs - 1) > 1e-8 * fromIntegral (length xs) = negInf
  | otherwise = sum (zipWith (\a x -> xLogY (a - 1) x) as xs) + logGamma (sum as) - sum (map logGamma as)

-- | Continuous uniform distribution on [lower, upper].
uniformbounded :: Double -> Double -> Prob Double
uniformbounded lower upper = (\u -> lower + (upper - lower) * u) <$> uniform

-- | Uniform log-density: @uniformBoundedLogPdf lower upper x@.
uniformBoundedLogPdf :: Double -> Double -> Double -> Double
uniformBoundedLogPdf lower upper x
  | not (upper > lower) = invalid
  | x < lower || x > upper = negInf
  | otherwise = -log (upper - lower)

-- | Log-normal distribution: exp of a normal with mean @mu@ and sd @sigma@.
logNormal :: Double -> Double -> Prob Double
logNormal mu sigma = exp <$> normal mu sigma

-- | Log-normal log-density: @logNormalLogPdf mu sigma x@.
logNormalLogPdf :: Double -> Double -> Double -> Double
logNormalLogPdf mu sigma x
  | not (sigma > 0) = invalid
  | x <= 0 = negInf
  | otherwise = normalLogPdf mu sigma (log x) - log x

-- | Cauchy distribution with location and scale.
cauchy :: Double -> Double -> Prob Double
cauchy loc scale = (\u -> loc + scale * tan (pi * (u - 0.5))) <$> uniform

-- | Cauchy log-density: @cauchyLogPdf loc scale x@.
cauchyLogPdf :: Double -> Double -> Double -> Double
cauchyLogPdf loc scale x
  | not (scale > 0) = invalid
  | otherwise = let z = (x - loc) / scale in -log (pi * scale) - log1p (z * z)

-- | Half-Cauchy distribution on [0, ∞) with the given scale: |cauchy 0 scale|.
halfCauchy :: Double -> Prob Double
halfCauchy scale = (\u -> scale * tan (0.5 * pi * u)) <$> uniform

-- | Half-Cauchy log-density: @halfCauchyLogPdf scale x@.
halfCauchyLogPdf :: Double -> Double -> Double
halfCauchyLogPdf scale x
  | not (scale > 0) = invalid
  | x < 0 = negInf
  | otherwise = let z = x / scale in log (2 / (pi * scale)) - log1p (z * z)

-- | Half-normal distribution on [0, ∞): |normal 0 sd|, as the quantile
-- transform Φ⁻¹((1 + u)/2) = −Φ⁻¹(Φ(−z)/2) of the site's coordinate z
-- (monotone in z, and exact in the upper tail).
halfNormal :: Double -> Prob Double
halfNormal sd = (\z -> -sd * R.normalQuantile (0.5 * R.normalCdf (-z))) <$> standardNormal

-- | Half-normal log-density: @halfNormalLogPdf sd x@.
halfNormalLogPdf :: Double -> Double -> Double
halfNormalLogPdf sd x
  | not (sd > 0) = invalid
  | x < 0 = negInf
  | otherwise = log 2 + normalLogPdf 0 sd x

-- | Student's t distribution with @nu@ degrees of freedom, location and scale.
studentT :: Double -> Double -> Double -> Prob Double
studentT nu loc scale = (\u -> loc + scale * quantile u) <$> uniform
  where
    -- P(|T| > t) = I_{ν/(ν+t²)}(ν/2, 1/2), inverted on the smaller tail
    quantile u
      | u < 0.5 = -(tail' (2 * u))
      | otherwise = tail' (2 * (1 - u))
    tail' p = let x = invIncompleteBeta (nu / 2) 0.5 p in sqrt (nu * (1 - x) / x)

-- | Student's t log-density: @studentTLogPdf nu loc scale x@.
studentTLogPdf :: Double -> Double -> Double -> Double -> Double
studentTLogPdf nu loc scale x
  | not (nu > 0 && scale > 0) = invalid
  | otherwise =
      let z = (x - loc) / scale
      in logGamma ((nu + 1) / 2) - logGamma (nu / 2) - 0.5 * log (nu * pi) - log scale
           - (nu + 1) / 2 * log1p (z * z / nu)

-- | Logistic distribution with location and scale.
logistic :: Double -> Double -> Prob Double
logistic loc scale = (\u -> loc + scale * (log u - log1p (-u))) <$> uniform

-- | Logistic log-density: @logisticLogPdf loc scale x@.
logisticLogPdf :: Double -> Double -> Double -> Double
logisticLogPdf loc scale x
  | not (scale > 0) = invalid
  | otherwise = let z = abs ((x - loc) / scale) in -z - log scale - 2 * log1pExp (-z)
