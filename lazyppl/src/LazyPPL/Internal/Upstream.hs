{-# LANGUAGE Trustworthy #-}
-- | Upstream LazyPPL 1.0.1's inference functions with their upstream types,
-- and seeded pure variants.
--
-- The upstream-typed 'mh', 'mhirreducible', 'weightedsamples' and 'wis' take
-- their randomness from the global 'System.Random' generator (via
-- 'newStdGen'), as upstream does, so they are not reproducible; the @…With@
-- variants take a 'StdGen' and are pure and reproducible.  Two deliberate
-- differences from upstream: a chain starts at a state of finite positive
-- weight (upstream starts wherever its first tree falls and never moves off a
-- NaN weight), and a chain does not keep its history of trees alive.
module LazyPPL.Internal.Upstream
  ( mh
  , mhWith
  , mhirreducible
  , mhirreducibleWith
  , weightedsamples
  , weightedsamplesWith
  , wis
  , wisWith
  , every
  ) where

import Control.Exception (throw)
import Control.Monad.Trans.Writer (runWriterT)
import Data.Monoid (Product (..))
import Numeric.Log (Log (..))
import Data.Word (Word64)
import System.Random (StdGen, genWord64, newStdGen)

import LazyPPL.Internal.Chain (NoValidStart (..))
import LazyPPL.Internal.Core
import LazyPPL.Internal.Kernels
import LazyPPL.Internal.Random

-- | Metropolis–Hastings with upstream's proposal: every site the program read
-- is redrawn from the prior with probability @p@; acceptance is the weight
-- ratio.  Returns an infinite stream of (result, weight) pairs, one per step.
-- Randomness comes from the global generator.
mh :: Double -> Meas a -> IO [(a, Product (Log Double))]
mh p m = (\g -> mhWith g p m) <$> newStdGen

-- | 'mh' with an explicit generator: pure and reproducible.
mhWith :: StdGen -> Double -> Meas a -> [(a, Product (Log Double))]
mhWith g p = chainStream g (PriorRedraw p)

-- | Upstream's irreducible variant: with probability @q@ redraw every site,
-- otherwise behave like 'mh' @p@.  Uses the global generator.
mhirreducible :: Double -> Double -> Meas a -> IO [(a, Product (Log Double))]
mhirreducible p q m = (\g -> mhirreducibleWith g p q m) <$> newStdGen

-- | 'mhirreducible' with an explicit generator.
mhirreducibleWith :: StdGen -> Double -> Double -> Meas a -> [(a, Product (Log Double))]
mhirreducibleWith g p q = chainStream g (Restart q p)

chainStream :: StdGen -> Kernel -> Meas a -> [(a, Product (Log Double))]
chainStream g kernel m =
  case start 1 (mkGen (fst (genWord64 g))) of
    (st0, gen) -> go st0 gen
  where
    eval = evaluateLazyAt m
    maxTries = 1000 :: Int
    start k gen
      | k > maxTries = throw (NoValidStart maxTries)
      | otherwise =
          let (seed, gen') = nextWord64 gen
              ev = eval seed mempty
          in if validLogWeight (evLogWeight ev)
               then (ChainState (evSites ev) (evLogWeight ev) (evValue ev), gen')
               else start (k + 1) gen'
    go st gen =
      let (st', _, gen') = mhStep eval kernel gen st
      in (csValue st', Product (Exp (csLogWeight st'))) : go st' gen'

-- | Independent draws from the program's prior with their weights (not
-- samples from the posterior).  Uses the global generator.
weightedsamples :: Meas a -> IO [(a, Log Double)]
weightedsamples m = (`weightedsamplesWith` m) <$> newStdGen

-- | 'weightedsamples' with an explicit generator: draw @k@ runs the program
-- on the tree seeded by hash(seed, k).
weightedsamplesWith :: StdGen -> Meas a -> [(a, Log Double)]
weightedsamplesWith g = weightedFromSeed (fst (genWord64 g))

weightedFromSeed :: Word64 -> Meas a -> [(a, Log Double)]
weightedFromSeed seed (Meas m) =
  [ fmap getProduct (runProb (runWriterT m) (seededTree (combine seed k))) | k <- [0 ..] ]

-- | Weighted importance sampling: take @n@ weighted prior draws and resample
-- an infinite stream from them in proportion to their weights.  Uses the
-- global generator.
wis :: Int -> Meas a -> IO [a]
wis n m = (\g -> wisWith g n m) <$> newStdGen

-- | 'wis' with an explicit generator.
wisWith :: StdGen -> Int -> Meas a -> [a]
wisWith g n m
  | null draws || not (totalW > 0) = error "wis: no draw has positive finite weight"
  | otherwise = map pick (uniforms (mkGen resampleSeed))
  where
    (drawSeed, gen1) = nextWord64 (mkGen (fst (genWord64 g)))
    resampleSeed = fst (nextWord64 gen1)
    draws = take n (weightedFromSeed drawSeed m)
    -- weights relative to the largest finite log weight, for stability
    logs = [if isNaN l || isInfinite l then -1 / 0 else l | l <- map (ln . snd) draws]
    top = maximum logs
    cumulative = scanl1 (+) [exp (l - top) | l <- logs]
    totalW = if null cumulative then 0 else last cumulative
    pick u = case [x | ((x, _), c) <- zip draws cumulative, c >= u * totalW] of
      (x : _) -> x
      [] -> fst (last draws)
    uniforms gen = let (u, gen') = nextUniform gen in u : uniforms gen'

-- | Thin a stream: @every n xs@ keeps the elements at positions n, 2n, 3n, …
-- (1-based), as upstream does.
every :: Int -> [a] -> [a]
every n xs = case drop (n - 1) xs of
  (y : ys) -> y : every n ys
  [] -> []
