"""Which NUTS backend and mass matrix fit a PyMC model: the rule measured by
``benchmarks/backend_choice.py`` (figures there and in docs/ARCHITECTURE.md, "NUTS
backend choice").

``model_size`` reads a built ``pm.Model`` (it runs in the sandboxed child, after the
program built its model, and compiles nothing); ``choose`` is pure. The child records
``choose(...)``'s result in the evidence (``sampler.backend_choice``).
"""
from __future__ import annotations

import math
import statistics

#: What ``choose`` may return as the backend when ``requested == "auto"``.
AUTO = "auto"


def _static_size(variable) -> int | None:
    """Number of elements of a tensor variable when its shape is known without running
    anything (static type shape, or a shape graph that folds to constants)."""
    shape = getattr(variable.type, "shape", None)
    if shape is not None and all(s is not None for s in shape):
        return math.prod(shape)
    import pytensor
    from pytensor.compile.mode import Mode

    # The Python linker: no C or numba code is generated for a shape evaluation.
    try:
        fn = pytensor.function([], variable.shape, mode=Mode(linker="py", optimizer="fast_run"),
                               on_unused_input="ignore", accept_inplace=True)
        return math.prod(int(s) for s in fn())
    except Exception:  # noqa: BLE001 - a shape that needs inputs: size unknown
        return None


def _free_size(model, rv) -> int | None:
    """Unconstrained dimensions of a free random variable: its value variable's size,
    read from the (transformed) variable's shape when the value's shape is not static
    (``dims`` from coords, shapes from ``pm.Data``)."""
    value = model.rvs_to_values[rv]
    shape = value.type.shape
    if all(s is not None for s in shape):
        return math.prod(shape)
    transform = model.rvs_to_transforms.get(rv)
    try:
        unconstrained = transform.forward(rv, *rv.owner.inputs) if transform else rv
    except Exception:  # noqa: BLE001 - a transform we cannot apply: size unknown
        return None
    return _static_size(unconstrained)


def _data_size(value) -> int | None:
    data = getattr(value, "data", None)  # TensorConstant
    if data is None and hasattr(value, "get_value"):  # shared variable
        data = value.get_value(borrow=True)
    if data is not None:
        return int(getattr(data, "size", 1))
    return _static_size(value)


def model_size(model) -> dict:
    """Size of a built model, in scalars and graph nodes.

    ``free_scalars``: unconstrained dimensions NUTS moves in (elements of the value
    variables of the free random variables); ``observed_scalars``: elements of the
    observed data; ``logp_nodes``: apply nodes of the model's (unrewritten) joint
    log-density graph, a proxy for the cost of one gradient (recorded, not used by
    ``choose``). A size that cannot be known counts as ``None``.
    """
    from pytensor.graph.traversal import applys_between

    free = [_free_size(model, rv) for rv in model.free_RVs]
    observed = [_data_size(model.rvs_to_values[rv]) for rv in model.observed_RVs]
    try:
        nodes = sum(1 for _ in applys_between(model.value_vars, [model.logp()]))
    except Exception:  # noqa: BLE001 - the sampler will report the real error
        nodes = None
    return {
        "free_scalars": None if None in free else int(sum(free)),
        "observed_scalars": None if None in observed else int(sum(observed)),
        "logp_nodes": nodes,
    }


# A model is "large" when one log-density gradient is expensive: many observed scalars
# times many parameters (a regression's design matrix). Measured (benchmarks/
# backend_choice.py): up to 5,000 (low_dim_gauss_mix: 5 x 1,000) NumPyro was the
# fastest end to end or within 1.5 s of it and never failed; accel_gp (66 x 133 = 8,778)
# was slow on every backend (latent GP geometry) and NumPyro had the best ESS/s among
# the dense/low-rank fits; at 130,000 (diamonds: 26 x 5,000) sampling dominated and
# nutpie (numba) sampled 1.8x faster than nutpie's JAX backend and 2.6x faster than
# NumPyro (whose XLA compile recurs on every sampling). The threshold lies between
# 8,778 and 130,000; nothing was measured there.
LARGE_WORK = 50_000  # observed_scalars x free_scalars

