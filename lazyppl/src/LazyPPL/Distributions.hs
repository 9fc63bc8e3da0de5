{-# LANGUAGE Trustworthy #-}
-- | Distributions for "LazyPPL": samplers of type @'Prob' a@ built from the
-- tree's uniforms, and densities for scoring.
--
-- Conventions (as upstream LazyPPL 1.0.1): parameters come first and the
-- point last (@normalLogPdf mean sd x@); @…Pdf@/@…Pmf@ return densities,
-- @…LogPdf@/@…LogPmf@ natural logs of them.  Outside the support a log-density
-- is −∞ (upstream returns −1e300) and a density is 0; with invalid parameters
-- (e.g. a non-positive scale) both are NaN, which 'LazyPPL.score' and
-- 'LazyPPL.scoreLog' treat as weight zero.
--
-- Every continuous sampler here transforms exactly one uniform by the
-- distribution's quantile function (except 'dirichlet', one per component),
-- so the samplers' Gaussian-space moves see a smooth, monotone change of
-- variables.
module LazyPPL.Distributions
  ( -- * Continuous distributions
    normal, normalPdf, normalLogPdf, normalCdf
  , exponential, expPdf, exponentialLogPdf
  , gamma, gammaLogPdf
  , invGamma, invGammaLogPdf
  , beta, betaLogPdf
  , dirichlet, dirichletLogPdf
  , uniformbounded, uniformBoundedLogPdf
  , logNormal, logNormalLogPdf
  , cauchy, cauchyLogPdf
  , halfCauchy, halfCauchyLogPdf
  , halfNormal, halfNormalLogPdf
  , studentT, studentTLogPdf
  , logistic, logisticLogPdf
    -- * Discrete distributions
  , bernoulli, bernoulliLogPmf, bernoulliLogitLogPmf
  , uniformdiscrete
  , categorical, categoricalLogPmf
  , poisson, poissonPdf, poissonLogPmf
  , binomial, binomialLogPmf, binomialLogitLogPmf
  , negBinomialLogPmf, negBinomial2LogPmf
    -- * Streams
  , iid
    -- * Numerical helpers
  , logSumExp, invLogit, logit, log1pExp
  ) where

import LazyPPL.Distributions.Continuous
import LazyPPL.Distributions.Discrete
import LazyPPL.Distributions.Special
