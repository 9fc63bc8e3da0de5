-- | Statistical helpers for the tests: moments, the Kolmogorov–Smirnov
-- statistic against a CDF obtained by integrating a log-density numerically,
-- a chi-square goodness-of-fit statistic, and batch-means Monte Carlo
-- standard errors.
module Stats
  ( mean
  , variance
  , sampleSd
  , ksAgainstDensity
  , ksCritical
  , integrateDensity
  , chiSquare
  , chiSquareCritical
  , batchMeansMcse
  , pooledMcse
  , drawsOf
  ) where

import Data.List (sort)
import Numeric.SpecFunctions (invIncompleteGamma)
import System.Random (mkStdGen)

import LazyPPL (Prob, randomTree, runProb)

-- | Sample mean.
mean :: [Double] -> Double
mean xs = sum xs / fromIntegral (length xs)

-- | Sample variance (divisor n − 1).
variance :: [Double] -> Double
variance xs = let m = mean xs in sum [(x - m) ^ (2 :: Int) | x <- xs] / fromIntegral (length xs - 1)

-- | Sample standard deviation.
sampleSd :: [Double] -> Double
sampleSd = sqrt . variance

-- | @n@ independent draws: draw @k@ runs the distribution on the tree of
-- generator @mkStdGen (seed + k)@.
drawsOf :: Int -> Int -> Prob a -> [a]
drawsOf seed n p = [runProb p (randomTree (mkStdGen (seed + k))) | k <- [1 .. n]]

-- 8-point Gauss–Legendre nodes and weights on [-1, 1].
gaussLegendre :: [(Double, Double)]
gaussLegendre =
  [ (-0.9602898564975363, 0.1012285362903763), (-0.7966664774136267, 0.2223810344533745)
  , (-0.5255324099163290, 0.3137066458778873), (-0.1834346424956498, 0.3626837833783620)
  , (0.1834346424956498, 0.3626837833783620), (0.5255324099163290, 0.3137066458778873)
  , (0.7966664774136267, 0.2223810344533745), (0.9602898564975363, 0.1012285362903763) ]

-- | ∫ g over [a, b] with @pieces@ Gauss–Legendre panels.
panels :: Int -> (Double -> Double) -> Double -> Double -> Double
panels pieces g a b = sum [panel (a + h * fromIntegral i) (a + h * fromIntegral (i + 1)) | i <- [0 .. pieces - 1]]
  where
    h = (b - a) / fromIntegral pieces
    panel lo hi =
      let c = 0.5 * (lo + hi); r = 0.5 * (hi - lo)
      in r * sum [w * g (c + r * t) | (t, w) <- gaussLegendre]

-- | ∫ h(x) f(x) dx over the support (lo, hi), where f = exp logDensity,
-- computed in t = atan x so infinite supports become finite intervals.
integrateDensity :: (Double -> Double) -> (Double, Double) -> (Double -> Double) -> Double
integrateDensity logDensity (lo, hi) h = panels 4000 integrand (atan lo) (atan hi)
  where
    integrand t = let x = tan t; c = cos t in h x * safeExp (logDensity x) / (c * c)

safeExp :: Double -> Double
safeExp v = if isNaN v then 0 else exp v

-- | The Kolmogorov–Smirnov statistic D of a sample against the CDF obtained
-- by integrating exp logDensity from the lower end of the support (and the
-- total mass, which should be 1).
ksAgainstDensity :: (Double -> Double) -> (Double, Double) -> [Double] -> (Double, Double)
ksAgainstDensity logDensity (lo, hi) xs = (maximum gaps, total)
  where
    sorted = sort xs
    n = fromIntegral (length xs) :: Double
    ts = map atan sorted
    g t = let x = tan t; c = cos t in safeExp (logDensity x) / (c * c)
    start = atan lo
    increments = zipWith (panels 1 g) ts (tail ts)
    cdfs = scanl (+) (panels 200 g start (head ts)) increments
    total = last cdfs + panels 200 g (last ts) (atan hi)
    gaps = [max (fromIntegral i / n - f) (f - fromIntegral (i - 1) / n) | (i, f) <- zip [1 :: Int ..] cdfs]

-- | Critical value of D at level 0.001 for n draws (asymptotic).
ksCritical :: Int -> Double
ksCritical n = 1.949 / sqrt (fromIntegral n)

-- | Pearson's chi-square statistic for observed counts against expected
-- probabilities; cells with expectation below 5 are pooled into one.
-- Returns the statistic and its degrees of freedom.
chiSquare :: [(Int, Double)] -> Int -> (Double, Int)
chiSquare cells n = (stat, length used + (if pooledE > 0 then 1 else 0) - 1)
  where
    nn = fromIntegral n
    (used, small) = span' (\(_, p) -> nn * p >= 5) cells
    pooledO = fromIntegral (sum (map fst small)) :: Double
    pooledE = nn * sum (map snd small) + nn * (1 - sum (map snd cells))
    term o e = (o - e) ^ (2 :: Int) / e
    stat = sum [term (fromIntegral o) (nn * p) | (o, p) <- used]
      + (if pooledE > 0 then term pooledO pooledE else 0)
    span' f xs = (filter f xs, filter (not . f) xs)

-- | Upper 0.001 quantile of the chi-square distribution with k degrees of
-- freedom.
chiSquareCritical :: Int -> Double
chiSquareCritical k = 2 * invIncompleteGamma (fromIntegral k / 2) 0.999

-- | Batch-means MCSE of the mean of one chain: split into @b@ equal batches;
-- MCSE = sd(batch means) / √b.
batchMeansMcse :: Int -> [Double] -> Double
batchMeansMcse b xs = sampleSd batchMeans / sqrt (fromIntegral b)
  where
    size = length xs `div` b
    batchMeans = [mean (take size (drop (i * size) xs)) | i <- [0 .. b - 1]]

-- | MCSE of the pooled mean of equally long chains: √(Σ mcse_c²) / chains.
pooledMcse :: Int -> [[Double]] -> Double
pooledMcse b chains =
  sqrt (sum [batchMeansMcse b c ^ (2 :: Int) | c <- chains]) / fromIntegral (length chains)
