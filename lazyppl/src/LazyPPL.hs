{-# LANGUAGE Trustworthy #-}
-- | ppl-audit's LazyPPL: the public interface of LazyPPL 1.0.1 (Staton et al.,
-- "Affine monads and lazy structures for Bayesian programming", POPL 2023),
-- re-implemented, plus seeded multi-chain samplers.
--
-- A program is a value of type @'Meas' a@: it draws from probability
-- distributions with 'sample' and multiplies in likelihoods with 'score' or
-- 'scoreLog'.  Randomness comes from a lazy, infinite rose 'Tree' of uniforms;
-- a sampler moves the state of the sites the program reads.
--
-- Differences from upstream, all deliberate: inference functions that take a
-- generator are pure and reproducible ('mhWith', …); 'score' of 0, NaN or a
-- negative number is weight zero (upstream turns 0 into exp(-300)); chains
-- start at a state of finite positive weight; no chain keeps its tree history.
module LazyPPL
  ( -- * Source of randomness
    Tree (..)
  , randomTree
    -- * Monads
  , Prob (..)
  , Meas (..)
    -- * Building blocks
  , uniform
  , sample
  , score
  , scoreLog
  , scoreProductLog
  , runProb
    -- * Log-domain numbers (re-exported from "Numeric.Log")
  , Log (..)
    -- * Upstream inference (global generator, upstream types)
  , mh
  , mhirreducible
  , weightedsamples
  , wis
  , every
    -- * Seeded upstream inference (pure)
  , mhWith
  , mhirreducibleWith
  , weightedsamplesWith
  , wisWith
    -- * Seeded multi-chain samplers (the project's)
  , KernelChoice (..)
  , SamplerSettings (..)
  , defaultSettings
  , ChainResult (..)
  , NoValidStart (..)
  , sampleChains
  , runChain
    -- * Continuing chains (a later look's draws, docs/ARCHITECTURE.md)
  , Checkpoint
  , BadCheckpoint (..)
  , continueChain
  , sampleChainsFrom
  ) where

import Numeric.Log (Log (..))

import LazyPPL.Internal.Chain
import LazyPPL.Internal.Core
import LazyPPL.Internal.Upstream
