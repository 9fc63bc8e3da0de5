{-# LANGUAGE Trustworthy #-}
{-# LANGUAGE GeneralizedNewtypeDeriving #-}
{-# LANGUAGE PatternSynonyms #-}
-- | The core of LazyPPL: the lazy rose tree of uniforms, the probability monad
-- 'Prob' (a reader over the tree), the unnormalised-measure monad 'Meas', and
-- the instrumented evaluation the samplers use to learn which tree sites a
-- program actually reads.
--
-- Sites are addressed by a 64-bit hash of their path from the root.  A sampler
-- state is the finite map from the addresses of the sites a program read to
-- their values in Gaussian coordinates, z = Φ⁻¹(u); every other site of the
-- (infinite) tree is a fresh uniform derived from a per-step seed.
module LazyPPL.Internal.Core
  ( -- * Trees and monads
    Tree (Tree)
  , Prob (..)
  , Meas (..)
  , uniform
  , standardNormal
  , sample
  , score
  , scoreLog
  , scoreProductLog
  , runProb
  , randomTree
  , seededTree
    -- * Instrumented evaluation
  , Sites
  , Evaluation (..)
  , evaluateAt
  , evaluateLazyAt
  , freshNormal
  , validLogWeight
  ) where

import Control.DeepSeq (NFData, rnf)
import Control.Exception (evaluate)
import Control.Monad (ap, liftM)
import Control.Monad.Trans.Class (lift)
import Control.Monad.Trans.Writer (WriterT (..), tell)
import Data.IORef (IORef, modifyIORef', newIORef, readIORef)
import qualified Data.IntMap.Strict as IM
import Data.Monoid (Product (..))
import Data.Word (Word64)
import Numeric.Log (Log (..))
import System.IO.Unsafe (unsafePerformIO)
import System.Random (RandomGen, genWord64)

import LazyPPL.Internal.Random (combine, normalCdf, normalQuantile, wordToNormal, wordToUniform)

-- | A lazy, infinitely wide and infinitely deep rose tree labelled by numbers
-- in (0, 1), regarded as independent uniform draws.  A program uses up parts
-- of it as it runs; laziness means only the parts it reads are ever built.
--
-- Build and match trees with the pattern @'Tree' label children@, as
-- upstream.  Internally each node also carries its label's Gaussian
-- coordinate z = Φ⁻¹(label), computed exactly by the samplers, so that
-- 'LazyPPL.Distributions.normal' keeps full precision in the tails (a label
-- near 1 has only about 16 significant digits of 1 − u).
data Tree = Node Double Double [Tree]

-- | A node: its uniform label and its children.
pattern Tree :: Double -> [Tree] -> Tree
pattern Tree u ts <- Node u _ ts
  where
    Tree u ts = Node u (normalQuantile u) ts

{-# COMPLETE Tree #-}

-- | A probability distribution on @a@, represented as a random variable: a
-- function from the tree of uniforms to a value.
newtype Prob a = Prob (Tree -> a)

-- | Sequencing splits the tree: the first computation reads the first child,
-- the rest reads the tree with that child removed (same root label).
instance Monad Prob where
  Prob m >>= f = Prob $ \t ->
    let (t1, t2) = splitTree t
        Prob m' = f (m t1)
    in m' t2

instance Functor Prob where fmap = liftM

instance Applicative Prob where
  pure a = Prob (const a)
  (<*>) = ap

splitTree :: Tree -> (Tree, Tree)
splitTree (Node r z (t : ts)) = (t, Node r z ts)
splitTree (Node _ _ []) = error "LazyPPL: a Tree must have infinitely many children"

-- | An unnormalised measure on @a@: a probability distribution over results
-- paired with a multiplicative weight (the product of all 'score's).
newtype Meas a = Meas (WriterT (Product (Log Double)) Prob a)
  deriving (Functor, Applicative, Monad)

-- | The uniform distribution on (0, 1): the label at the root of the tree.
uniform :: Prob Double
uniform = Prob (\(Node r _ _) -> r)

-- | A standard normal draw: the Gaussian coordinate Φ⁻¹(u) of the root label
-- (the same site 'uniform' reads), kept exact by the samplers.
standardNormal :: Prob Double
standardNormal = Prob (\(Node _ z _) -> z)

-- | Regard a probability distribution as an unnormalised measure (weight 1).
sample :: Prob a -> Meas a
sample p = Meas (lift p)

-- | Multiply the weight by a likelihood @w@.  A weight that is NaN, negative
-- or zero makes the state impossible (weight zero); upstream LazyPPL replaces
-- 0 by exp(-300), we keep it exact so a sampler never starts there.
score :: Double -> Meas ()
score w
  | isNaN w || w <= 0 = zeroWeight
  | otherwise = Meas (tell (Product (Exp (log w))))

-- | Multiply the weight by a weight given in log space (@Exp l@ has weight
-- e^l).  A NaN log weight counts as weight zero.
scoreLog :: Log Double -> Meas ()
scoreLog w
  | isNaN (ln w) = zeroWeight
  | otherwise = Meas (tell (Product w))

-- | 'scoreLog' for a weight already wrapped in 'Product' (upstream name).
scoreProductLog :: Product (Log Double) -> Meas ()
scoreProductLog = scoreLog . getProduct

zeroWeight :: Meas ()
zeroWeight = Meas (tell (Product (Exp (-1 / 0))))

-- | Run a probability distribution on a given tree: deterministic.
runProb :: Prob a -> Tree -> a
runProb (Prob f) = f

-- | A tree of independent uniforms drawn from a random generator.  Only one
-- 64-bit word is taken from the generator; labels are hashes of it and of the
-- site's address, so the tree is cheap to build and fully determined by @g@.
randomTree :: RandomGen g => g -> Tree
randomTree g = seededTree (fst (genWord64 g))

-- | The tree of uniforms determined by a 64-bit seed.
seededTree :: Word64 -> Tree
seededTree seed = node rootAddress
  where
    node a = let w = combine seed a in Node (wordToUniform w) (wordToNormal w) (children a 0)
    children a i = node (childAddress a i) : children a (i + 1)

rootAddress :: Word64
rootAddress = 0x243f6a8885a308d3

childAddress :: Word64 -> Word64 -> Word64
childAddress = combine
{-# INLINE childAddress #-}

-- | A sampler state: site address (as 'Int') ↦ Gaussian coordinate z.
type Sites = IM.IntMap Double

-- | The result of running a measure on a tree given by explicit sites and a
-- fresh-value seed.
data Evaluation a = Evaluation
  { evValue :: a
    -- ^ the program's result (fully forced by 'evaluateAt')
  , evLogWeight :: !Double
    -- ^ natural log of the total weight; may be -Infinity, +Infinity or NaN
  , evSites :: !Sites
    -- ^ exactly the sites the program read, with their z values
  }

-- | A fresh standard normal value for a site: a pure function of the step's
-- fresh seed and the site address.
freshNormal :: Word64 -> Int -> Double
freshNormal seed a = wordToNormal (combine seed (fromIntegral a))
{-# INLINE freshNormal #-}

-- | Run the measure on the tree whose sites in @zs@ have the given Gaussian
-- coordinates and whose other sites are fresh (from @seed@), force the weight
-- and the whole result, and report which sites were read.
evaluateAt :: NFData a => Meas a -> Word64 -> Sites -> Evaluation a
evaluateAt m seed zs = unsafePerformIO (evaluateIO rnf m seed zs)
{-# NOINLINE evaluateAt #-}

-- | Like 'evaluateAt' but forces only the weight (for result types without
-- 'NFData'; sites read only by the result are then not part of the state,
-- which is still exact: they are refreshed from the prior at every step).
evaluateLazyAt :: Meas a -> Word64 -> Sites -> Evaluation a
evaluateLazyAt m seed zs = unsafePerformIO (evaluateIO (const ()) m seed zs)
{-# NOINLINE evaluateLazyAt #-}

evaluateIO :: (a -> ()) -> Meas a -> Word64 -> Sites -> IO (Evaluation a)
evaluateIO forceValue (Meas m) seed zs = do
  ref <- newIORef IM.empty
  let tree = instrumentedTree ref seed zs
      (x, Product w) = runProb (runWriterT m) tree
  lw <- evaluate (ln w)
  _ <- evaluate (forceValue x)
  used <- readIORef ref
  return (Evaluation x lw used)

-- | The tree whose labels record their address and z value in @ref@ when
-- (and only when) the program forces them.
instrumentedTree :: IORef Sites -> Word64 -> Sites -> Tree
instrumentedTree ref seed zs = node rootAddress
  where
    node a =
      let site = siteZ ref seed zs (fromIntegral a)
      in Node (normalCdf site) site (children a 0)
    children a i = node (childAddress a i) : children a (i + 1)

-- | A site's Gaussian coordinate, recorded (with its address) the first
-- time the program forces the site's label or coordinate.
siteZ :: IORef Sites -> Word64 -> Sites -> Int -> Double
siteZ ref seed zs a = unsafePerformIO $ do
  let z = case IM.lookup a zs of
        Just v -> v
        Nothing -> freshNormal seed a
  modifyIORef' ref (IM.insert a z)
  return z
{-# NOINLINE siteZ #-}

-- | A log weight a chain may stand on: finite (so weight positive and finite).
validLogWeight :: Double -> Bool
validLogWeight lw = not (isNaN lw || isInfinite lw)
