"""The strict PyMC profile of SPEC §2.1, as data.

The verifier (``verifier.py``) and the sandboxed child (``child.py``) both read these
tables, so what the static check allows and what the restricted runtime namespace
offers cannot drift apart.

Module paths are *attribute* paths as a program spells them (``numpy.emath`` is
``np.emath`` even though the real module is ``numpy.lib.scimath``).
"""
from __future__ import annotations

import re

# Import roots a program may name, and the import statement that binds each.
ROOT_MODULES = ("pymc", "numpy", "pytensor.tensor", "math", "scipy.special")

# Sub-modules reachable from an allowed module by attribute (``pm.math``) or
# ``from pymc import math``. Everything else that is a module is refused: PyMC, NumPy
# and PyTensor expose their whole machinery (``pm.sampling``, ``np.lib``,
# ``pt.math.builtins``, ``pt.pytensor``...) as plain attributes.
ALLOWED_SUBMODULES: dict[str, frozenset[str]] = {
    "pymc": frozenset({"math", "gp", "distributions", "ode"}),
    "pymc.gp": frozenset({"cov", "mean"}),
    "pymc.distributions": frozenset({"transforms"}),
    "numpy": frozenset({"random", "linalg", "fft", "polynomial", "ma", "emath", "dtypes",
                        "exceptions", "char", "strings", "rec"}),
    "numpy.polynomial": frozenset({"polynomial", "chebyshev", "legendre", "hermite",
                                   "hermite_e", "laguerre"}),
    "pytensor.tensor": frozenset({"math", "linalg", "nlinalg", "slinalg", "special",
                                  "extra_ops", "random", "signal"}),
}

# Every public module-valued attribute of every allowed module path, for the installed
# versions (PyMC 5.28, PyTensor 2.38, NumPy 2.3, SciPy 1.17). Names listed here that are
# not in ALLOWED_SUBMODULES are refused. ``python -m workers.pymc_runner.profile``
# prints the table for the installed libraries; tests/unit/test_verifier.py fails when
# an installed library exposes a module name missing here.
MODULE_ATTRIBUTES: dict[str, frozenset[str]] = {
    "math": frozenset(),
    "numpy": frozenset({"char", "core", "ctypeslib", "dtypes", "emath", "exceptions", "f2py",
                        "fft", "lib", "linalg", "ma", "matrixlib", "polynomial", "random",
                        "rec", "strings", "testing", "typing", "version"}),
    "numpy.char": frozenset(),
    "numpy.dtypes": frozenset(),
    "numpy.emath": frozenset(),
    "numpy.exceptions": frozenset(),
    "numpy.fft": frozenset({"helper"}),
    "numpy.linalg": frozenset({"linalg"}),
    "numpy.ma": frozenset({"core", "extras"}),
    "numpy.polynomial": frozenset({"chebyshev", "hermite", "hermite_e", "laguerre",
                                   "legendre", "polynomial", "polyutils"}),
    **{f"numpy.polynomial.{kind}": frozenset({"la", "np", "pu"})
       for kind in ("chebyshev", "hermite", "hermite_e", "laguerre", "legendre",
                    "polynomial")},
    "numpy.random": frozenset({"bit_generator", "mtrand"}),
    "numpy.rec": frozenset(),
    "numpy.strings": frozenset(),
    "pymc": frozenset({
        "approximations", "arraystep", "backends", "blocking", "callbacks", "compound",
        "data", "deterministic", "distributions", "exceptions", "forward", "func_utils",
        "gp", "hmc", "inference", "initial_point", "logging", "logprob", "math", "mcmc",
        "metropolis", "minibatch_rv", "model", "model_graph", "ode", "operators", "opvi",
        "parallel", "plots", "population", "printing", "progress_bar", "pytensorf",
        "sampling", "scaling", "slicer", "smc", "starting", "state", "stats", "stein",
        "step_methods", "step_sizes", "test_functions", "tuning", "updates", "util",
        "variational", "vartypes", "dims"}),
    "pymc.distributions": frozenset({
        "censored", "continuous", "custom", "discrete", "dist_math", "distribution",
        "mixture", "multivariate", "shape_utils", "simulator", "timeseries", "transforms",
        "truncated", "moments"}),
    "pymc.distributions.transforms": frozenset({"np", "pt"}),
    "pymc.gp": frozenset({"cov", "gp", "hsgp_approx", "mean", "util"}),
    "pymc.gp.cov": frozenset({"np", "numbers", "pt", "warnings"}),
    "pymc.gp.mean": frozenset({"pt"}),
    "pymc.math": frozenset({"np", "pt", "pytensor", "warnings"}),
    "pymc.ode": frozenset({"ode", "utils"}),
    "pytensor.tensor": frozenset({
        "basic", "blas", "blas_c", "blas_headers", "blockwise", "elemwise", "elemwise_cgen",
        "exceptions", "extra_ops", "functional", "interpolate", "linalg", "math", "nlinalg",
        "optimize", "pytensor", "random", "rewriting", "sharedvar", "signal", "slinalg",
        "special", "subtensor", "type", "type_other", "utils", "variable", "xlogx", "io",
        "inplace"}),
    "pytensor.tensor.extra_ops": frozenset({"np", "ps", "ptb", "pytensor", "warnings"}),
    "pytensor.tensor.linalg": frozenset(),
    "pytensor.tensor.math": frozenset({"builtins", "np", "printing", "ps", "warnings"}),
    "pytensor.tensor.nlinalg": frozenset({"np", "ps", "ptb", "ptm", "warnings"}),
    "pytensor.tensor.random": frozenset({"basic", "op", "pytensor", "rewriting", "type",
                                         "utils", "var"}),
    "pytensor.tensor.signal": frozenset({"conv"}),
    "pytensor.tensor.slinalg": frozenset({"ifelse", "logging", "np", "pt", "ptb", "ptm",
                                          "pytensor", "scipy_linalg", "warnings"}),
    "pytensor.tensor.special": frozenset({"np", "scipy"}),
    "scipy.special": frozenset({"add_newdocs", "basic", "cython_special", "orthogonal",
                                "sf_error", "specfun", "spfun_stats"}),
}

