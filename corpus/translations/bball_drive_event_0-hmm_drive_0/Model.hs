-- posteriordb bball_drive_event_0-hmm_drive_0: two-state HMM, exponential emissions.
-- Stan: theta1, theta2 (rows of the transition matrix, theta[j][k] = P(j -> k)) have
-- target += dirichlet_lpdf(theta[k] | alpha[k, :]); phi and lambda are positive_ordered[2]
-- with target += normal_lpdf(phi[1] | 0, 1) + normal_lpdf(phi[2] | 3, 1), the same for
-- lambda; given state k, u[t] ~ exponential(phi[k]) and v[t] ~ exponential(lambda[k])
-- (rates). The hidden states are marginalised by Stan's forward algorithm, written the
-- same way (log-space, log-sum-exp per state).
-- positive_ordered: the normal draws are restricted to 0 < x[1] < x[2] (weight zero
-- otherwise), which is Stan's density on that region up to a constant.
module Model (model) where

import Data.List (foldl', transpose)
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
      emission (u, v) = [ exponentialLogPdf p u + exponentialLogPdf l v
                        | (p, l) <- zip phis lams ]
      -- logTransT !! k !! j = log theta[j][k]: transitions into state k
      logTransT = transpose [map log theta1, map log theta2]
      forward gammaPrev uv =
        let e = emission uv
        in force [logSumExp (zipWith (+) gammaPrev lt) + ek | (lt, ek) <- zip logTransT e]
      gammaN = foldl' forward (emission (head uvs)) (tail uvs)
      valid = 0 < phi1 && phi1 < phi2 && 0 < lam1 && lam1 < lam2
      loglik = if valid then logSumExp gammaN else -1 / 0
  scoreLog (Exp loglik)
  return (draw [ vector "theta1" theta1, vector "theta2" theta2
               , vector "phi" phis, vector "lambda" lams ])
  where
    uvs = zip (reals "u" d) (reals "v" d)
    alphas = realMatrix "alpha" d
    force xs = foldr seq xs xs
