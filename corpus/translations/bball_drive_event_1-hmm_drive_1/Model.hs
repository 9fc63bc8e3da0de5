-- posteriordb bball_drive_event_1-hmm_drive_1: two-state HMM, normal emissions.
-- Stan: theta1, theta2 (rows of the transition matrix, theta[j][k] = P(j -> k)) have
-- target += dirichlet_lpdf(theta[k] | alpha[k, :]); phi and lambda are ordered[2]
-- with target += normal_lpdf(phi[1] | 0, 1) + normal_lpdf(phi[2] | 3, 1), the same for
-- lambda; given state k, u[t] ~ normal(phi[k], tau) and v[t] ~ normal(lambda[k], rho)
-- (tau, rho from the data). The hidden states are marginalised by Stan's forward
-- algorithm, written the same way (log-space, log-sum-exp per state).
-- ordered: the normal draws are restricted to x[1] < x[2] (weight zero otherwise),
-- which is Stan's density on that region up to a constant.
-- The forward recursion is specialised to K = 2 with a strict pair of log-alphas (one
-- fold over the 416 rows, no intermediate lists): the same density as the list version.
module Model (model) where

import Data.List (foldl')
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  theta1 <- sample (dirichlet (alphas !! 0))
  theta2 <- sample (dirichlet (alphas !! 1))
  phi1 <- sample (normal 0 1)
  phi2 <- sample (normal 3 1)
  lam1 <- sample (normal 0 1)
  lam2 <- sample (normal 3 1)
  let phis = [phi1, phi2]
      lams = [lam1, lam2]
      -- log theta[j][k] = P(j -> k), from state j into state k
      (l11, l12) = logRow theta1
      (l21, l22) = logRow theta2
      emit p l (u, v) = normalLogPdf p tau u + normalLogPdf l rho v
      forward (g1, g2) uv =
        let n1 = lse2 (g1 + l11) (g2 + l21) + emit phi1 lam1 uv
            n2 = lse2 (g1 + l12) (g2 + l22) + emit phi2 lam2 uv
        in n1 `seq` n2 `seq` (n1, n2)
      start = let uv = head uvs in (emit phi1 lam1 uv, emit phi2 lam2 uv)
      (h1, h2) = foldl' forward start (tail uvs)
      valid = phi1 < phi2 && lam1 < lam2
      loglik = if valid then lse2 h1 h2 else -1 / 0
  scoreLog (Exp loglik)
  return (draw [ vector "theta1" theta1, vector "theta2" theta2
               , vector "phi" phis, vector "lambda" lams ])
  where
    uvs = zip (reals "u" d) (reals "v" d)
    alphas = realMatrix "alpha" d
    tau = real "tau" d
    rho = real "rho" d
    logRow row = case map log row of
      [a, b] -> (a, b)
      _ -> (0 / 0, 0 / 0)  -- K = 2 in this posterior's data

-- | log (e^a + e^b), as logSumExp [a, b].
lse2 :: Double -> Double -> Double
lse2 a b = logSumExp [a, b]