ALLOWED_MODULE_PATHS: frozenset[str] = frozenset(MODULE_ATTRIBUTES)

# Members of allowed modules that are functions/classes, not modules, but are refused:
# they add log-density terms that are not observed random variables, run a sampler or
# compiler of the program's own choosing, or touch files.
_PYMC_MEMBERS = {
    "Potential": "it adds a log-density term that is not an observed random variable",
    "CustomDist": "it lets the program write its own log-density",
    "DensityDist": "it lets the program write its own log-density",
    "Simulator": "it defines a likelihood-free model that NUTS cannot audit",
    "Minibatch": "minibatches make the likelihood random; NUTS needs all the data",
    "fit": "the program may not run inference itself",
    "find_MAP": "the program may not run inference itself",
    "init_nuts": "the program may not run inference itself",
    "to_inference_data": "the program may not build inference results itself",
    "predictions_to_inference_data": "the program may not build inference results itself",
    "model_to_graphviz": "the program may not render or write model graphs",
    "model_to_networkx": "the program may not render or write model graphs",
    "model_to_mermaid": "the program may not render or write model graphs",
}
_NUMPY_FILE_MEMBERS = {
    name: "it reads or writes files"
    for name in ("load", "save", "savez", "savez_compressed", "savetxt", "loadtxt",
                 "genfromtxt", "fromfile", "fromregex", "memmap", "DataSource", "tofile")
}
_NUMPY_MEMBERS = {
    **_NUMPY_FILE_MEMBERS,
    "test": "it runs a test suite",
    "info": "it is introspection",
    "show_config": "it is introspection",
    "show_runtime": "it is introspection",
    "get_include": "it is introspection",
}
FORBIDDEN_MEMBERS: dict[str, dict[str, str]] = {
    "pymc": _PYMC_MEMBERS,
    "pymc.distributions": {k: v for k, v in _PYMC_MEMBERS.items()
                           if k in ("CustomDist", "DensityDist", "Simulator")},
    "numpy": _NUMPY_MEMBERS,
    "numpy.rec": {"fromfile": "it reads files"},
    "numpy.ma": {"test": "it runs a test suite", "dump": "files are not allowed",
                 "dumps": "pickling is not allowed", "load": "files are not allowed",
                 "loads": "pickling is not allowed"},
    "numpy.random": {"test": "it runs a test suite"},
    "numpy.linalg": {"test": "it runs a test suite"},
    "numpy.fft": {"test": "it runs a test suite"},
    "numpy.polynomial": {"test": "it runs a test suite"},
}
# Prefixes refused on the pymc root: pm.sample*, pm.compile*, pm.plot_*.
PYMC_FORBIDDEN_PREFIXES = {
    "sample": "the program may not run a sampler itself",
    "compile": "the program may not compile functions itself",
    "plot": "plotting and files are not available",
}

