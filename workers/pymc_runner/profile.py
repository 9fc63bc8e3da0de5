"""The PyMC profiles of SPEC §2.1 as data: what a program may name, nothing else.

Everything is an allow-list. A program may use

* from each allowed module path (``pm``, ``pm.math``, ``np``, ``pt``...) only the members
  listed in ``Profile.modules`` (a sub-module is reachable when its path is a key);
* on any *value* (what an allowed call returned, a literal, the data) only the attribute
  names in ``Profile.value_attributes``: the verifier cannot know a value's type, so the
  table is the union over the types a model legitimately holds (tensors, arrays,
  containers, distribution classes, the model), and every name in it was checked to be
  harmless on every such type (no ``eval``, ``owner``, ``fn``, ``config``, ``to_csv``...);
* of Python's builtins only ``Profile.builtins`` (no ``getattr``, ``eval``, ``open``...).

The verifier (``verifier.py``) and the sandboxed child (``child.py``) both read these
tables. A later profile extends one by adding names (``STRICT.extended(...)``); the
forgery rules are flags on the profile. Names here are as a program spells them
(``pt`` for ``pytensor.tensor``). ``python -m workers.pymc_runner.profile`` lists
allow-listed names missing from the installed libraries (tests fail on any).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# -- PyMC ------------------------------------------------------------------------------
# Every distribution of pymc.distributions except those that let a program write its own
# density (CustomDist, DensityDist), likelihood-free Simulator, and the abstract bases.
PYMC_DISTRIBUTIONS = _names("""
    AR AsymmetricLaplace Bernoulli Beta BetaBinomial Binomial CAR Categorical Cauchy
    Censored ChiSquared DiracDelta Dirichlet DirichletMultinomial DiscreteUniform
    DiscreteWeibull EulerMaruyama ExGaussian Exponential Flat GARCH11 Gamma
    GaussianRandomWalk Geometric Gumbel HalfCauchy HalfFlat HalfNormal HalfStudentT
    HurdleGamma HurdleLogNormal HurdleNegativeBinomial HurdlePoisson HyperGeometric ICAR
    Interpolated InverseGamma KroneckerNormal Kumaraswamy LKJCholeskyCov LKJCorr Laplace
    LogNormal Logistic LogitNormal Lognormal MatrixNormal Mixture Moyal Multinomial
    MvGaussianRandomWalk MvNormal MvStudentT MvStudentTRandomWalk NegativeBinomial Normal
    NormalMixture OrderedLogistic OrderedMultinomial OrderedProbit Pareto Poisson
    PolyaGamma RandomWalk Rice SkewNormal SkewStudentT StickBreakingWeights StudentT
    Triangular Truncated TruncatedNormal Uniform VonMises Wald Weibull Wishart
    WishartBartlett ZeroInflatedBinomial ZeroInflatedNegativeBinomial ZeroInflatedPoisson
    ZeroSumNormal""")
PYMC_MODEL = _names("Model Data Deterministic")
PYMC_FUNCTIONS = _names("""
    logit invlogit probit invprobit logsumexp logaddexp expand_packed_triangular floatX
    intX""")
PYMC_MATH = _names("""
    abs and_ arccos arccosh arcsin arcsinh arctan arctanh as_tensor batched_diag
    block_diagonal broadcast_to cartesian ceil clip concatenate constant cos cosh cumprod
    cumsum diff dot eq erf erfc erfcinv erfinv exp expand_packed_triangular flat_outer
    flatten flatten_list floatX floor full full_like ge gt invlogit invprobit kron_diag
    kron_dot kron_matrix_op kron_solve_lower kron_solve_upper kronecker le log log1mexp
    log1pexp log_softmax logaddexp logbern logdet logdiffexp logit logsumexp lt matmul
    matrix_inverse max maximum mean min minimum neq ones ones_like or_ probit prod round
    sgn sigmoid sin sinh softmax solve_triangular sqr sqrt stack sum switch tan tanh where
    zeros zeros_like""")
PYMC_TRANSFORMS = _names("""
    Chain Interval ZeroSumTransform CholeskyCovPacked circular log log_exp_m1 logodds
    ordered simplex sum_to_1""")

# -- PyTensor ---------------------------------------------------------------------------
# Elementwise ops, reductions, shape and indexing helpers. Not: symbolic inputs
# (pt.scalar, pt.vector...: a model has none), uninitialised memory (empty), graph
# utilities (grad, vectorize, get_scalar_constant_value), classes, config.
PT_ELEMWISE = _names("""
    abs add and_ angle arccos arccosh arcsin arcsinh arctan arctan2 arctanh betainc
    betaincinv bitwise_and bitwise_not bitwise_or bitwise_xor ceil clip complex
    complex_from_polar cos cosh deg2rad digamma eq equal erf erfc erfcinv erfcx erfinv exp
    exp2 expit expm1 floor floor_div gamma gammainc gammaincc gammainccinv gammaincinv
    gammal gammaln gammau ge greater greater_equal gt hyp2f1 i0 i1 imag int_div invert iv
    ive j0 j1 jv kve le less less_equal log log10 log1mexp log1p log1pexp log2 lt maximum
    minimum mod mul neg neq not_equal or_ owens_t polygamma pow psi rad2deg real
    reciprocal round_half_away_from_zero round_half_to_even sigmoid sign sin sinh
    softplus sqr sqrt square sub switch tan tanh tri_gamma true_div trunc xor""")
PT_FUNCTIONS = _names("""
    all allclose alloc any arange argmax argmin argsort as_tensor as_tensor_variable
    atleast_1d atleast_2d atleast_3d bartlett batched_dot batched_tensordot bincount
    broadcast_arrays broadcast_to cast ceil_intdiv chi2sf choose compress
    concat_with_broadcast concatenate conj conjugate constant cov cumprod cumsum diag
    diagonal diff divmod dot einsum expand_dims extract_diag eye fill_diagonal
    fill_diagonal_offset flatnonzero flatten flip full full_like geomspace
    horizontal_stack identity_like inc_subtensor interp inverse_permutation iround isclose
    isinf isnan isneginf isposinf join kn kv largest linspace logaddexp logspace
    logsumexp matmul matrix_transpose matvec max mean median min moveaxis nan_to_num
    nonzero nonzero_values ones ones_like outer pad power prod ptp ravel_multi_index
    repeat reshape roll round searchsorted set_subtensor sgn shape_padaxis shape_padleft
    shape_padright sort specify_shape split squeeze stack stacklists std sum swapaxes take
    take_along_axis tensordot tile trace transpose tri tril tril_indices triu triu_indices
    unique unravel_index var vecdot vecmat vertical_stack where zeros zeros_like
    e euler_gamma inf nan pi newaxis""")
PT_MATH = (PT_ELEMWISE | PT_FUNCTIONS) & _names("""
    abs add all allclose alloc and_ angle any arange arccos arccosh arcsin arcsinh arctan
    arctan2 arctanh argmax argmin as_tensor_variable betainc betaincinv cast ceil clip
    concatenate conj cos cosh cov deg2rad digamma dot eq equal erf erfc erfcinv erfcx
    erfinv exp exp2 expand_dims expit expm1 floor gamma gammainc gammaincc gammaln ge gt
    i0 i1 isclose isinf isnan le log log10 log1mexp log1p log1pexp log2 logaddexp
    logsumexp lt matmul max maximum mean median min minimum mod mul neg neq outer owens_t
    polygamma pow power prod psi real reciprocal round sgn sigmoid sign sin sinh softplus
    sqr sqrt square stack std sub sum switch tan tanh tensordot true_div trunc var""")
PT_LINALG = _names("""
    block_diag cho_solve cholesky det eig eigh eigvalsh expm inv kron lstsq lu lu_factor
    lu_solve matrix_dot matrix_power norm pinv qr slogdet solve solve_triangular svd
    tensorinv tensorsolve trace""")
PT_SPECIAL = _names("beta betaln factorial gamma gammaln log_softmax logit poch softmax")
PT_SIGNAL = _names("convolve1d convolve2d")

# -- NumPy --------------------------------------------------------------------------------
# Array creation, maths, reductions, shape manipulation, sorting/searching, statistics.
# Not: files (load, save, fromfile, memmap...), raw buffers (frombuffer, ndarray,
# from_dlpack), global state (seterr, set_printoptions, errstate), object arrays from
# Python callables (frompyfunc, vectorize), introspection (info, show_config...).
NUMPY_UFUNCS = _names("""
    abs absolute add arccos arccosh arcsin arcsinh arctan arctan2 arctanh cbrt ceil conj
    copysign cos cosh deg2rad degrees divide equal exp exp2 expm1 fabs float_power floor
    floor_divide fmax fmin fmod gcd greater greater_equal heaviside hypot isfinite isinf
    isnan lcm log log10 log1p log2 logaddexp logaddexp2 logical_and logical_not
    logical_or logical_xor matmul maximum minimum mod multiply negative not_equal
    positive power rad2deg radians reciprocal remainder rint sign sin sinh sqrt square
    subtract tan tanh true_divide trunc""")
NUMPY_FUNCTIONS = _names("""
    all allclose amax amin any append apply_along_axis arange argmax argmin argsort
    argwhere around array array_equal array_split asarray ascontiguousarray astype
    atleast_1d atleast_2d atleast_3d average bincount block broadcast_arrays broadcast_to
    choose clip column_stack concat concatenate convolve corrcoef correlate count_nonzero
    cov cross cumprod cumsum delete diag diag_indices diagflat diagonal diff digitize dot
    dsplit dstack ediff1d einsum expand_dims eye flatnonzero flip fliplr flipud full
    full_like geomspace gradient histogram hsplit hstack identity indices inner insert
    interp intersect1d isclose isin isscalar kron lexsort linspace logspace max mean
    median meshgrid min moveaxis nan_to_num nanmax nanmean nanmedian nanmin nanpercentile
    nanquantile nanstd nansum nanvar ndim nonzero ones ones_like outer pad percentile
    polyval prod ptp quantile ravel ravel_multi_index repeat reshape roll rot90 round
    searchsorted select setdiff1d shape size sort split squeeze stack std sum swapaxes
    take take_along_axis tensordot tile trace transpose trapezoid tri tril tril_indices
    triu triu_indices union1d unique unravel_index vander var vsplit vstack where zeros
    zeros_like r_ c_ s_ e euler_gamma inf nan pi newaxis finfo iinfo
    bool_ float64 float32 int64 int32 int8 int16 uint8 intp""")
NUMPY_RANDOM = _names("default_rng")
NUMPY_LINALG = _names("""
    cholesky cond det eig eigh eigvals eigvalsh inv lstsq matrix_power matrix_rank
    multi_dot norm pinv qr slogdet solve svd""")

# -- scipy.special and math ----------------------------------------------------------------
SCIPY_SPECIAL = _names("""
    beta betainc betaincc betainccinv betaincinv betaln binom boxcox boxcox1p comb
    digamma entr erf erfc erfcinv erfcx erfinv expit expm1 factorial gamma gammainc
    gammaincc gammainccinv gammaincinv gammaln i0 i0e i1 i1e inv_boxcox iv ive kl_div kv
    kve log1p log_expit log_ndtr log_softmax loggamma logit logsumexp multigammaln ndtr
    ndtri owens_t poch polygamma psi rel_entr sinc softmax softplus xlog1py xlogy zeta""")
MATH = _names("""
    acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees e
    erf erfc exp exp2 expm1 fabs factorial floor fmod fsum gamma hypot inf isclose
    isfinite isinf isnan isqrt lgamma log log10 log1p log2 nan pi pow prod radians sin
    sinh sqrt tan tanh tau trunc""")

# Attribute names allowed on values, grouped by the type that needs them. Each was
# checked on every type a strict program can hold (tensors, shared data, arrays, numpy
# scalars, ufuncs, Python containers and strings, distribution classes, pm.Model, a
# NumPy Generator): none evaluates, compiles, reaches graph internals or files.
TENSOR_AND_ARRAY_ATTRIBUTES = _names("""
    shape ndim size dtype T sum mean prod max min std var all any argmax argmin argsort
    sort cumsum cumprod dot reshape flatten ravel transpose dimshuffle squeeze swapaxes
    repeat take diagonal trace nonzero clip round conj real imag astype item tolist copy""")
DISTRIBUTION_ATTRIBUTES = _names("dist")
UFUNC_ATTRIBUTES = _names("outer reduce accumulate")
CONTAINER_ATTRIBUTES = _names("""
    keys values items get append extend insert pop index count join split strip
    startswith endswith lower upper replace""")
MODEL_ATTRIBUTES = _names("coords add_coord add_coords")
GENERATOR_ATTRIBUTES = _names("normal uniform standard_normal integers choice permutation")

# Builtins offered to the program (child.py builds its namespace from this table; the
# verifier refuses any other free name). No getattr/hasattr/setattr, eval, exec, open,
# type, vars, dir, globals, format...: attribute names computed at run time are
# impossible, and nothing reads a string as code.
BUILTINS = _names("""
    abs all any bool callable chr complex dict divmod enumerate filter float frozenset
    hash int isinstance issubclass iter len list map max min next ord pow print range
    repr reversed round set slice sorted str sum tuple zip bin hex oct bytes Ellipsis
    NotImplemented ArithmeticError AssertionError AttributeError Exception
    FloatingPointError IndexError KeyError LookupError NotImplementedError OverflowError
    RuntimeError StopIteration TypeError ValueError ZeroDivisionError""")


@dataclass(frozen=True)
class Profile:
    """One PyMC profile. ``modules`` maps an import path to the member names a program
    may use from it; a path that is a key is also an allowed sub-module of its parent."""

    name: str
    modules: dict[str, frozenset[str]]
    value_attributes: frozenset[str]
    builtins: frozenset[str]
    # Forgery rules (SPEC §2.1 amendment): observed values derived from `data`;
    # no total_size; no variable named like a §2.3 scalar name.
    observed_from_data: bool = True
    refuse_total_size: bool = True
    refuse_scalar_like_names: bool = True
    # Run-time model checks (child.py): a Potential / custom density in the built model.
    allow_potentials: bool = False
    allow_custom_densities: bool = False
    # "<path>.<member>" -> (at most this many positional arguments, the only keyword
    # arguments a call of it may pass); no `*args` in such a call.
    call_arguments: dict[str, tuple[int, frozenset[str]]] = field(default_factory=dict)

    def extended(self, name: str, modules: dict[str, frozenset[str]] = {},  # noqa: B006
                 value_attributes: frozenset[str] = frozenset(),
                 builtins: frozenset[str] = frozenset(), **flags) -> "Profile":
        """A profile allowing everything this one does, plus the given names."""
        merged = dict(self.modules)
        for path, members in modules.items():
            merged[path] = merged.get(path, frozenset()) | members
        return replace(self, name=name, modules=merged,
                       value_attributes=self.value_attributes | value_attributes,
                       builtins=self.builtins | builtins, **flags)

    def submodules(self, path: str) -> frozenset[str]:
        """Names under ``path`` that are themselves allowed module paths."""
        prefix = path + "."
        return frozenset(p[len(prefix):] for p in self.modules
                         if p.startswith(prefix) and "." not in p[len(prefix):])


STRICT = Profile(
    name="strict",
    modules={
        "pymc": PYMC_DISTRIBUTIONS | PYMC_MODEL | PYMC_FUNCTIONS,
        "pymc.math": PYMC_MATH,
        "pymc.distributions": PYMC_DISTRIBUTIONS,
        "pymc.distributions.transforms": PYMC_TRANSFORMS,
        "pytensor.tensor": PT_ELEMWISE | PT_FUNCTIONS,
        "pytensor.tensor.math": PT_MATH,
        "pytensor.tensor.linalg": PT_LINALG,
        "pytensor.tensor.special": PT_SPECIAL,
        "pytensor.tensor.signal": PT_SIGNAL,
        "numpy": NUMPY_UFUNCS | NUMPY_FUNCTIONS,
        "numpy.random": NUMPY_RANDOM,
        "numpy.linalg": NUMPY_LINALG,
        "scipy.special": SCIPY_SPECIAL,
        "math": MATH,
    },
    value_attributes=(TENSOR_AND_ARRAY_ATTRIBUTES | DISTRIBUTION_ATTRIBUTES
                      | UFUNC_ATTRIBUTES | CONTAINER_ATTRIBUTES | MODEL_ATTRIBUTES
                      | GENERATOR_ATTRIBUTES),
    builtins=BUILTINS,
)

# -- standard (SPEC §2.1 amendment, issue 10) ---------------------------------------------
# Idiomatic, I/O-free PyMC model code as the community writes it: extra log-density terms
# (Potential: Jacobians, hand-written likelihoods), user-written densities built from
# PyTensor ops (CustomDist/DensityDist; their logp is program code, so it is verified by
# the same allow-list), `pm.logp`/`pm.logcdf` of a distribution at a value (a graph, not a
# number), and `pytensor.scan` for recursions (`import pytensor` for that use).
# Still refused: everything that compiles or runs a graph (pytensor.function, .eval,
# pm.compile*), inference, I/O, dunders.
STANDARD_PYMC = _names("Potential CustomDist DensityDist logp logcdf logccdf")
STANDARD_PYTENSOR = _names("scan")
# Arguments a program may pass to pytensor.scan: fn, sequences, outputs_info,
# non_sequences, n_steps by position or keyword, and the keywords below; not `mode`
# (compiler configuration), `profile` (writes profiling output), `allow_gc`.
SCAN_KEYWORDS = _names("""
    fn sequences outputs_info non_sequences n_steps truncate_gradient go_backwards name
    strict return_list return_updates""")

STANDARD = STRICT.extended(
    "standard",
    modules={"pymc": STANDARD_PYMC, "pymc.distributions": _names("CustomDist DensityDist"),
             "pytensor": STANDARD_PYTENSOR},
    allow_potentials=True,
    allow_custom_densities=True,
    call_arguments={"pytensor.scan": (5, SCAN_KEYWORDS)},
)
PROFILES = {"strict": STRICT, "standard": STANDARD}

# Roots a program may import, and how each is written.
ROOT_MODULES = ("pymc", "numpy", "pytensor.tensor", "math", "scipy.special")
# (the standard profile also has `pytensor` itself, for `pytensor.scan`)
# Parent packages that may appear only in `from <parent> import <allowed sub-module>`.
PARENT_PACKAGES = ("pytensor", "scipy")

# Why a well-known name is refused: used in messages only; the decision is the
# allow-list above (a name absent from it is refused whether or not it is listed here).
WHY_REFUSED: dict[str, str] = {
    **dict.fromkeys(("Potential",), "it adds a log-density term that is not an observed "
                                    "random variable"),
    **dict.fromkeys(("CustomDist", "DensityDist"), "it lets the program write its own "
                                                   "log-density"),
    "Simulator": "it defines a likelihood-free model that NUTS cannot audit",
    "Minibatch": "minibatches make the likelihood random; NUTS needs all the data",
    **dict.fromkeys(("sample", "sample_prior_predictive", "sample_posterior_predictive",
                     "sample_smc", "fit", "find_MAP", "init_nuts", "draw", "NUTS"),
                    "the program may not run a sampler or inference itself"),
    **dict.fromkeys(("compile", "compile_fn", "function", "eval", "fn", "change_flags",
                     "config"), "the program may not configure or run the compiler"),
    **dict.fromkeys(("summary", "hdi", "ess", "loo", "waic", "compare", "rhat", "mcse",
                     "to_inference_data", "predictions_to_inference_data"),
                    "ArviZ results (pandas/xarray objects) are not available"),
    **dict.fromkeys(("owner", "fgraph", "clients", "tag", "inputs", "outputs",
                     "container", "clone", "type"), "computation graph internals are not "
                                                    "available"),
    **dict.fromkeys(("add_potential", "potentials", "register_rv", "free_RVs",
                     "observed_RVs", "basic_RVs", "deterministics", "named_vars",
                     "make_obs_var", "rvs_to_values", "value_vars"),
                    "changing a model's internals is not allowed"),
    **dict.fromkeys(("load", "save", "savez", "savez_compressed", "savetxt", "loadtxt",
                     "genfromtxt", "fromfile", "memmap", "tofile", "dump", "to_csv",
                     "to_pickle", "to_html", "to_netcdf", "to_json", "savefig"),
                    "it reads or writes files"),
    **dict.fromkeys(("ctypes", "as_strided", "frombuffer"), "raw memory access is not "
                                                            "allowed"),
    **dict.fromkeys(("format", "format_map", "mro", "with_traceback"),
                    "introspection is not allowed"),
}
WHY_REFUSED_PREFIXES = {"sample": WHY_REFUSED["sample"], "compile": WHY_REFUSED["compile"],
                        "plot": "plotting and files are not available"}

# Builtins that are refused with a specific reason (anywhere: loaded, bound, passed).
FORBIDDEN_NAMES: dict[str, str] = {
    **{name: f"{name}() can run arbitrary code" for name in (
        "exec", "eval", "compile", "__import__", "breakpoint")},
    **{name: f"{name}() is file or terminal access" for name in (
        "open", "input", "exit", "quit", "help", "copyright", "credits", "license")},
    **{name: f"{name}() is introspection" for name in (
        "globals", "locals", "vars", "dir", "type", "object", "super", "memoryview",
        "classmethod", "staticmethod", "property", "format")},
    **{name: f"{name}() is not allowed: attribute names are never computed at run time"
       for name in ("getattr", "hasattr", "setattr", "delattr")},
}

DUNDER_IN_STRING = re.compile(r"__\w+__")
# SPEC §2.3 scalar names are `base[i,j]`: a variable name with a bracket could be, or
# collide with, another variable's reported scalar name.
SCALAR_NAME_CHARACTERS = re.compile(r"[\[\]]")

MAX_SOURCE_CHARS = 200_000


def get(name: str) -> Profile:
    """The profile called ``name`` (``InvalidRequest`` naming the choices otherwise)."""
    if name not in PROFILES:
        from workers.errors import InvalidRequest

        raise InvalidRequest(f"unknown PyMC profile {name!r} (choose from "
                             f"{', '.join(PROFILES)})")
    return PROFILES[name]


def missing_from_installed(profile: Profile = STRICT) -> dict[str, set[str]]:
    """Allow-listed names the installed libraries do not have (a stale table).

    Imports PyMC (seconds, hundreds of MB): for tests and maintenance only.
    """
    import importlib

    missing: dict[str, set[str]] = {}
    for path, members in profile.modules.items():
        module = importlib.import_module(path)
        absent = {m for m in members if not hasattr(module, m)}
        if absent:
            missing[path] = absent
    return missing


if __name__ == "__main__":
    print(missing_from_installed() or "every allow-listed name exists")