#: Mass matrix per backend when the request leaves it to us: nutpie's low-rank
#: modified matrix; a dense one for the others (the runner's ``"low_rank"`` default).
DEFAULT_MASS = {"nutpie": "low_rank", "pymc": "dense", "numpyro": "dense",
                "blackjax": "dense"}


def is_large(size: dict) -> bool:
    """True when ``observed_scalars x free_scalars`` reaches ``LARGE_WORK``; a model
    whose size is unknown counts as small (NumPyro, which fitted every posterior
    measured)."""
    free, observed = size.get("free_scalars"), size.get("observed_scalars")
    if free is None or observed is None:
        return False
    return free * observed >= LARGE_WORK


def choose(size: dict, requested: str = AUTO, mass_matrix: str = AUTO, *,
           cached: bool = False) -> dict:
    """The NUTS backend and mass matrix for a model of this ``size`` (``model_size``).

    ``requested`` other than ``"auto"`` is honoured as is (and so is ``mass_matrix``
    other than ``"auto"``). For ``"auto"``, measured in a warm process (one that had
    already fitted a tiny model):

    - ``cached`` (the program's compiled code is in the shared compile cache: one of our
      own programs that the trusted warm-up compiled): nutpie, whose numba compile then
      takes 1.2-4 s and sampling is the fastest;
    - a small model, compiled for the first time: NumPyro, whose PyTensor-to-JAX
      translation takes 0.5-3 s (XLA compiles inside sampling) where nutpie's numba code
      generation took 3.6-19 s, which dominated end to end;
    - a large model (``is_large``): nutpie, the fastest sampler once compiled, which an
      audit that samples several times from one compile pays for once.

    The mass matrix is nutpie's low-rank one, or dense for the other backends.
    Returns ``{"backend", "mass_matrix", "reason"}``.
    """
    if requested != AUTO:
        backend = requested
        reason = f"backend {requested!r} requested"
    elif cached:
        backend = "nutpie"
        reason = ("program compiled before (shared cache): nutpie's cached compile and "
                  "sampling were the fastest end to end")
    elif is_large(size):
        backend = "nutpie"
        reason = (f"large model ({_describe(size)}): sampling dominates; nutpie (numba) "
                  "samples fastest once compiled")
    else:
        backend = "numpyro"
        reason = (f"small model ({_describe(size)}): compiling dominates; NumPyro was "
                  "the fastest or within 1.5 s of it end to end in a warm process")
    mass = DEFAULT_MASS.get(backend, "dense") if mass_matrix == AUTO else mass_matrix
    return {"backend": backend, "mass_matrix": mass, "reason": reason}


def _describe(size: dict) -> str:
    free, observed = size.get("free_scalars"), size.get("observed_scalars")
    work = free * observed if free is not None and observed is not None else None
    return f"{free} free x {observed} observed scalars = {work}; large from {LARGE_WORK:,}"


#: Backends ``choose`` may pick whose fits are refitted when they fail: a chain's step
#: size collapsed (measured on hmm_drive_1 before the finite-start fix: NumPyro adapted 3
#: of 4 chains' step sizes to 0), or divergences remained after every target_accept
#: (measured in the calibration study: 3 of 40 audits of the 6-group hierarchical model
#: with NumPyro, 0 of 100 with nutpie's low-rank mass matrix).
FALLS_BACK = ("numpyro", "blackjax")

#: A chain whose mean step size is at most this has stopped moving.
COLLAPSED_STEP = 1e-8


def collapsed_chains(stats: dict, draws: int) -> list[int]:
    """Chains (indices) of one fit whose NUTS step size collapsed: every kept transition
    diverged, or the adapted step size is (numerically) zero. ``stats`` is
    ``backends.sampler_stats``; such a chain never leaves its starting point."""
    divergent = stats.get("divergences_per_chain") or []
    steps = stats.get("step_size") or [None] * len(divergent)
    return [chain for chain, (d, h) in enumerate(zip(divergent, steps))
            if (draws > 0 and d >= draws) or (h is not None and h <= COLLAPSED_STEP)]


