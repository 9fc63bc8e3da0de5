{-# LANGUAGE OverloadedStrings #-}
-- | Data accessors and draw naming.
module BridgeSpec (spec) where

import Control.Exception (ErrorCall (..), evaluate)
import Data.List (isPrefixOf)
import qualified Data.Aeson as A
import Test.Hspec

import LazyPPL.Bridge

dat :: Data
dat = either error id $ dataFromValue $ A.object
  [ "J" A..= (8 :: Int), "x" A..= (3.0 :: Double), "half" A..= (2.5 :: Double)
  , "y" A..= [1, 2.5, -3 :: Double], "n" A..= [1, 2, 3.0 :: Double]
  , "m" A..= [[1, 2], [3, 4 :: Int]], "ragged" A..= [[1, 2], [3 :: Int]]
  , "s" A..= ("text" :: String), "big" A..= (1e30 :: Double) ]

failsWith :: String -> a -> Expectation
failsWith prefix v = evaluate v `shouldThrow` (\(ErrorCall msg) -> prefix `isPrefixOf` msg)

spec :: Spec
spec = do
  describe "data accessors" $ do
    it "reads integers, also written as 3.0" $ do
      int "J" dat `shouldBe` 8
      int "x" dat `shouldBe` 3
      ints "n" dat `shouldBe` [1, 2, 3]
    it "reads reals from any number" $ do
      real "J" dat `shouldBe` 8
      reals "y" dat `shouldBe` [1, 2.5, -3]
    it "reads matrices" $ do
      intMatrix "m" dat `shouldBe` [[1, 2], [3, 4]]
      realMatrix "m" dat `shouldBe` [[1, 2], [3, 4]]
    it "names a missing field" $ failsWith "data field \"nope\" is missing" (real "nope" dat)
    it "names an ill-typed field" $ do
      failsWith "data field \"half\" must be an integer" (int "half" dat)
      failsWith "data field \"s\" must be a number" (real "s" dat)
      failsWith "data field \"y\" must be a list of integers" (sum (ints "y" dat))
      failsWith "data field \"J\" must be a list of numbers" (sum (reals "J" dat))
      failsWith "data field \"ragged\" must have rows of equal length" (length (intMatrix "ragged" dat))
      failsWith "data field \"big\"" (int "big" dat)
    it "rejects non-object data" $
      either (const True) (const False) (dataFromValue (A.toJSON [1 :: Int])) `shouldBe` True

  describe "draws" $ do
    it "expands names 1-based, matrices row-major" $ do
      let d = draw [scalar "mu" 1, vector "theta" [1, 2, 3], matrix "beta" [[1, 2], [3, 4]]]
      concatMap scalarNames (drawFields d) `shouldBe`
        ["mu", "theta[1]", "theta[2]", "theta[3]", "beta[1,1]", "beta[1,2]", "beta[2,1]", "beta[2,2]"]
      concatMap fieldValues (drawFields d) `shouldBe` [1, 1, 2, 3, 1, 2, 3, 4]
      map fieldShape (drawFields d) `shouldBe` [[], [3], [2, 2]]
    it "rejects duplicate names and ragged matrices" $ do
      failsWith "draw: the name \"a\" is used twice" (length (drawFields (draw [scalar "a" 1, scalar "a" 2])))
      failsWith "matrix \"b\"" (fieldShape (matrix "b" [[1], [2, 3]]))
    it "rejects names outside SPEC 2.3 and more than maxScalars scalars" $ do
      failsWith "draw: \"x]\" is not a parameter name" (length (drawFields (draw [scalar "x]" 1])))
      failsWith "draw: \"alpha[200000]\" is not a parameter name"
        (length (drawFields (draw [scalar "mu" 0, scalar "alpha[200000]" 1])))
      failsWith "draw: 2050 scalars, more than the limit of 2000"
        (length (drawFields (draw [vector "v" (replicate 1000 0), matrix "m" (replicate 10 (replicate 105 0))])))
      length (drawFields (draw [vector "v" (replicate maxScalars 0)])) `shouldBe` 1
      map validBaseName ["mu", "_x1", "theta_trans", "A"] `shouldBe` [True, True, True, True]
      map validBaseName ["", "1a", "a b", "a.b", "x]", "\956", replicate 101 'a'] `shouldBe` replicate 7 False
