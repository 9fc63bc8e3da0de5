"""NUTS backends for the sandboxed child: run one, and read draws and sampler statistics.

Runs inside the child process only (imports PyMC). Every backend returns ArviZ
``InferenceData`` whose ``posterior`` holds free random variables in their constrained
space and the named Deterministics, and a split of its time into compile and sample
seconds.

Mass matrix (``job["mass_matrix"]``): ``"diag"`` is each backend's default adaptation;
``"dense"`` adapts a full matrix (PyMC ``init="jitter+adapt_full"``, NumPyro
``dense_mass=True``); ``"low_rank"`` is nutpie's ``low_rank_modified_mass_matrix``
(for other backends it means ``"dense"``). See ../../shared/PITFALLS.md: on correlated
posteriors (diamonds) the mass matrix matters more than the backend.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

BACKENDS = ("nutpie", "pymc", "numpyro", "blackjax")
MASS_MATRICES = ("diag", "dense", "low_rank")


@dataclass
class Sampled:
    idata: object          # arviz.InferenceData
    compile_seconds: float  # building logp/gradient code (PyTensor C, numba or JAX tracing)
    sample_seconds: float   # warm-up and draws (for JAX backends this includes the XLA JIT)
    # How the chains were started: "jitter" (the backend's default: the model's initial
    # point plus random jitter, retried by the backend), "pymc-jitter" (nutpie could not
    # start; pm.sample's jittered start), or "initial-point" (the model's initial point
    # itself, after every jittered start failed).
    initialisation: str = "jitter"
    backend: str | None = None  # the backend that drew, when not the job's
    # JAX backends: per chain, how many jittered starts were refused (log-density or
    # gradient not finite) before the one used (_FiniteStarts)
    start_retries: list[int] | None = None
    # nutpie with our callbacks (nutpie_wrappers): how many of the compiled model's two
    # were loaded from the compile cache
    callbacks_cached: int | None = None
    # nutpie with a draw cap (_Extendable): the draws per chain an earlier request of
    # these chains had returned (None: sampled from the start by this call), the
    # sampling seconds of these chains over all requests so far, the draws each chain
    # holds (this call's and the ones sampled ahead for a later look), and the threads
    continued_from: int | None = None
    sample_chain_seconds: float | None = None
    sampled_ahead: list[int] | None = None
    threads: int | None = None


# Messages of the backends when no starting point has a finite log-density and gradient
# (nutpie: "All initialization points failed"; PyMC: SamplingError "Initial evaluation
# of model at starting point failed!").
_INIT_FAILURE_MARKERS = ("initialization point", "initial evaluation", "starting point",
                         "initial point", "init point")


def initialisation_failed(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}".lower()
    return any(marker in text for marker in _INIT_FAILURE_MARKERS)


def _with_fallback(*starts):
    """Start as ``pm.sample`` does. ``starts`` are ``(label, (target_accept, job) ->
    Sampled)`` in order: the backend with jittered initial points (it retries several),
    then fallbacks tried only when every start of the previous one failed (an error that
    is not about the starting point is raised at once). The start that worked is kept
    for later calls (divergence retries, later looks) and recorded as
    ``Sampled.initialisation``."""
    state = {"index": 0}

    def run(accept: float, job: dict) -> Sampled:
        while True:
            label, start = starts[state["index"]]
            try:
                sampled = start(accept, job)
            except Exception as exc:  # noqa: BLE001 - re-raised unless it is the start
                if not initialisation_failed(exc) or state["index"] == len(starts) - 1:
                    raise
                state["index"] += 1
                continue
            sampled.initialisation = label
            return sampled

    return run


def sampler(model, backend: str):
    """A function ``(target_accept, job) -> Sampled`` for this model, where ``job`` gives
    chains, tune, draws, cores, seed and mass_matrix.

    nutpie compiles the model once here and every call reuses that code, so divergence
    retries and later looks of the same model pay only for sampling; the other backends
    compile inside each call (PyTensor's and JAX's own caches make repeats cheaper).
    """
    def pymc(jitter: bool):
        return lambda accept, job: _pymc(model, {**job, "target_accept": accept}, jitter=jitter)

    if backend == "nutpie":
        # nutpie's own start (jittered support point, many tries) can fail where
        # pm.sample starts (a mixture with an ordered transform); measured: nutpie fails
        # even from the unjittered initial point when the log-density is finite only
        # near it, so the fallbacks are pm.sample's own (backend then recorded "pymc").
        return _with_fallback(("jitter", _nutpie(model)),
                              ("pymc-jitter", pymc(True)), ("initial-point", pymc(False)))
    if backend == "pymc":
        return _with_fallback(("jitter", pymc(True)), ("initial-point", pymc(False)))
    if backend in ("numpyro", "blackjax"):
        starts = _FiniteStarts(model)
        return _with_fallback(
            ("jitter", lambda accept, job: _jax(model, {**job, "target_accept": accept},
                                                backend, starts=starts)),
            ("initial-point", lambda accept, job: _jax(model, {**job, "target_accept": accept},
                                                       backend, jitter=False)))
    raise ValueError(f"unknown backend {backend!r}")


def _nutpie(model):
    import nutpie

    from workers.pymc_runner import nutpie_wrappers

    ours = nutpie_wrappers.install() == "ppl-audit"
    started = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model, backend="numba")
    compile_seconds = [time.perf_counter() - started]
    cached = nutpie_wrappers.callbacks_cached(compiled) if ours else None

    # the chains of the calls with a draw cap, by _Extendable.key_of, oldest first: one
    # per attempt of a fit (target_accept, mass matrix), so a later look extends each
    # attempt it runs again
    kept: dict = {}

    def run(accept: float, job: dict) -> Sampled:
        if job.get("draw_cap") and int(job["draw_cap"]) >= int(job["draws"]):
            return extend(accept, job)
        begun = time.perf_counter()
        idata = nutpie.sample(
            compiled,
            draws=job["draws"],
            tune=job["tune"],
            chains=job["chains"],
            cores=job["cores"],
            seed=job["seed"],
            target_accept=accept,
            progress_bar=False,
            save_warmup=False,
            low_rank_modified_mass_matrix=job["mass_matrix"] == "low_rank",
        )
        # the compile time is charged to the first call only
        spent, compile_seconds[0] = compile_seconds[0], 0.0
        return Sampled(idata, spent, time.perf_counter() - begun, callbacks_cached=cached)

    def extend(accept: float, job: dict) -> Sampled:
        key = _Extendable.key_of(accept, job)
        chains = kept.pop(key, None)
        if chains is None:
            while len(kept) >= _Extendable.KEPT:
                kept.pop(next(iter(kept))).close()
            chains = _Extendable(compiled, accept, job)
        kept[key] = chains  # the most recent last
        continued_from = chains.served or None
        idata, seconds = chains.first(int(job["draws"]))
        spent, compile_seconds[0] = compile_seconds[0], 0.0
        return Sampled(idata, spent, seconds, callbacks_cached=cached,
                       continued_from=continued_from,
                       sample_chain_seconds=chains.seconds, sampled_ahead=chains.held,
                       threads=chains.chains)

    return run


class _Extendable:
    """nutpie chains that a later request extends instead of sampling again (issue 11).

    A later look refits PyMC from the same seed with more draws, and nutpie's draws do not
    depend on how many are asked for (the first N of a longer fit are a fit of N, every
    chain, parameter and sampler statistic: ``benchmarks/refit_recompute.py``). So the
    chains are started once in nutpie's background sampler with ``job["draw_cap"]``
    draws (the most a look may ask), paused as soon as every chain holds the draws
    asked, and resumed by the next request with the same settings (each attempt of a
    fit, i.e. target_accept and mass matrix, has its own chains); each request returns
    the first ``draws`` of every chain: exactly a blocking fit's draws and statistics
    (tests/integration/test_pymc_session.py checks it against a fresh child). Draws a
    chain sampled past them (it went on while a slower one caught up) are kept for the
    next look, or discarded with the child at the end of the audit.

    One thread per chain (``cores = chains``): with fewer threads nutpie runs the later
    chains only after the earlier ones end, i.e. after the cap. The chains then share the
    cores, and as nutpie pauses all chains at once, the faster ones sample on until the
    slowest holds the draws asked: CPU spent for a later look that may not come (why the
    pipeline asks for this only with ``pymc.extend_chains``; docs/ARCHITECTURE.md,
    "Continued chains"). A paused sampler uses no CPU."""

    #: Chains kept per compiled model (the attempts of one fit: target_accepts and a
    #: diagonal retry); the least recently used beyond are dropped.
    KEPT = 6

    #: How often the progress is read while sampling, at most and at least (seconds): a
    #: twentieth of the time sampled so far, so a fast model pauses within milliseconds
    #: of the draws asked and a slow one reads its growing trace rarely.
    POLL = (0.005, 0.1)

    def __init__(self, compiled, accept: float, job: dict) -> None:
        import nutpie

        self.tune = int(job["tune"])
        self.chains = int(job["chains"])  # and as many threads
        self.served = 0        # draws per chain the last request returned
        self.seconds = 0.0     # sampling seconds over all requests
        self.held = [0] * self.chains
        self._running = True
        self._sampler = nutpie.sample(
            compiled, draws=int(job["draw_cap"]), tune=self.tune, chains=self.chains,
            cores=self.chains, seed=job["seed"], target_accept=accept, progress_bar=False,
            save_warmup=False, low_rank_modified_mass_matrix=job["mass_matrix"] == "low_rank",
            blocking=False)

    @staticmethod
    def key_of(accept: float, job: dict) -> tuple:
        """What must match for a request to extend these chains: the same draws would
        come from a fresh sampling with these settings."""
        return (float(accept), int(job["seed"]), int(job["chains"]), int(job["tune"]),
                job["mass_matrix"], int(job["draw_cap"]))

    def _progress(self) -> list[int]:
        """Draws after warm-up each chain holds now. nutpie's raw trace has one record
        batch per chain, warm-up rows included (``save_warmup`` only drops them when the
        trace is converted)."""
        batches, _ = self._sampler._sampler.inspect().get_arrow_trace()
        if len(batches) != self.chains:
            raise RuntimeError(f"nutpie's trace has {len(batches)} batches for "
                               f"{self.chains} chains")
        return [max(0, b.num_rows - self.tune) for b in batches]

    def first(self, draws: int):
        """(InferenceData of the first ``draws`` of every chain, seconds this call
        sampled)."""
        begun = time.perf_counter()
        if min(self.held) < draws:
            if not self._running:
                self._sampler.resume()
                self._running = True
            while True:
                self.held = self._progress()
                if min(self.held) >= draws:
                    break
                if self._finished():  # the cap is >= draws: a chain failed
                    self._sampler.wait()  # raises the chain's error
                    raise RuntimeError("nutpie finished before every chain had "
                                       f"{draws} draws: {self.held}")
                low, high = self.POLL
                time.sleep(min(high, max(low, (time.perf_counter() - begun) / 20)))
        if self._running:
            self._sampler.pause()
            self._running = False
        seconds = time.perf_counter() - begun
        self.seconds += seconds
        idata = self._sampler.inspect().isel(draw=slice(0, draws))
        steps = np.asarray(idata.sample_stats["step_size"].values, dtype=np.float64)
        if steps.shape[:2] != (self.chains, draws) or not np.all(np.isfinite(steps)):
            raise RuntimeError("nutpie's paused trace lacks some of the draws asked")
        self.served = draws
        return idata, seconds

    def _finished(self) -> bool:
        # nutpie 0.16.8's is_finished raises TimeoutError while the chains still run
        try:
            return bool(self._sampler.is_finished)
        except TimeoutError:
            return False

    def close(self) -> None:
        self._sampler.cancel()


def _pymc(model, job: dict, jitter: bool = True) -> Sampled:
    import pymc as pm

    init = "adapt_full" if job["mass_matrix"] in ("dense", "low_rank") else "adapt_diag"
    init = f"jitter+{init}" if jitter else init
    started = time.perf_counter()
    idata = pm.sample(
        draws=job["draws"],
        tune=job["tune"],
        chains=job["chains"],
        # Chains in worker processes (forked) when cores > 1; the child is a plain
        # process, not a Celery daemon, so multiprocessing is allowed here.
        cores=job["cores"],
        target_accept=job["target_accept"],
        random_seed=job["seed"],
        init=init,
        model=model,
        progressbar=False,
        compute_convergence_checks=False,
        return_inferencedata=True,
        idata_kwargs={"log_likelihood": False},
    )
    total = time.perf_counter() - started
    sampling = float(idata.posterior.attrs.get("sampling_time", total))
    return Sampled(idata, max(total - sampling, 0.0), sampling, backend="pymc")


class _FiniteStarts:
    """Jittered starting points whose log-density *and gradient* are finite, for the JAX
    backends.

    ``sample_jax_nuts`` jitters the initial point and retries only where the
    log-density is not finite; a start with a NaN gradient is kept, and NumPyro's chain
    then diverges on every transition, its step size adapted to 0. Measured on
    hmm_drive_1 (2026-12-02): 83 of 200 jittered starts had a finite log-density and a
    NaN gradient (the forward filter's rescaled products underflow), and 3 of 4 chains of
    a corpus audit never moved. nutpie checks both, so this does what nutpie does.

    Per chain the seeds are PyMC's own (``sample_jax_nuts``'s derivation and retry
    sequence), so where PyMC's first start is good it is the start used. The points go
    to ``sample_jax_nuts`` as ``initvals`` (constrained values) with ``jitter=False``.
    The value-and-gradient function is compiled (JAX) once per model, on first use
    (measured: 0.1 s eight schools, 2.1 s hmm_drive_1 for four starts).
    """

    TRIES = 100

    def __init__(self, model) -> None:
        self.model = model
        self._check = None
        self._constrain = None

    def _compile(self) -> None:
        import jax
        import pytensor
        from pymc.sampling.jax import get_jaxified_logp
        from pytensor.compile.mode import Mode

        model = self.model
        self._check = jax.jit(jax.value_and_grad(get_jaxified_logp(model,
                                                                   negative_logp=False)))
        constrained = model.replace_rvs_by_values(list(model.free_RVs))
        # the Python linker: nothing is compiled to C for this one-off map
        self._constrain = pytensor.function(
            model.value_vars, constrained, mode=Mode(linker="py", optimizer="fast_compile"),
            on_unused_input="ignore")

    def _finite(self, point: dict) -> bool:
        values = [np.asarray(point[v.name]) for v in self.model.value_vars]
        value, gradient = self._check(values)
        return bool(np.isfinite(value)) and all(bool(np.all(np.isfinite(np.asarray(g))))
                                                for g in gradient)

    def initvals(self, chains: int, seed: int) -> tuple[list[dict], list[int]]:
        """Per chain: the start (constrained values by variable name) and how many
        jittered starts were refused before it."""
        from pymc.initial_point import make_initial_point_fns_per_chain
        from pymc.util import _get_seeds_per_chain

        if self._check is None:
            self._compile()
        model = self.model
        (seed,) = _get_seeds_per_chain(seed, 1)
        fns = make_initial_point_fns_per_chain(model=model, overrides=None,
                                               jitter_rvs=set(model.free_RVs), chains=chains)
        out, retries = [], []
        for fn, chain_seed in zip(fns, _get_seeds_per_chain(seed, chains)):
            rng = np.random.default_rng(chain_seed)
            first = point = fn(chain_seed)
            for tried in range(self.TRIES):
                if self._finite(point):
                    break
                chain_seed = rng.integers(2**30, dtype=np.int64)
                point = fn(chain_seed)
            else:
                point = first  # none found: PyMC's own start (the sampler reports it)
            retries.append(tried)
            values = self._constrain(*[point[v.name] for v in model.value_vars])
            out.append({rv.name: np.asarray(v) for rv, v in zip(model.free_RVs, values)})
        return out, retries


def _jax(model, job: dict, backend: str, jitter: bool = True,
         starts: _FiniteStarts | None = None) -> Sampled:
    from pymc.sampling.jax import sample_jax_nuts

    nuts_kwargs = {"dense_mass": True} if job["mass_matrix"] in ("dense", "low_rank") else {}
    started = time.perf_counter()
    initvals = retries = None
    if jitter and starts is not None and model.free_RVs:
        (initvals, retries), jitter = starts.initvals(job["chains"], job["seed"]), False
    idata = sample_jax_nuts(
        draws=job["draws"],
        tune=job["tune"],
        chains=job["chains"],
        target_accept=job["target_accept"],
        random_seed=job["seed"],
        initvals=initvals,
        model=model,
        nuts_sampler=backend,
        nuts_kwargs=nuts_kwargs or None,
        # one XLA host device per chain (XLA_FLAGS set by the child before importing jax)
        chain_method="parallel",
        jitter=jitter,
        progressbar=False,
        compute_convergence_checks=False,
        idata_kwargs={"log_likelihood": False},
    )
    total = time.perf_counter() - started
    sampling = float(idata.posterior.attrs.get("sampling_time", total))
    _release_jax()
    return Sampled(idata, max(total - sampling, 0.0), sampling, start_retries=retries)


def _release_jax() -> None:
    """Drop JAX's in-memory compiled code after a sampling. Every ``sample_jax_nuts``
    call traces new functions, and their executables stayed in memory: measured on the
    6-group hierarchical model, 4 x 1,000, one session, +70-100 MB resident and virtual
    per fit (927 MB -> 1,617 MB over 12 fits), so a calibration session ran into its
    4 GB address-space limit. The persistent compile cache (runner.child_environment)
    makes the next sampling's compile a disk read anyway."""
    import gc

    import jax

    jax.clear_caches()
    gc.collect()