# Attribute names refused on *any* object: model internals through which terms could be
# added or removed, graph surgery, raw memory and file access, frames and code objects
# (introspection), and ``str.format`` (which reads attributes named inside a string).
FORBIDDEN_ATTRIBUTES: dict[str, str] = {
    **{name: "changing a model's internals is not allowed" for name in (
        "add_potential", "potentials", "register_rv", "add_named_variable",
        "create_value_var", "free_RVs", "observed_RVs", "basic_RVs", "unobserved_RVs",
        "deterministics", "named_vars", "rvs_to_values", "values_to_rvs",
        "rvs_to_transforms", "rvs_to_initial_values", "value_vars", "unobserved_value_vars",
        "replace_rvs_by_values", "logp_dlogp_function", "register", "registry",
        "make_obs_var", "register_data_var",
        "Potential", "CustomDist", "DensityDist", "Simulator")},
    **{name: "editing computation graphs is not allowed" for name in (
        "owner", "fgraph", "clients", "tag", "inputs", "outputs", "container")},
    **{name: "file access is not allowed" for name in (
        "tofile", "dump", "load", "save", "savez", "savez_compressed", "savetxt",
        "loadtxt", "genfromtxt", "fromfile", "fromregex", "memmap", "DataSource",
        "to_netcdf", "from_netcdf", "to_zarr", "from_zarr", "to_json", "savefig",
        "to_graphviz")},
    **{name: "raw memory access is not allowed" for name in (
        "ctypes", "cffi", "as_strided")},
    **{name: "introspection (frames, tracebacks, str.format) is not allowed" for name in (
        "mro", "format", "format_map", "with_traceback", "gi_frame", "gi_code",
        "gi_yieldfrom", "cr_frame", "cr_code", "ag_frame", "ag_code", "tb_frame",
        "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "f_code")},
}
# Prefixes of frame, code, traceback and generator attributes.
FORBIDDEN_ATTRIBUTE_PREFIXES = ("f_", "gi_", "cr_", "ag_", "tb_", "co_", "func_", "im_")

# Names (builtins) refused wherever they appear, loaded, bound or passed along.
FORBIDDEN_NAMES: dict[str, str] = {
    **{name: f"{name}() can run arbitrary code" for name in (
        "exec", "eval", "compile", "__import__", "breakpoint")},
    **{name: f"{name}() is file or terminal access" for name in (
        "open", "input", "exit", "quit", "help", "copyright", "credits",
        "license")},
    **{name: f"{name}() is introspection" for name in (
        "globals", "locals", "vars", "dir", "type", "object", "super", "memoryview",
        "classmethod", "staticmethod", "property", "format")},
    "setattr": "setattr() is not allowed: attributes of shared objects may not be changed",
    "delattr": "delattr() is not allowed: attributes of shared objects may not be changed",
}
# getattr/hasattr are allowed only as ``getattr(obj, "literal")`` with the literal
# checked like an ordinary attribute.
LITERAL_ATTRIBUTE_BUILTINS = frozenset({"getattr", "hasattr"})

DUNDER_IN_STRING = re.compile(r"__\w+__")

# Builtins offered to the program at run time (child.py); everything else is missing.
SAFE_BUILTINS = (
    "abs", "all", "any", "bool", "callable", "chr", "complex", "dict", "divmod",
    "enumerate", "filter", "float", "frozenset", "getattr", "hasattr", "hash", "int",
    "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "ord",
    "pow", "print", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str",
    "sum", "tuple", "zip", "bin", "hex", "oct", "bytes", "Ellipsis", "NotImplemented",
    "ArithmeticError", "AssertionError", "AttributeError", "Exception", "FloatingPointError",
    "IndexError", "KeyError", "LookupError", "NotImplementedError", "OverflowError",
    "RuntimeError", "StopIteration", "TypeError", "ValueError", "ZeroDivisionError",
)

MAX_SOURCE_CHARS = 200_000


def installed_module_attributes() -> dict[str, set[str]]:
    """Public module-valued attributes of every allowed path, for the installed libraries.

    Imports PyMC (seconds, hundreds of MB): for tests and maintenance, never in the
    verifier itself.
    """
    import importlib
    import types

    def resolve(path: str):
        for root in sorted(ROOT_MODULES, key=len, reverse=True):
            if path == root or path.startswith(root + "."):
                obj = importlib.import_module(root)
                for part in path[len(root) + 1:].split(".") if path != root else []:
                    obj = getattr(obj, part)
                return obj
        raise KeyError(path)

    # Load what the child loads so lazily attached sub-modules are present.
    import pymc  # noqa: F401
    import pymc.sampling.jax  # noqa: F401

    found: dict[str, set[str]] = {}
    todo = list(ROOT_MODULES)
    while todo:
        path = todo.pop()
        module = resolve(path)
        names = set(dir(module)) | set(vars(module))
        found[path] = {n for n in names if not n.startswith("_")
                       and isinstance(getattr(module, n, None), types.ModuleType)}
        todo.extend(f"{path}.{sub}" for sub in ALLOWED_SUBMODULES.get(path, ()))
    return found


if __name__ == "__main__":
    for _path, _names in sorted(installed_module_attributes().items()):
        print(f"{_path!r}: {sorted(_names)!r}")
