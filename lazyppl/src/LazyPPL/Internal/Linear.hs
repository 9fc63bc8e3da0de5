{-# LANGUAGE Trustworthy #-}
{-# LANGUAGE BangPatterns #-}
-- | Small dense linear algebra for the adaptive proposals: sample covariance
-- of warm-up states, its regularisation, a Cholesky factor and the product of
-- a lower-triangular factor with a vector.  Matrices are d×d, stored row-major
-- in unboxed vectors; d is the number of adapted tree sites (at most a few
-- hundred), so O(d³) once per adaptation window is cheap.
module LazyPPL.Internal.Linear
  ( Matrix (..)
  , covariance
  , regularise
  , cholesky
  , lowerTimes
  , solveLower
  , invertSpd
  , matVec
  , identity
  , fromFunction
  , diagonal
  , entry
  ) where

import Control.Monad (forM_, when)
import Control.Monad.ST (ST, runST)
import Data.STRef (newSTRef, readSTRef, writeSTRef)
import qualified Data.Vector.Unboxed as U
import qualified Data.Vector.Unboxed.Mutable as M

-- | A square matrix: dimension and row-major entries.
data Matrix = Matrix {matDim :: !Int, matEntries :: !(U.Vector Double)}
  deriving (Show, Read)

-- | Mean and sample covariance (divisor n - 1) of equal-length vectors.
-- Returns 'Nothing' with fewer than two samples.
covariance :: [U.Vector Double] -> Maybe (U.Vector Double, Matrix)
covariance [] = Nothing
covariance [_] = Nothing
covariance xs@(x0 : _) = Just (mean, Matrix d cov)
  where
    d = U.length x0
    n = length xs
    mean = U.map (/ fromIntegral n) (foldl1 (U.zipWith (+)) xs)
    cov = runST $ do
      acc <- M.replicate (d * d) 0
      forM_ xs $ \x -> do
        let c = U.zipWith (-) x mean
        forM_ [0 .. d - 1] $ \i -> do
          let ci = c U.! i
          forM_ [0 .. i] $ \j -> M.unsafeModify acc (+ ci * (c U.! j)) (i * d + j)
      forM_ [0 .. d - 1] $ \i -> forM_ [0 .. i] $ \j -> do
        v <- M.read acc (i * d + j)
        let v' = v / fromIntegral (n - 1)
        M.write acc (i * d + j) v'
        M.write acc (j * d + i) v'
      U.freeze acc

-- | Shrink a covariance estimated from @n@ draws towards its own diagonal,
-- Σ' = n/(n+5) Σ + 5/(n+5) diag Σ, so a short window cannot produce a
-- near-singular estimate.  Diagonal entries that are exactly zero (a site that
-- never moved during the window, typically a discrete choice) become @floorVar@.
regularise :: Int -> Double -> Matrix -> Matrix
regularise n floorVar (Matrix d e) = Matrix d (U.imap adjust e)
  where
    w = fromIntegral n / (fromIntegral n + 5)
    adjust k v
      | i == j = if v > 0 && not (isNaN v) then v else floorVar
      | otherwise = if isNaN v then 0 else w * v
      where
        (i, j) = k `divMod` d

-- | Lower-triangular Cholesky factor L with L Lᵀ = A, or 'Nothing' if A is
-- not (numerically) positive definite.
cholesky :: Matrix -> Maybe Matrix
cholesky (Matrix d a) = runST $ do
  l <- M.replicate (d * d) 0
  ok <- newSTRef True
  forM_ [0 .. d - 1] $ \j -> do
    good <- readSTRef ok
    when good $ do
      s <- sumSq l j j
      let djj = a U.! (j * d + j) - s
      if djj <= 0 || isNaN djj
        then writeSTRef ok False
        else do
          let ljj = sqrt djj
          M.write l (j * d + j) ljj
          forM_ [j + 1 .. d - 1] $ \i -> do
            sij <- dotRows l i j j
            M.write l (i * d + j) ((a U.! (i * d + j) - sij) / ljj)
  good <- readSTRef ok
  if good then Just . Matrix d <$> U.freeze l else return Nothing
  where
    sumSq l j k = dotRows l j j k
    dotRows :: M.MVector s Double -> Int -> Int -> Int -> ST s Double
    dotRows l i j k = go 0 0
      where
        go !acc !m
          | m >= k = return acc
          | otherwise = do
              x <- M.read l (i * d + m)
              y <- M.read l (j * d + m)
              go (acc + x * y) (m + 1)

-- | L x for a lower-triangular L.
lowerTimes :: Matrix -> U.Vector Double -> U.Vector Double
lowerTimes (Matrix d l) x = U.generate d row
  where
    row i = go 0 0
      where
        go !acc !j
          | j > i = acc
          | otherwise = go (acc + U.unsafeIndex l (i * d + j) * U.unsafeIndex x j) (j + 1)

-- | The diagonal of a matrix.
diagonal :: Matrix -> U.Vector Double
diagonal (Matrix d e) = U.generate d (\i -> e U.! (i * d + i))

-- | Entry (i, j).
entry :: Matrix -> Int -> Int -> Double
entry (Matrix d e) i j = e U.! (i * d + j)

-- | The d×d matrix with entries f i j.
fromFunction :: Int -> (Int -> Int -> Double) -> Matrix
fromFunction d f = Matrix d (U.generate (d * d) (\k -> let (i, j) = k `divMod` d in f i j))

-- | The d×d identity.
identity :: Int -> Matrix
identity d = fromFunction d (\i j -> if i == j then 1 else 0)

-- | A x for a general square A.
matVec :: Matrix -> U.Vector Double -> U.Vector Double
matVec (Matrix d a) x = U.generate d row
  where
    row i = go 0 0
      where
        go !acc !j
          | j >= d = acc
          | otherwise = go (acc + U.unsafeIndex a (i * d + j) * U.unsafeIndex x j) (j + 1)

-- | Solve L y = b for a lower-triangular L (forward substitution).
solveLower :: Matrix -> U.Vector Double -> U.Vector Double
solveLower (Matrix d l) b = runST $ do
  y <- M.replicate d 0
  forM_ [0 .. d - 1] $ \i -> do
    let go !acc !j
          | j >= i = return acc
          | otherwise = do
              yj <- M.read y j
              go (acc + U.unsafeIndex l (i * d + j) * yj) (j + 1)
    s <- go 0 0
    M.write y i ((b U.! i - s) / U.unsafeIndex l (i * d + i))
  U.freeze y

-- | The inverse of a symmetric positive-definite matrix, via its Cholesky
-- factor, or 'Nothing' if it is not positive definite.
invertSpd :: Matrix -> Maybe Matrix
invertSpd a = do
  l <- cholesky a
  let d = matDim a
      -- columns of L⁻¹
      cols = [solveLower l (U.generate d (\i -> if i == j then 1 else 0)) | j <- [0 .. d - 1]]
      linv = fromFunction d (\i j -> (cols !! j) U.! i)
      -- A⁻¹ = L⁻ᵀ L⁻¹
  return (fromFunction d (\i j -> sum [entry linv k i * entry linv k j | k <- [max i j .. d - 1]]))
