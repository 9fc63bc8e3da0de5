{-# LANGUAGE OverloadedStrings #-}
-- | Distributions: log-densities against SciPy fixtures; each sampler against
-- its own log-density (moments computed by integrating the density, and a
-- Kolmogorov–Smirnov or chi-square test on 10⁴ draws).
module DistributionSpec (spec) where

import Control.Monad (forM_, unless)
import qualified Data.Aeson as A
import qualified Data.Aeson.KeyMap as KM
import qualified Data.ByteString.Lazy as BL
import qualified Data.Map.Strict as Map
import Data.Maybe (fromMaybe)
import qualified Data.Scientific as S
import qualified Data.Text as T
import qualified Data.Vector as V
import Test.Hspec
import Test.QuickCheck hiding (sample, total)

import LazyPPL (Prob)
import LazyPPL.Distributions
import Stats

draws :: Int
draws = 10000

spec :: Spec
spec = do
  describe "log-densities match SciPy (test/fixtures/logpdf.json)" $ do
    cases <- runIO loadCases
    it "has the fixture cases" $ length cases `shouldSatisfy` (> 100)
    forM_ cases $ \(dist, params, x, expected) ->
      it (dist ++ " " ++ show params ++ " at " ++ showValue x) $ do
        let got = evalCase dist params x
        unless (close expected got) $
          expectationFailure ("expected " ++ show expected ++ ", got " ++ show got)

  describe "continuous samplers agree with their log-densities" $
    forM_ continuous $ \(name, sampler, logDensity, support, checkMoments) ->
      it name $ do
        let xs = drawsOf 17 draws sampler
            (d, total) = ksAgainstDensity logDensity support xs
        total `shouldSatisfy` (\t -> abs (t - 1) < 1e-3)
        d `shouldSatisfy` (< ksCritical draws)
        if checkMoments
          then do
            let mu = integrateDensity logDensity support id
                var = integrateDensity logDensity support (\x -> (x - mu) ^ (2 :: Int))
                m = mean xs
                s2 = variance xs
                m4 = mean [(x - m) ^ (4 :: Int) | x <- xs]
                seVar = sqrt ((m4 - s2 * s2) / fromIntegral draws)
            abs (m - mu) `shouldSatisfy` (< 5 * sqrt (var / fromIntegral draws))
            abs (s2 - var) `shouldSatisfy` (< 5 * seVar)
          else return ()

  describe "discrete samplers agree with their log-masses" $
    forM_ discrete $ \(name, sampler, logMass, support) ->
      it name $ do
        let ks = drawsOf 23 draws sampler
            counts = Map.fromListWith (+) [(k, 1 :: Int) | k <- ks]
            probs = [(k, exp (logMass k)) | k <- support]
            cells = [(Map.findWithDefault 0 k counts, p) | (k, p) <- probs]
            (stat, dof) = chiSquare cells draws
            mu = sum [fromIntegral k * p | (k, p) <- probs]
            var = sum [(fromIntegral k - mu) ^ (2 :: Int) * p | (k, p) <- probs]
        all (`elem` support) ks `shouldBe` True
        sum (map snd probs) `shouldSatisfy` (\t -> abs (t - 1) < 1e-6)
        stat `shouldSatisfy` (< chiSquareCritical dof)
        abs (mean (map fromIntegral ks) - mu) `shouldSatisfy` (< 5 * sqrt (var / fromIntegral draws))

  describe "dirichlet" $ do
    let alphas = [1.5, 2.0, 3.5]
        xss = drawsOf 31 draws (dirichlet alphas)
    it "draws lie on the simplex" $
      all (\xs -> all (>= 0) xs && abs (sum xs - 1) < 1e-12) xss `shouldBe` True
    it "first coordinate is beta(α₁, Σα − α₁)" $ do
      let (d, _) = ksAgainstDensity (betaLogPdf 1.5 5.5) (0, 1) (map head xss)
      d `shouldSatisfy` (< ksCritical draws)
    it "log-density is -inf off the simplex" $
      dirichletLogPdf alphas [0.5, 0.5, 0.5] `shouldBe` (-1 / 0)

  describe "properties" $ do
    it "normalPdf = exp . normalLogPdf" $ property $ \m (Positive s) x ->
      let a = normalPdf m s x; b = exp (normalLogPdf m s x)
      in abs (a - b) <= 1e-12 * max 1 (abs b)
    it "invalid scale gives NaN log-density" $ property $ \m (NonNegative s) x ->
      isNaN (normalLogPdf m (-s) x) && isNaN (cauchyLogPdf m (-s) x)
    it "logSumExp is the log of the sum of exponentials" $ property $ \xs ->
      not (null xs) ==>
        let small = map (`mod'` 20) (xs :: [Double])
        in abs (logSumExp small - log (sum (map exp small))) < 1e-9 * max 1 (abs (logSumExp small))
    it "uniformdiscrete stays in range" $ property $ \(Positive n) seed ->
      all (\k -> k >= 0 && k < n) (drawsOf seed 50 (uniformdiscrete n))
    it "binomial stays in range" $ property $ \(NonNegative n) p' seed ->
      let p = abs (sin p') in all (\k -> k >= 0 && k <= n) (drawsOf seed 20 (binomial (n `mod` 500) p))
  where
    mod' x m = x - m * fromIntegral (floor (x / m) :: Int)

type Continuous = (String, Prob Double, Double -> Double, (Double, Double), Bool)

inf :: Double
inf = 1 / 0

continuous :: [Continuous]
continuous =
  [ ("normal 1.5 2", normal 1.5 2, normalLogPdf 1.5 2, (-inf, inf), True)
  , ("exponential 2.5", exponential 2.5, exponentialLogPdf 2.5, (0, inf), True)
  , ("gamma 2.5 1.5", gamma 2.5 1.5, gammaLogPdf 2.5 1.5, (0, inf), True)
  , ("gamma 1 0.3", gamma 1 0.3, gammaLogPdf 1 0.3, (0, inf), True)
  , ("invGamma 4 2", invGamma 4 2, invGammaLogPdf 4 2, (0, inf), True)
  , ("beta 2 5", beta 2 5, betaLogPdf 2 5, (0, 1), True)
  , ("beta 1 1.5", beta 1 1.5, betaLogPdf 1 1.5, (0, 1), True)
  , ("uniformbounded -1 3", uniformbounded (-1) 3, uniformBoundedLogPdf (-1) 3, (-1, 3), True)
  , ("logNormal 0.3 0.5", logNormal 0.3 0.5, logNormalLogPdf 0.3 0.5, (0, inf), True)
  , ("cauchy 1 2.5", cauchy 1 2.5, cauchyLogPdf 1 2.5, (-inf, inf), False)
  , ("halfCauchy 2.5", halfCauchy 2.5, halfCauchyLogPdf 2.5, (0, inf), False)
  , ("halfNormal 3", halfNormal 3, halfNormalLogPdf 3, (0, inf), True)
  , ("studentT 10 1 2", studentT 10 1 2, studentTLogPdf 10 1 2, (-inf, inf), True)
  , ("studentT 1.5 0 1", studentT 1.5 0 1, studentTLogPdf 1.5 0 1, (-inf, inf), False)
  , ("logistic 2 0.5", logistic 2 0.5, logisticLogPdf 2 0.5, (-inf, inf), True)
  ]

discrete :: [(String, Prob Int, Int -> Double, [Int])]
discrete =
  [ ("bernoulli 0.3", fromEnum <$> bernoulli 0.3, bernoulliLogPmf 0.3 . toEnum, [0, 1])
  , ("uniformdiscrete 7", uniformdiscrete 7, const (-log 7), [0 .. 6])
  , ("categorical", categorical [0.2, 0.5, 0.3], categoricalLogPmf [0.2, 0.5, 0.3], [0, 1, 2])
  , ("poisson 3.5", fromInteger <$> poisson 3.5, poissonLogPmf 3.5 . toInteger, [0 .. 60])
  , ("poisson 250", fromInteger <$> poisson 250, poissonLogPmf 250 . toInteger, [0 .. 600])
  , ("binomial 20 0.3", binomial 20 0.3, binomialLogPmf 20 0.3, [0 .. 20])
  , ("binomial 1000 0.02", binomial 1000 0.02, binomialLogPmf 1000 0.02, [0 .. 1000])
  ]

-- | A fixture case: distribution, parameters, point, expected value.
type Case = (String, [Double], A.Value, Double)

loadCases :: IO [Case]
loadCases = do
  bytes <- BL.readFile "test/fixtures/logpdf.json"
  case A.eitherDecode bytes of
    Left e -> fail e
    Right (A.Array xs) -> return (map toCase (V.toList xs))
    Right _ -> fail "logpdf.json: expected a list"
  where
    toCase (A.Object o) =
      ( str (KM.lookup "dist" o)
      , map num (list (KM.lookup "params" o))
      , fromMaybe A.Null (KM.lookup "x" o)
      , case KM.lookup "logpdf" o of
          Just (A.String "-inf") -> -1 / 0
          other -> num (fromMaybe A.Null other)
      )
    toCase _ = error "logpdf.json: bad case"
    str (Just (A.String t)) = T.unpack t
    str _ = error "logpdf.json: bad dist"
    list (Just (A.Array xs)) = V.toList xs
    list _ = []

num :: A.Value -> Double
num (A.Number n) = S.toRealFloat n
num v = error ("not a number: " ++ show v)

showValue :: A.Value -> String
showValue (A.Array xs) = show (map num (V.toList xs))
showValue v = show (num v)

evalCase :: String -> [Double] -> A.Value -> Double
evalCase dist ps xv = case (dist, ps) of
  ("normal", [m, s]) -> normalLogPdf m s x
  ("normalCdf", [m, s]) -> normalCdf m s x
  ("exponential", [r]) -> exponentialLogPdf r x
  ("gamma", [a, t]) -> gammaLogPdf a t x
  ("invGamma", [a, b]) -> invGammaLogPdf a b x
  ("beta", [a, b]) -> betaLogPdf a b x
  ("uniformbounded", [a, b]) -> uniformBoundedLogPdf a b x
  ("logNormal", [m, s]) -> logNormalLogPdf m s x
  ("cauchy", [l, s]) -> cauchyLogPdf l s x
  ("halfCauchy", [s]) -> halfCauchyLogPdf s x
  ("halfNormal", [s]) -> halfNormalLogPdf s x
  ("studentT", [n, l, s]) -> studentTLogPdf n l s x
  ("logistic", [l, s]) -> logisticLogPdf l s x
  ("bernoulli", [p]) -> bernoulliLogPmf p (k == 1)
  ("bernoulliLogit", [a]) -> bernoulliLogitLogPmf a (k == 1)
  ("categorical", _) -> categoricalLogPmf ps k
  ("poisson", [r]) -> poissonLogPmf r (toInteger k)
  ("binomial", [n, p]) -> binomialLogPmf (round n) p k
  ("binomialLogit", [n, a]) -> binomialLogitLogPmf (round n) a k
  ("negBinomial", [r, p]) -> negBinomialLogPmf r p k
  ("negBinomial2", [m, f]) -> negBinomial2LogPmf m f k
  ("dirichlet", _) -> dirichletLogPdf ps xs
  ("logSumExp", _) -> logSumExp xs
  ("log1pExp", _) -> log1pExp x
  ("invLogit", _) -> invLogit x
  _ -> error ("no such fixture distribution: " ++ dist)
  where
    x = case xv of A.Number n -> S.toRealFloat n; _ -> 0 / 0
    k = round x :: Int
    xs = case xv of A.Array v -> map num (V.toList v); _ -> []

-- | Equal within 1e-9 relative (or both −∞).
close :: Double -> Double -> Bool
close expected got
  | isInfinite expected = expected == got
  | otherwise = abs (expected - got) <= 1e-9 * max 1 (abs expected)
