-- | The core monads and upstream-named inference functions.
module CoreSpec (spec) where

import Control.Exception (evaluate)
import Data.Monoid (Product (..))
import System.Random (mkStdGen)
import Test.Hspec
import Test.QuickCheck hiding (sample, total)

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Linear
import LazyPPL.ODE
import Stats (mean, sampleSd)

-- | A program with branching, laziness and an infinite stream.
program :: Prob (Double, [Double], Bool)
program = do
  a <- normal 0 1
  xs <- iid (uniformbounded 0 1)
  b <- bernoulli 0.5
  return (a, take 5 xs, b)

weightOf :: Meas () -> Double
weightOf m = case weightedsamplesWith (mkStdGen 1) m of
  ((_, w) : _) -> exp (ln w)
  [] -> error "no samples"

spec :: Spec
spec = do
  describe "runProb" $ do
    it "is deterministic for a fixed tree" $ property $ \seed ->
      let t = randomTree (mkStdGen seed)
      in runProb program t == runProb program t
    it "gives different results on different trees" $
      runProb program (randomTree (mkStdGen 1)) /= runProb program (randomTree (mkStdGen 2))
    it "labels of a random tree are uniforms in (0, 1)" $ property $ \seed ->
      let Tree r (Tree r1 _ : _) = randomTree (mkStdGen seed)
      in r > 0 && r < 1 && r1 > 0 && r1 < 1 && r /= r1
    it "uniform reads the root label; sequencing reads the children" $ do
      let leaf x = Tree x (map leaf [x + 1 ..])
          t = Tree 0.5 [leaf 0.1, leaf 0.2, leaf 0.3]
      runProb uniform t `shouldBe` 0.5
      runProb (do a <- uniform; b <- uniform; return (a, b)) t `shouldBe` (0.1, 0.2)
      -- as upstream, fmap = liftM, so a mapped uniform reads one level deeper
      runProb ((,) <$> uniform <*> uniform) t `shouldBe` (1.1, 0.2)

  describe "score and scoreLog" $ do
    it "multiply weights" $
      weightOf (score 2 >> score 3) `shouldSatisfy` (\w -> abs (w - 6) < 1e-12)
    it "NaN, negative and zero scores are weight zero" $ do
      weightOf (score (0 / 0)) `shouldBe` 0
      weightOf (score (-1)) `shouldBe` 0
      weightOf (score 0) `shouldBe` 0
      weightOf (score 5 >> scoreLog (Exp (0 / 0))) `shouldBe` 0
    it "scoreLog adds log weights" $
      weightOf (scoreLog (Exp 1) >> scoreLog (Exp 2)) `shouldSatisfy` (\w -> abs (w - exp 3) < 1e-9)

  describe "LazyPPL.ODE" $ do
    let close tol a b = abs (a - b) <= tol * max 1 (abs b)
        decay k _ [y] = [-k * y]
        decay _ _ _ = error "one component"
    it "solves exponential decay at every requested time" $ property $ \(Positive k0) ->
      let k = 0.1 + min 3 k0
          ts = [0.5, 1, 2.5, 4]
      in case dormandPrince 1e-10 1e-12 (decay k) 0 [2] ts of
           Just ys -> and (zipWith (\t [y] -> close 1e-8 y (2 * exp (-k * t))) ts ys)
           Nothing -> False
    it "solves a two-component system (harmonic oscillator) and a time-dependent one" $ do
      let osc _ [x, v] = [v, -x]
          osc _ _ = error "two components"
          ts = [1, 2, 3, 10]
          Just xs = dormandPrince 1e-10 1e-10 osc 0 [1, 0] ts
      and (zipWith (\t [x, v] -> close 1e-7 x (cos t) && close 1e-7 v (-sin t)) ts xs) `shouldBe` True
      let Just ss = dormandPrince 1e-10 1e-10 (\t [_] -> [cos t]) 0 [0] ts
      and (zipWith (\t [s] -> close 1e-7 s (sin t)) ts ss) `shouldBe` True
    it "gives the start state at the start time and repeated times" $
      dormandPrince 1e-6 1e-6 (decay 1) 1 [3] [1, 2, 2]
        `shouldSatisfy` (\r -> case r of
                                 Just [[a], [b], [c]] -> a == 3 && close 1e-5 b (3 * exp (-1)) && b == c
                                 _ -> False)
    it "gives Nothing when the solver cannot make progress (non-finite right-hand side)" $
      dormandPrince 1e-6 1e-6 (\_ [y] -> [y / 0 - y / 0]) 0 [1] [1] `shouldBe` Nothing
    it "refuses a right-hand side of the wrong size and decreasing times" $ do
      evaluate (dormandPrince 1e-6 1e-6 (\_ _ -> [1]) 0 [1, 2] [1]) `shouldThrow` anyErrorCall
      evaluate (dormandPrince 1e-6 1e-6 (\_ _ -> [1, 2, 3]) 0 [1, 2] [1]) `shouldThrow` anyErrorCall
      evaluate (dormandPrince 1e-6 1e-6 (decay 1) 0 [1] [2, 1]) `shouldThrow` anyErrorCall
      evaluate (dormandPrince 1e-6 1e-6 (decay 1) 3 [1] [2]) `shouldThrow` anyErrorCall

  describe "LazyPPL.Linear" $ do
    it "mulVec agrees with the list computation" $ property $ \(Positive r) (Positive c) seed ->
      let rows = [[fromIntegral ((i * 7 + j * 3 + seed) `mod` 11) - 5 | j <- [1 .. c `mod` 8 + 1]] | i <- [1 .. r `mod` 20 + 1 :: Int]]
          v = [fromIntegral j / 3 | j <- [1 .. length (head rows)]]
          expected = [sum (zipWith (*) row v) | row <- rows]
      in and (zipWith (\a b -> abs (a - b) < 1e-9) (mulVec (denseMatrix rows) v) expected)
           && denseToRows (denseMatrix rows) == rows
    it "dotProduct is the inner product" $
      dotProduct [1, 2, 3] [4, 5, 6] `shouldBe` 32
    it "cholesky gives L with L Lᵀ = A, zeros above the diagonal, reading A's lower triangle" $
      property $ \(Positive n0) seed ->
        let n = n0 `mod` 12 + 1
            -- A = B Bᵀ + n I: symmetric positive definite
            b = [[fromIntegral ((i * 5 + j * 3 + seed) `mod` 7) - 3 | j <- [1 .. n]] | i <- [1 .. n :: Int]]
            a = [[sum (zipWith (*) ri rj) + (if i == j then fromIntegral n else 0) | (j, rj) <- zip [0 :: Int ..] b]
                | (i, ri) <- zip [0 :: Int ..] b]
            -- garbage above the diagonal must not matter
            lowerOnly = [[if j > i then 1e9 else x | (j, x) <- zip [0 :: Int ..] row] | (i, row) <- zip [0 :: Int ..] a]
        in case (cholesky (denseMatrix a), cholesky (denseMatrix lowerOnly)) of
             (Just l, Just l') ->
               let rows = denseToRows l
                   prod = [[sum (zipWith (*) ri rj) | rj <- rows] | ri <- rows]
               in and [abs (p - x) < 1e-8 * (1 + abs x) | (pr, ar) <- zip prod a, (p, x) <- zip pr ar]
                    && and [x == 0 | (i, row) <- zip [0 :: Int ..] rows, (j, x) <- zip [0 ..] row, j > i]
                    && denseToRows l' == rows
             _ -> False
    it "cholesky refuses a matrix that is not positive definite, not finite or not square" $ do
      fmap denseToRows (cholesky (denseMatrix [[4, 2], [2, 1]])) `shouldBe` Nothing
      fmap denseToRows (cholesky (denseMatrix [[1, 0], [0, -1]])) `shouldBe` Nothing
      fmap denseToRows (cholesky (denseMatrix [[1, 0], [0 / 0, 1]])) `shouldBe` Nothing
      fmap denseToRows (cholesky (denseMatrix [[1, 0, 0], [0, 1, 0]])) `shouldBe` Nothing
      fmap denseToRows (cholesky (denseMatrix [[4, 0], [2, 2]])) `shouldBe` Just [[2, 0], [1, 1]]
    it "solveLower inverts L, and gives the multivariate normal log density" $ do
      let Just l = cholesky (denseMatrix [[4, 2], [2, 5]])
          z = solveLower l [2, 7]
      z `shouldSatisfy` (\zs -> and (zipWith (\u v -> abs (u - v) < 1e-12) zs [1, 3]))
      denseDiagonal l `shouldBe` [2, 2]
      -- log N((2, 7) | 0, Σ) with det Σ = 16 and yᵀΣ⁻¹y = |z|² = 10
      let logPdf = -0.5 * sum (map (^ (2 :: Int)) z) - sum (map log (denseDiagonal l)) - log (2 * pi)
      logPdf `shouldSatisfy` (\v -> abs (v - (-5 - 0.5 * log 16 - log (2 * pi))) < 1e-12)

  describe "every" $ do
    it "keeps every n-th element (1-based multiples)" $
      every 3 [1 .. 10 :: Int] `shouldBe` [3, 6, 9]
    it "has length ⌊len/n⌋" $ property $ \(Positive n) xs ->
      length (every n (xs :: [Int])) == length xs `div` n

  describe "upstream-semantics mh (seeded)" $ do
    let model = do
          x <- sample (normal 0 1)
          score (normalPdf x 0.5 1.2)
          return x
        run g = take 20000 (mhWith (mkStdGen g) 0.5 model)
    it "is reproducible for a fixed generator" $
      map fst (take 200 (run 3)) `shouldBe` map fst (take 200 (run 3))
    it "targets the posterior of a normal-normal model" $ do
      -- posterior N(1.2·1/(1+0.25), √(0.25/1.25)) = N(0.96, 0.447)
      let xs = map fst (run 5)
      abs (mean xs - 0.96) `shouldSatisfy` (< 0.05)
      abs (sampleSd xs - sqrt 0.2) `shouldSatisfy` (< 0.03)
    it "reports the weight of each state" $
      all (\(x, w) -> abs (ln (getProduct w) - log (normalPdf x 0.5 1.2)) < 1e-9) (take 100 (run 7))
        `shouldBe` True
    it "fails clearly when no state has positive weight" $
      evaluate (fst (head (mhWith (mkStdGen 1) 0.5 (score 0 >> return ()))))
        `shouldThrow` (\(NoValidStart n) -> n > 0)

  describe "wis" $
    it "resamples in proportion to the weights" $ do
      let model = do
            b <- sample (bernoulli 0.5)
            score (if b then 3 else 1)
            return b
          xs = take 4000 (wisWith (mkStdGen 2) 4000 model)
          frac = fromIntegral (length (filter id xs)) / 4000 :: Double
      abs (frac - 0.75) `shouldSatisfy` (< 0.04)