NUTPIE = {"backend": "nutpie", "mass_matrix": DEFAULT_MASS["nutpie"]}


def _automatic(choice: dict | None) -> bool:
    """An automatic choice that may be replaced (``FALLS_BACK``); a requested backend
    (``choice`` ``None``) or nutpie never is."""
    return choice is not None and choice.get("backend") in FALLS_BACK


def _dense(choice: dict) -> bool:
    return choice.get("mass_matrix") in ("dense", "low_rank")


def next_sampler(choice: dict) -> dict:
    """What an automatic JAX choice that still diverged after every target_accept is
    refitted with: a dense mass matrix gives way to a diagonal one on the same backend
    (no new compile: the mass matrix is a sampling option), a diagonal one to nutpie.

    Measured on gp_pois_regr (visible scope, the audit's seed, 4 x 3,967): NumPyro
    dense kept 6/3/1 divergences at 0.9/0.95/0.99 and nutpie low-rank 37/11/1, where
    NumPyro with a diagonal mass matrix had none at 0.95 (also none at 1,000 draws).
    """
    if _dense(choice):
        return {"backend": choice["backend"], "mass_matrix": "diag"}
    return dict(NUTPIE)


def _fallback(choice: dict, to: dict, reason: str, collapsed: list[int] = (),
              **extra) -> dict:
    """The evidence record of a fallback from ``choice`` to ``to``."""
    return {"from": choice["backend"], "from_mass_matrix": choice.get("mass_matrix"),
            "to": to["backend"], "mass_matrix": to["mass_matrix"],
            "collapsed_chains": list(collapsed), **extra, "reason": reason}


def accept_schedule(target_accept: float, retry_target_accepts) -> list[float]:
    """The ``target_accept`` values a fit tries in turn: the first, then each retry above
    it (a retry at or below it is dropped)."""
    return [float(target_accept)] + [float(t) for t in retry_target_accepts
                                     if t > target_accept]


def after_attempt(stats: dict, draws: int, position: int, accepts: int,
                  choice: dict | None, requested: dict | None = None
                  ) -> tuple[int | None, dict | None]:
    """The child's next step after an attempt at ``target_accepts[position]`` (of
    ``accepts``): ``(next position or None when the fit is done, fallback or None)``.

    Divergences move to the next target_accept. An automatic choice among
    ``FALLS_BACK`` (``choice`` is the attempt's ``backend_choice``; ``None`` when the
    backend was requested, which is never replaced) falls back to nutpie when a chain
    collapsed (the same target_accept again), and to ``next_sampler`` when the last
    target_accept still diverged (from the first one again); a divergence retry of a
    dense fit that left a chain stalled (``stalled_chains``) uses a diagonal matrix.
    Any other fit with a dense or low-rank mass matrix that still diverged at the last
    target_accept (a requested backend: ``requested`` is the attempt's ``{"backend",
    "mass_matrix"}``, used only when ``choice`` is ``None``; or nutpie after a fallback)
    tries that target_accept once more with a diagonal matrix on the same backend
    (``diagonal_retry``).
    ``fallback`` is what the evidence records: ``{"from", "from_mass_matrix", "to",
    "mass_matrix", "collapsed_chains", "reason"}`` (and ``"stalled_chains"``,
    ``"later_fits_only"`` after a stall).
    """
    auto = _automatic(choice)
    collapsed = collapsed_chains(stats, draws)
    if auto and collapsed:
        return position, _fallback(choice, NUTPIE, "step size collapsed: every transition "
                                   "of these chains diverged, so they never moved", collapsed)
    if stats["divergences"] == 0:
        return None, None
    if position + 1 < accepts:
        # a retry is due anyway: a stalled dense fit retries with a diagonal matrix
        return position + 1, _stalled_fallback(stats, choice, later_fits_only=False)
    if auto:
        return 0, _fallback(choice, next_sampler(choice), f"{stats['divergences']} divergent "
                            "transitions after every target_accept")
    retry = diagonal_retry(stats, choice if choice is not None else requested)
    return (position, retry) if retry is not None else (None, None)


