{-# LANGUAGE Trustworthy #-}
-- | Counter-based pseudo-random numbers and the uniform/Gaussian change of
-- variables used by the samplers.
--
-- Every random quantity in the library is a pure function of 64-bit seeds, so
-- a run is reproducible bit for bit and independent of thread scheduling.
-- The mixing function is the SplitMix64 finaliser (Steele, Lea, Flood 2014).
module LazyPPL.Internal.Random
  ( -- * Hashing
    mix64
  , combine
    -- * A sequential generator
  , Gen
  , mkGen
  , nextWord64
  , nextUniform
  , nextNormal
  , splitGen
    -- * Conversions
  , wordToUniform
  , wordToNormal
  , normalCdf
  , normalQuantile
  ) where

import Data.Bits (shiftR, xor)
import Data.Word (Word64)
import Numeric.SpecFunctions (erfc, invErfc)

-- | SplitMix64's output function: a bijective avalanche mix of 64 bits.
mix64 :: Word64 -> Word64
mix64 z0 =
  let z1 = (z0 `xor` (z0 `shiftR` 30)) * 0xbf58476d1ce4e5b9
      z2 = (z1 `xor` (z1 `shiftR` 27)) * 0x94d049bb133111eb
  in z2 `xor` (z2 `shiftR` 31)

-- | Hash two words into one (order matters).  Used for tree addresses
-- (parent address, child index) and for per-site random values
-- (step seed, site address).
combine :: Word64 -> Word64 -> Word64
combine a b = mix64 (mix64 (a + 0x9e3779b97f4a7c15) `xor` (b * 0xd1b54a32d192ed03 + 0x632be59bd9b4e019))

-- | A SplitMix64 generator: a seed and a counter.
data Gen = Gen !Word64 !Word64
  deriving (Eq, Show, Read)

-- | A generator from a seed.
mkGen :: Word64 -> Gen
mkGen s = Gen (mix64 s) 0

-- | The next 64 random bits.
nextWord64 :: Gen -> (Word64, Gen)
nextWord64 (Gen s c) = let c' = c + 1 in (combine s c', Gen s c')

-- | Two independent generators.
splitGen :: Gen -> (Gen, Gen)
splitGen g = let (a, g') = nextWord64 g; (b, _) = nextWord64 g' in (mkGen a, mkGen b)

-- | A uniform draw in the open interval (0, 1).
nextUniform :: Gen -> (Double, Gen)
nextUniform g = let (w, g') = nextWord64 g in (wordToUniform w, g')

-- | A standard normal draw (inverse-CDF method, one word per draw).
nextNormal :: Gen -> (Double, Gen)
nextNormal g = let (w, g') = nextWord64 g in (wordToNormal w, g')

-- | The top 53 bits as a uniform in (0, 1), never 0 or 1: (k + 1/2) / 2^53.
wordToUniform :: Word64 -> Double
wordToUniform w = (fromIntegral (w `shiftR` 11) + 0.5) * 1.1102230246251565e-16

-- | A standard normal value from 64 random bits.
wordToNormal :: Word64 -> Double
wordToNormal = normalQuantile . wordToUniform

-- | Standard normal CDF, Φ(z).
normalCdf :: Double -> Double
normalCdf z = 0.5 * erfc (-z / sqrt 2)

-- | Standard normal quantile, Φ⁻¹(u): ∓∞ at 0 and 1, NaN for NaN.
normalQuantile :: Double -> Double
normalQuantile u
  | u > 0 && u < 1 = -(sqrt 2) * invErfc (2 * u)
  | u <= 0 = -1 / 0
  | u >= 1 = 1 / 0
  | otherwise = u -- NaN
{-# INLINE normalQuantile #-}
