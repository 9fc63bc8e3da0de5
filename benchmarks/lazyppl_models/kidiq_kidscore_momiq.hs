module Model (model) where

-- Fallback benchmark model for posteriordb kidiq-kidscore_momiq; the benchmark uses
-- corpus/translations/<posterior>/Model.hs when that exists.
-- Stan: kid_score ~ normal(beta[1] + beta[2] * mom_iq, sigma); sigma ~ cauchy(0, 2.5)
-- on sigma > 0. Stan's beta has an improper flat prior; here it is a wide proper
-- normal(0, 100) (posterior sd of beta[1] is about 6, of beta[2] about 0.06, so the
-- prior's effect on the posterior is negligible).

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  let kidScore = reals "kid_score" d
      momIq = reals "mom_iq" d
  beta1 <- sample (normal 0 100)
  beta2 <- sample (normal 0 100)
  sigma <- sample (halfCauchy 2.5)
  scoreLog (Exp (sum [normalLogPdf (beta1 + beta2 * iq) sigma k | (k, iq) <- zip kidScore momIq]))
  return (draw [vector "beta" [beta1, beta2], scalar "sigma" sigma])
