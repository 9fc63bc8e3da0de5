{-# LANGUAGE Trustworthy #-}
-- | Re-estimating the Gaussian approximation of the posterior (over the
-- adapted sites, in z space) at the end of a warm-up window.
--
-- Three candidates compete: the previous approximation (Laplace's or an
-- earlier window's), the window's sample moments shrunk towards it (the
-- window counting as its effective number of draws), and the window's sample
-- moments shrunk towards their own diagonal.  Each is scored by drawing a few
-- points from it and measuring the spread (SD) of the log importance ratio
-- log target − log candidate: the smaller the spread, the better both the
-- Gaussian autoregressive kernel (whose acceptance depends on exactly that
-- ratio) and the covariance walk will do.  A window of a slowly mixing chain
-- gives a noisy covariance; a Laplace approximation of a near-Gaussian
-- posterior is often better than any such window, and this keeps it.
module LazyPPL.Internal.Estimate
  ( reestimate
  , effectiveDraws
  , spreadDraws
  ) where

import Data.List (minimumBy)
import Data.Ord (comparing)
import qualified Data.Vector.Unboxed as U
import Data.Word (Word64)

import LazyPPL.Internal.Adapt (Tuning (..), maxFullCovarianceSites, resetCounters, setSliceShare, sliceShare)
import LazyPPL.Internal.Kernels (Factor (..))
import LazyPPL.Internal.Linear
import LazyPPL.Internal.Random (combine, wordToNormal)
import LazyPPL.Internal.Slice (addStats, scaleCoefficients, windowStats)

-- | Points drawn per candidate to score it.
spreadDraws :: Int
spreadDraws = 24

-- | New tuning from the states recorded during a window (each a vector over
-- the window's sites).  @logTarget@ is the log posterior density of a point
-- (−∞ if invalid), @seed@ makes the scoring draws reproducible.  Returns the
-- tuning, the number of target evaluations spent and how many were invalid.
reestimate
  :: (U.Vector Double -> Double) -> Word64 -> U.Vector Int -> [U.Vector Double] -> Tuning
  -> (Tuning, Int, Int)
reestimate logTarget seed addrs samples t = case covariance samples of
  Nothing -> (t, 0, 0)
  Just (mu, cov) ->
    let n = length samples
        d = U.length addrs
        previous = case tuCov t of
          Just prev | tuSites t == addrs -> Just (tuMean t, prev)
          _ -> Nothing
        own = (mu, regularise n 1e-2 cov)
        blended = case previous of
          Just (pm, pc) ->
            let w = effectiveDraws samples / (effectiveDraws samples + fromIntegral (10 + d))
            in Just (U.zipWith (\a b -> w * a + (1 - w) * b) mu pm, blend w cov pc)
          Nothing -> Nothing
        candidates = [c | Just c <- [previous, blended]] ++ [own]
        scored = [(spread logTarget seed m c, (m, c)) | (m, c) <- candidates]
        ((best, _), (mean', reg)) = minimumBy (comparing (fst . fst)) scored
        invalidCount = sum [bad | ((_, bad), _) <- scored]
        sds = U.map sqrt (diagonal reg)
        factor
          | d > maxFullCovarianceSites = DiagFactor sds
          | otherwise = maybe (DiagFactor sds) FullFactor (cholesky reg)
        share = maybe (sliceShare best) id (tuSliceOverride t)
        -- pooled over the windows while the adapted sites stay the same;
        -- O(d² n) per window, skipped for many sites
        stats
          | d > maxFullCovarianceSites = Nothing
          | otherwise =
              let new = windowStats mean' (effectiveDraws samples) samples
              in Just $! case tuScaleStats t of
                   Just old | tuSites t == addrs -> addStats old new
                   _ -> new
        tuning =
          setSliceShare share $ resetCounters
            t
              { tuSites = addrs
              , tuMean = mean'
              , tuCov = Just reg
              , tuFactor = factor
              , tuWalkScale = 2.38 / sqrt (fromIntegral (max 1 d))
                -- a close approximation deserves near-independent moves
              , tuArStep = if best < 1 then 1 else max 0.3 (tuArStep t)
              , tuSingleScales = sds
              , tuSingleScale = 2.38
              , tuScaleStats = stats
              , tuScaleCoefs = if share > 0 then stats >>= scaleCoefficients else Nothing
              , tuSpread = best
              }
    in (tuning, spreadDraws * length candidates, invalidCount)
  where
    blend w (Matrix d a) (Matrix _ b) =
      Matrix d (U.zipWith (\x y -> if isNaN x then y else w * x + (1 - w) * y) a b)

-- | SD of log target − log N(m, c) over 'spreadDraws' draws from N(m, c)
-- (+∞ if c is not positive definite or a draw is invalid), and the number of
-- invalid draws.
spread :: (U.Vector Double -> Double) -> Word64 -> U.Vector Double -> Matrix -> (Double, Int)
spread logTarget seed m c = case cholesky c of
  Nothing -> (1 / 0, 0)
  Just l ->
    let d = U.length m
        ratio j =
          let xi = U.generate d (\i -> wordToNormal (combine seed (fromIntegral (j * d + i))))
              z = U.zipWith (+) m (lowerTimes l xi)
          in logTarget z + 0.5 * U.sum (U.map (\v -> v * v) xi)
        rs = map ratio [0 .. spreadDraws - 1]
        k = fromIntegral spreadDraws
        mean = sum rs / k
        sd = sqrt (sum [(r - mean) * (r - mean) | r <- rs] / (k - 1))
        bad = length (filter (\r -> isNaN r || isInfinite r) rs)
    in (if bad > 0 then 1 / 0 else sd, bad)

-- | A crude effective number of independent draws in a window: n divided by
-- the largest per-coordinate integrated autocorrelation time, estimated by
-- batch means over about √n batches.
effectiveDraws :: [U.Vector Double] -> Double
effectiveDraws [] = 0
effectiveDraws samples@(x0 : _) =
  fromIntegral n / max 1 (maximum (1 : [tau i | i <- [0 .. U.length x0 - 1]]))
  where
    n = length samples
    m = max 1 (floor (sqrt (fromIntegral n :: Double)))
    batches = chunks samples
    chunks xs = case splitAt m xs of
      (b, rest) | length b == m -> b : chunks rest
      _ -> []
    tau i =
      let xs = map (U.! i) samples
          means = [sum (map (U.! i) b) / fromIntegral m | b <- batches]
          v = variance xs
      in if length means < 2 || not (v > 0) then 1 else fromIntegral m * variance means / v
    variance ys =
      let k = fromIntegral (length ys)
          mu = sum ys / k
      in sum [(y - mu) * (y - mu) | y <- ys] / (k - 1)
