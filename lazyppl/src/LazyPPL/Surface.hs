{-# LANGUAGE Trustworthy #-}
-- | What a user's model sees as the module "LazyPPL" (SPEC §2.2; issue 9, F4).
--
-- ppl-audit compiles the untrusted @Model.hs@ with this module exposed under the
-- name @LazyPPL@ (GHC module thinning with renaming:
-- @-package "lazyppl (LazyPPL.Surface as LazyPPL, ...)"@), while the trusted
-- harness imports the full "LazyPPL".  A model may build a measure; it may not run
-- inference itself: no sampler entry points ('LazyPPL.runChain',
-- 'LazyPPL.sampleChains', @mh*@, @wis*@, 'LazyPPL.weightedsamples', settings),
-- no way to run a 'Prob' on a tree ('LazyPPL.runProb', 'LazyPPL.randomTree'), and
-- 'Tree', 'Prob' and 'Meas' are abstract, so a model cannot read its own weight
-- or resample an inner chain and hand the harness a measure without its score.
-- The types' Functor, Applicative and Monad instances come with them.
module LazyPPL.Surface
  ( -- * Types (abstract)
    Tree
  , Prob
  , Meas
    -- * Building blocks
  , uniform
  , sample
  , score
  , scoreLog
  , scoreProductLog
  , every
    -- * Log-domain numbers (re-exported from "Numeric.Log")
  , Log (..)
  ) where

import LazyPPL