def diagonal_retry(stats: dict, sampler: dict | None) -> dict | None:
    """The fallback record of a fit with a dense or low-rank mass matrix (``sampler``:
    ``{"backend", "mass_matrix"}``) that still diverged at the last target_accept: the
    same backend with a diagonal matrix (a sampling option: nothing is recompiled), at
    that target_accept. ``None`` for a diagonal fit (nothing left to try).

    Measured on gp_pois_regr (full scope, nutpie, 1,000 draws, the pymc seeds of 14
    calibration audits): the low-rank matrix diverged at 0.9 in 14/14 seeds, at 0.95 in
    12/14, and at 0.99 in 1 (the audit of seed 20261213, 1 divergence, which then ended
    inconclusive); a diagonal matrix had none at 0.95 on that seed.
    """
    if sampler is None or sampler.get("mass_matrix") not in ("dense", "low_rank"):
        return None
    return _fallback(sampler, {"backend": sampler.get("backend"), "mass_matrix": "diag"},
                     f"{stats['divergences']} divergent transitions after every target_accept "
                     f"with a {sampler['mass_matrix']} mass matrix: the last target_accept "
                     "again with a diagonal one")


#: A chain whose adapted step size is below the median of the others' by this factor has
#: stalled: it moves, but at many leapfrog steps per draw. Measured on hmm_drive_1's
#: visible scope (NumPyro, dense mass matrix, the audit's seed, reproducible): one chain
#: at step 0.0043 against 0.21-0.35, 440 leapfrog steps per draw against 11-15, sampling
#: 195 s where a diagonal mass matrix took 101 s with no chain stalled.
STALLED_STEP_RATIO = 20.0


def stalled_chains(stats: dict) -> list[int]:
    """Chains (indices) whose mean step size is below the median of the other chains'
    by ``STALLED_STEP_RATIO`` (a collapsed chain, ``collapsed_chains``, is one too)."""
    steps = stats.get("step_size") or []
    out = []
    for chain, h in enumerate(steps):
        others = [x for i, x in enumerate(steps) if i != chain and x is not None]
        if h is not None and others and h * STALLED_STEP_RATIO < statistics.median(others):
            out.append(chain)
    return out


def _stalled_fallback(stats: dict, choice: dict | None, *, later_fits_only: bool) -> dict | None:
    """A diagonal mass matrix for an automatic JAX choice with a dense one that left a
    chain stalled (``stalled_chains``), or ``None``."""
    if not _automatic(choice) or not _dense(choice):
        return None
    stalled = stalled_chains(stats)
    if not stalled:
        return None
    steps = stats.get("step_size") or []
    reason = ("chains " + ", ".join(f"{c} (step {steps[c]:.3g})" for c in stalled)
              + f" adapted a step size over {STALLED_STEP_RATIO:g}x below the others': "
                "a diagonal mass matrix from here on")
    return _fallback(choice, {"backend": choice["backend"], "mass_matrix": "diag"}, reason,
                     stalled_chains=stalled, later_fits_only=later_fits_only)


def for_later_fits(stats: dict, choice: dict | None) -> dict | None:
    """After a fit that is done (its last attempt's ``stats``): a fallback for the later
    fits of the same program (later looks), not a refit now, when an automatic JAX choice
    with a dense mass matrix left a chain stalled (``stalled_chains``). The fit itself
    stands: a stalled chain still samples the posterior, only slowly; the next fit uses
    a diagonal mass matrix. (A fit that diverged retries with it at once:
    ``after_attempt``.) ``None`` otherwise."""
    return _stalled_fallback(stats, choice, later_fits_only=True)


def most_attempts(accepts: int) -> int:
    """A bound on the attempts of one request (``after_attempt``'s order): every
    target_accept with the chosen mass matrix, again with a diagonal one, again with
    nutpie, and nutpie's last once more with a diagonal one (``diagonal_retry``); a
    collapse repeats one position (it skips to nutpie at the same position)."""
    return 3 * accepts + 2