def reportable_names(model) -> list[str]:
    """Free random variables, then named Deterministics, in model order."""
    return [rv.name for rv in model.free_RVs] + [d.name for d in model.deterministics]


def posterior_arrays(idata, names: list[str]) -> dict[str, np.ndarray]:
    """name -> float64 array (chains, draws, *shape) from the posterior group."""
    out = {}
    for name in names:
        values = np.asarray(idata.posterior[name].values, dtype=np.float64)
        out[name] = np.ascontiguousarray(values)
    return out


# Sampler statistics under the names each backend uses -> our name.
_STAT_NAMES = {
    "step_size": ("step_size",),
    "tree_depth": ("tree_depth", "depth"),
    "n_steps": ("n_steps",),
    "acceptance": ("acceptance_rate", "mean_tree_accept"),
    "max_tree_depth_hits": ("reached_max_treedepth", "maxdepth_reached"),
}


def sampler_stats(idata) -> dict:
    """Divergences and per-chain summaries (lists indexed by chain) of the kept draws."""
    stats = idata.sample_stats
    diverging = np.asarray(stats["diverging"].values, dtype=bool)
    summary: dict = {
        "divergences": int(diverging.sum()),
        "divergences_per_chain": [int(x) for x in diverging.sum(axis=1)],
    }
    for ours, theirs in _STAT_NAMES.items():
        for name in theirs:
            if name in stats:
                values = np.asarray(stats[name].values, dtype=np.float64)
                reduce = np.sum if ours == "max_tree_depth_hits" else np.mean
                summary[ours] = [round(float(reduce(c)), 6) for c in values]
                break
    energy_name = "energy" if "energy" in stats else None
    if energy_name:
        energy = np.asarray(stats[energy_name].values, dtype=np.float64)
        # E-BFMI per chain (Betancourt 2016): mean squared energy change / energy variance
        summary["e_bfmi"] = [
            round(float(np.mean(np.diff(e) ** 2) / np.var(e)), 6) if np.var(e) > 0 else None
            for e in energy
        ]
    return summary
