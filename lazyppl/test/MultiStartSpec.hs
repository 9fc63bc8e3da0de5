-- | Multi-start warm-up initialisation ("LazyPPL.Internal.MultiStart"):
-- a chain whose own start lies in the basin of a mode holding negligible
-- mass is moved to the dominant mode (and then samples the posterior
-- exactly), while modes of equal mass keep their chains.
--
-- Both targets are mixtures of two isotropic Gaussians in the tree's own
-- Gaussian coordinates (each site drawn N(0, 1) and re-weighted by
-- target / prior), so the Laplace log mass of each component is known in
-- closed form: log of its weight.  The components lie far apart (at least
-- 5.5 of the wider one's SDs in each of 4 or 8 coordinates), so the MCMC
-- moves alone do not cross between them in a run: where a chain is after
-- warm-up is decided by its initialisation.
module MultiStartSpec (spec) where

import Control.Monad (replicateM)
import Data.Maybe (mapMaybe)
import Data.Word (Word64)
import Test.Hspec

import LazyPPL
import LazyPPL.Distributions
import Stats

-- | Two isotropic Gaussian components in @k@ dimensions: weights, centres
-- (the same value in every coordinate) and SDs.  Returns the first
-- coordinate.
twoModes :: Int -> (Double, Double, Double) -> (Double, Double, Double) -> Meas Double
twoModes k (w1, m1, s1) (w2, m2, s2) = do
  xs <- replicateM k (sample (normal 0 1))
  let comp w m s = log w + sum [normalLogPdf m s x | x <- xs]
      a = comp w1 m1 s1
      b = comp w2 m2 s2
      top = max a b
      logTarget = top + log (exp (a - top) + exp (b - top))
  scoreLog (Exp (logTarget - sum [normalLogPdf 0 1 x | x <- xs]))
  return (head xs)

-- | Weight of the minor component of 'negligible'.
epsilon :: Double
epsilon = 1e-6

-- | A dominant mode at (1.75, …) and one at (−1.75, …) holding a 1e-6 share
-- of the mass, both with SD 0.3, in 4 dimensions: about 43% of prior draws
-- descend to the minor mode.  Posterior of the first coordinate: mean
-- (1 − ε)·1.75 − ε·1.75, SD √(0.09 + ε(1 − ε)·3.5²).
negligible :: Meas Double
negligible = twoModes 4 (1 - epsilon, 1.75, 0.3) (epsilon, -1.75, 0.3)

negligibleTruth :: (Double, Double)
negligibleTruth = (1.75 * (1 - 2 * epsilon), sqrt (0.09 + epsilon * (1 - epsilon) * 3.5 * 3.5))

-- | Equal masses, unequal widths, in 8 dimensions: the narrow mode's
-- density peak (at the origin) is 8·log(0.55/0.15) ≈ 10.4 nats above the
-- broad one's (at (3, …)), so a score by height instead of mass would move
-- chains from the broad mode to the narrow one.  About 44% of prior draws
-- descend to the narrow mode.
equalMass :: Meas Double
equalMass = twoModes 8 (0.5, 0, 0.15) (0.5, 3, 0.55)

settings :: Word64 -> SamplerSettings
settings seed = defaultSettings {ssSeed = seed, ssWarmup = 2000, ssDraws = 1000, ssThin = 5}

tuningOf :: String -> ChainResult a -> Maybe Double
tuningOf key = lookup key . crTuning

spec :: Spec
spec = do
  describe "a minor mode holding 1e-6 of the mass (4 dimensions)" $ do
    rs <- runIO (sampleChains (settings 2) negligible)
    it "a chain started in the minor mode's basin was moved" $
      length [() | r <- rs, tuningOf "multistart_moved" r == Just 1] `shouldSatisfy` (>= 1)
    it "the gain recorded for a move is the Laplace log-mass ratio log((1 − ε)/ε)" $
      mapM_ (\r -> case (tuningOf "multistart_moved" r, tuningOf "multistart_gain" r) of
                (Just 1, Just g) -> abs (g - log ((1 - epsilon) / epsilon)) `shouldSatisfy` (< 0.05)
                _ -> return ()) rs
    it "every chain ends in the dominant mode" $
      map (mean . crDraws) rs `shouldSatisfy` all (> 1)
    it "the draws match the known posterior (mean and SD within 4 MCSE)" $ do
      let chains = map crDraws rs
          (trueMean, trueSd) = negligibleTruth
          m = mean (concat chains)
          mcse = pooledMcse 20 chains
      mcse `shouldSatisfy` (< 0.1 * trueSd)
      abs (m - trueMean) `shouldSatisfy` (< 4 * mcse)
      let sq = map (map (\x -> (x - m) ^ (2 :: Int))) chains
          v = mean (concat sq)
      abs (log (sqrt v / trueSd)) `shouldSatisfy` (< 4 * pooledMcse 20 sq / (2 * v))

  describe "two modes of equal mass and unequal height (8 dimensions)" $ do
    rs <- runIO (sampleChains (settings 3) equalMass)
    it "no chain is moved" $
      map (tuningOf "multistart_moved") rs `shouldSatisfy` all (== Just 0)
    it "extra searches found the other mode and scored it by mass (gain near 0, not ±10.4)" $ do
      let gains = mapMaybe (tuningOf "multistart_gain") rs
      gains `shouldSatisfy` (not . null)
      gains `shouldSatisfy` all (\g -> abs g < 0.5)
    it "chains stay in both modes" $ do
      let means = map (mean . crDraws) rs
      means `shouldSatisfy` any (< 1)
      means `shouldSatisfy` any (> 2)
