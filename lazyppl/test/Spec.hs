-- | The lazyppl test suite (run: cabal test --offline).
module Main (main) where

import Test.Hspec

import qualified BridgeSpec
import qualified CoreSpec
import qualified DistributionSpec
import qualified HarnessSpec
import qualified MultiStartSpec
import qualified SamplerSpec

main :: IO ()
main = hspec $ do
  describe "Distributions" DistributionSpec.spec
  describe "Core" CoreSpec.spec
  describe "Bridge" BridgeSpec.spec
  describe "Sampler" SamplerSpec.spec
  describe "Multi-start warm-up" MultiStartSpec.spec
  describe "Harness" HarnessSpec.spec
