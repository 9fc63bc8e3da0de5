"""The PyMC verifier (SPEC §2.1 strict profile): every forbidden construct is refused with
its line, real programs pass."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from workers.errors import CompileError, ProgramRefused
from workers.pymc_runner import profile, verify

ROOT = Path(__file__).resolve().parents[2]

HEADER = "import pymc as pm\nimport numpy as np\nimport pytensor.tensor as pt\n"  # lines 1-3


def program(body: str, header: str = HEADER) -> str:
    """``header`` + a model whose body starts on line len(header)+2."""
    return header + "def model(data):\n" + textwrap.indent(textwrap.dedent(body), "    ")


# (name, source, line, a word of the reason). Body lines start at 5 with HEADER. The line
# is None only when the program has no `model` binding at all to point at.
REFUSED = [
    # imports
    ("import os", "import os\n" + program("return pm.Model()"), 1, "os"),
    ("import sys late", program("import sys\nreturn pm.Model()"), 5, "sys"),
    ("import subprocess", program("import subprocess"), 5, "subprocess"),
    ("from socket", "from socket import socket\n" + program("pass"), 1, "socket"),
    ("import ctypes", program("import ctypes as c"), 5, "ctypes"),
    ("import importlib", program("import importlib"), 5, "importlib"),
    ("import builtins", program("import builtins"), 5, "builtins"),
    ("import pytensor", "import pytensor\n" + program("pass"), 1, "pytensor"),
    ("dotted import without as", "import pytensor.tensor\n" + program("pass"), 1, "as"),
    ("import scipy", "import scipy.special\n" + program("pass"), 1, "as"),
    ("from pytensor import function", "from pytensor import function\n" + program("pass"), 1,
     "pytensor"),
    ("from scipy import io", "from scipy import io\n" + program("pass"), 1, "scipy"),
    ("star import", "from pymc import *\n" + program("pass"), 1, "*"),
    ("relative import", "from . import x\n" + program("pass"), 1, "relative"),
    ("future import", "from __future__ import annotations\n" + program("pass"), 1,
     "__future__"),
    ("pymc submodule import", "import pymc.sampling as s\n" + program("pass"), 1,
     "pymc.sampling"),
    ("from pymc import sampling", "from pymc import sampling\n" + program("pass"), 1,
     "sampling"),
    ("from pymc.model import Potential", "from pymc.model import Potential\n" + program("pass"),
     1, "pymc.model"),
    ("from numpy import lib", "from numpy import lib\n" + program("pass"), 1, "lib"),
    # log-density terms that are not observed random variables
    ("pm.Potential", program("with pm.Model() as m:\n    pm.Potential('p', 1.0)"), 6,
     "Potential"),
    ("from pymc import Potential", "from pymc import Potential\n" + program("pass"), 1,
     "Potential"),
    ("from pymc import Potential as P", "from pymc import Potential as Normal\n"
     + program("pass"), 1, "Potential"),
    ("pm.CustomDist", program("x = 1\npm.CustomDist('x', logp=lambda v: v)"), 6, "CustomDist"),
    ("pm.DensityDist", program("pm.DensityDist('x')"), 5, "DensityDist"),
    ("pm.distributions.CustomDist", program("pm.distributions.CustomDist('x')"), 5,
     "CustomDist"),
    ("pm.model.Potential", program("pm.model.Potential('x', 1)"), 5, "pm.model"),
    ("pm.Simulator", program("pm.Simulator('s', None)"), 5, "Simulator"),
    ("pm.Minibatch", program("x = pm.Minibatch(np.zeros(9), batch_size=3)"), 5, "minibatch"),
    ("model.add_potential", program("m = pm.Model()\nm.add_potential(1)"), 6, "internals"),
    ("model.potentials.append", program("m = pm.Model()\nm.potentials.append(1)"), 6,
     "potentials"),
    ("model.register_rv", program("m = pm.Model()\nm.register_rv(1, 'x')"), 6, "register_rv"),
    ("model.make_obs_var", program("m = pm.Model()\nm.make_obs_var(1, 2, None, None, None)"),
     6, "make_obs_var"),
    ("free_RVs surgery", program("m = pm.Model()\nm.free_RVs.clear()"), 6, "internals"),
    ("graph surgery", program("x = pt.as_tensor_variable(1.0)\ny = x.owner"), 6, "graph"),
    # running inference, compiling, files
    ("pm.sample", program("pm.sample()"), 5, "sample"),
    ("pm.sample_prior_predictive", program("pm.sample_prior_predictive()"), 5, "sampler"),
    ("pm.fit", program("pm.fit()"), 5, "inference"),
    ("pm.find_MAP", program("pm.find_MAP()"), 5, "inference"),
    ("pm.compile", program("pm.compile([], [])"), 5, "compile"),
    ("pm.compile_fn", program("pm.compile_fn(1)"), 5, "compile"),
    ("pm.plot_trace", program("pm.plot_trace(1)"), 5, "plot"),
    ("pm.sampling.jax", program("pm.sampling.jax"), 5, "pm.sampling"),
    ("from pymc import sample", "from pymc import sample as s\n" + program("pass"), 1,
     "sampler"),
    ("np.load", program("x = np.load('/etc/passwd')"), 5, "files"),
    ("np.save", program("np.save('/tmp/x', 1)"), 5, "files"),
    ("np.savez", program("\n\nnp.savez('x.npz')"), 7, "files"),
    ("np.fromfile", program("np.fromfile('/etc/passwd')"), 5, "files"),
    ("np.memmap", program("np.memmap('x')"), 5, "files"),
    ("np.loadtxt", program("np.loadtxt('x')"), 5, "files"),
    ("ndarray.tofile", program("np.zeros(3).tofile('/tmp/x')"), 5, "file"),
    ("ndarray.dump", program("np.zeros(3).dump('/tmp/x')"), 5, "file"),
    ("np.lib", program("np.lib.format"), 5, "np.lib"),
    ("np.ctypeslib", program("np.ctypeslib.as_array(1)"), 5, "ctypeslib"),
    ("np.testing", program("np.testing.assert_equal(1, 1)"), 5, "testing"),
    ("np.f2py", program("np.f2py.compile('x')"), 5, "f2py"),
    ("np.core", program("np.core.multiarray"), 5, "np.core"),
    ("ndarray.ctypes", program("np.zeros(2).ctypes.data_as(1)"), 5, "memory"),
    ("from numpy import load", "from numpy import load\n" + program("pass"), 1, "files"),
    ("pt.io", program("pt.io.load('x', 'float64', (False,))"), 5, "pt.io"),
    ("pt.pytensor", program("pt.pytensor.function([], [])"), 5, "pt.pytensor"),
    ("pt.math.builtins", program("pt.math.builtins.open('x')"), 5, "builtins"),
    ("pm.math.pytensor", program("pm.math.pytensor.shared(1)"), 5, "pytensor"),
    ("pm.logprob rewrites", program("pm.logprob.rewriting"), 5, "pm.logprob"),
    ("np.random.mtrand", program("np.random.mtrand"), 5, "mtrand"),
    ("pm.gp.util", program("pm.gp.util"), 5, "pm.gp"),
    ("pm.distributions.transforms.np", program("pm.distributions.transforms.np.load"), 5,
     "transforms.np"),
    ("module escapes", program("m = pm\nm.Potential('x', 1)"), 5, "pm.<name>"),
    ("module passed", program("print(np)"), 5, "np.<name>"),
    ("submodule escapes", program("s = pm.math"), 5, "pm.math.<name>"),
    ("module alias rebound", program("pm = 1"), 5, "rebound"),
    ("module alias as argument", program("def f(np):\n    return np"), 5, "rebound"),
    ("module alias shadowed by import", "from pymc import Normal as np\nimport numpy as np\n"
     + program("pass"), 1, "np"),
    # dangerous builtins
    ("open", program("open('/etc/passwd')"), 5, "file"),
    ("open for writing outside cwd", program("f = open('/tmp/pwned', 'w')"), 5, "open"),
    ("exec", program("exec('1')"), 5, "arbitrary code"),
    ("eval", program("\neval('1')"), 6, "eval"),
    ("compile", program("compile('1', 'x', 'exec')"), 5, "compile"),
    ("__import__", program("__import__('os')"), 5, "__import__"),
    ("input", program("input()"), 5, "input"),
    ("breakpoint", program("breakpoint()"), 5, "breakpoint"),
    ("globals", program("globals()['x'] = 1"), 5, "introspection"),
    ("locals", program("locals()"), 5, "introspection"),
    ("vars", program("vars(pm)"), 5, "introspection"),
    ("dir", program("dir()"), 5, "introspection"),
    ("type", program("type('X', (), {})"), 5, "introspection"),
    ("object", program("object"), 5, "object"),
    ("super", program("super()"), 5, "super"),
    ("format builtin", program("format(1, 'x')"), 5, "format"),
    ("aliasing eval", program("e = eval"), 5, "eval"),
    ("shadowing open", program("open = 1"), 5, "open"),
    ("getattr computed", program("getattr(pm, 'Pot' + 'ential')"), 5, "getattr"),
    ("getattr on a variable", program("name = 'x'\ngetattr(name, name)"), 6, "getattr"),
    ("getattr literal", program("x = pt.as_tensor_variable(1.0)\ngetattr(x, 'shape')"),
     6, "computed at run time"),
    ("getattr literal dunder", program("getattr(1, '__class__')"), 5, "getattr"),
    ("getattr on module", program("getattr(pm, 'Normal')"), 5, "getattr"),
    ("getattr aliased", program("g = getattr\ng(pm, 'x')"), 5, "getattr"),
    ("hasattr computed", program("hasattr(pm, 'x' * 2)"), 5, "hasattr"),
    ("setattr", program("setattr(pm, 'sample', 1)"), 5, "setattr"),
    ("delattr", program("delattr(pm, 'sample')"), 5, "delattr"),
    # dunders and introspection
    ("dunder attribute", program("x = ().__class__"), 5, "dunder"),
    ("subclasses walk", program("x = ().__class__.__bases__[0].__subclasses__()"), 5, "dunder"),
    ("private attribute", program("pm._private"), 5, "private"),
    ("private member of object", program("x = pm.Model()\nx._parent"), 6, "private"),
    ("dunder name", program("__builtins__['open']"), 5, "__builtins__"),
    ("dunder in lambda", program("f = lambda: (1).__class__"), 5, "dunder"),
    ("lambda default trick", program("f = lambda x=().__class__: x"), 5, "dunder"),
    ("generator frame", program("g = (i for i in [])\nfr = g.gi_frame"), 6, "frame"),
    ("frame globals", program("x = 1\ny = x.f_globals"), 6, "f_globals"),
    ("traceback frame", program("try:\n    1/0\nexcept Exception as e:\n    e.with_traceback"),
     8, "introspection"),
    ("str.format reads attributes", program("'{0.real}'.format(1)"), 5, "format"),
    ("format string naming dunder", program("s = '{0.__class__}'"), 5, "dunder"),
    ("string naming dunder", program("k = '__globals__'"), 5, "dunder"),
    # monkey-patching shared modules and objects
    ("patch pm.sample", program("pm.sample = None"), 5, "assigning"),
    ("patch numpy", program("np.savez = print"), 5, "assigning"),
    ("augmented attribute", program("m = pm.Model()\nm.x += 1"), 6, "assigning"),
    ("delete attribute", program("del pm.Normal"), 5, "deleting"),
    ("for-target attribute", program("for pm.x in []:\n    pass"), 5, "assigning"),
    ("item assignment into module object", program("np.random.x[0] = 1"), 5,
     "np.random.x"),
    # statements outside the profile
    ("class", program("class M(pm.Model):\n    pass"), 5, "class"),
    ("top-level class", HEADER + "class M:\n    pass\n" + "def model(data):\n    pass", 4,
     "class"),
    ("global", program("global x"), 5, "global"),
    ("nonlocal", program("def f():\n    nonlocal data"), 6, "nonlocal"),
    ("decorator", program("@np.vectorize\ndef f(x):\n    return x"), 5, "decorator"),
    ("async", program("async def f():\n    pass"), 5, "async"),
    ("match", program("match data:\n    case _:\n        pass"), 5, "match"),
    # the model function
    ("no model", HEADER + "def modell(data):\n    pass\n", None, "def model"),
    ("model not a function", HEADER + "model = 1\n", 4, "def model"),
    ("model redefined", program("pass") + "\nmodel = print\n", 6, "more than once"),
    ("model without argument", HEADER + "def model():\n    pass\n", 4, "argument"),
    ("model nested only", HEADER + "def f():\n    def model(data):\n        pass\n", None,
     "top-level"),
]


@pytest.mark.parametrize("name,source,line,word", REFUSED, ids=[c[0] for c in REFUSED])
def test_forbidden_construct_is_refused_with_its_line(name, source, line, word):
    with pytest.raises(ProgramRefused) as info:
        verify(source)
    err = info.value
    expected = {"language": "pymc"} if line is None else {"language": "pymc", "line": line}
    assert err.details == expected, (str(err), err.details)
    assert word.lower() in err.message.lower(), err.message
    if line is not None:
        assert f"line {line}" in str(err)


def test_syntax_error_is_a_compile_error_with_its_line():
    with pytest.raises(CompileError) as info:
        verify(HEADER + "def model(data):\n    return (\n")
    assert info.value.details["line"] in (5, 6)


def test_oversized_and_deeply_nested_programs_are_refused():
    with pytest.raises(ProgramRefused):
        verify(program("pass") + "#" * profile.MAX_SOURCE_CHARS)
    with pytest.raises((ProgramRefused, CompileError)):
        verify(program("x = " + "(" * 5000 + "1" + ")" * 5000))


EIGHT_SCHOOLS = """\
import numpy as np
import pymc as pm


def model(data):
    y = np.asarray(data["y"], dtype=float)
    sigma = np.asarray(data["sigma"], dtype=float)
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta_trans = pm.Normal("theta_trans", 0.0, 1.0, shape=int(data["J"]))
        theta = pm.Deterministic("theta", mu + tau * theta_trans)
        pm.Normal("y", mu=theta, sigma=sigma, observed=y)
    return m
"""

# A posteriordb-style regression written with every allowed import and idiom a
# translator reaches for: sub-module functions, from-imports, model attributes,
# helper functions, comprehensions, f-strings, item assignment into local arrays.
REGRESSION = '''\
"""kidiq-kidscore_momiq style linear regression."""
import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.math import dot
from scipy.special import expit, gammaln
from numpy import random as npr
from pytensor import tensor as ptt
import scipy.special as sps


def standardise(x):
    x = np.asarray(x, dtype=float)
    return (x - x.mean()) / x.std()


def model(data):
    n = int(data["N"])
    X = np.column_stack([np.ones(n), np.asarray(data["mom_iq"], dtype=float)])
    X[:, 1] = standardise(X[:, 1])
    y = np.asarray(data["kid_score"], dtype=float)
    names = [f"b{i}" for i in range(X.shape[1])]
    assert math.isfinite(float(gammaln(3.0))) and expit(0.0) == 0.5
    _ = npr.default_rng(1).normal() + sps.logit(0.5)
    coords = {"coef": names}
    with pm.Model(coords=coords) as m:
        beta = pm.Normal("beta", mu=0.0, sigma=100.0, dims="coef")
        sigma = pm.HalfCauchy("sigma", beta=2.5)
        mu = dot(pt.as_tensor_variable(X), beta)
        pm.Deterministic("fitted_mean", ptt.mean(mu))
        nu = pm.math.exp(pm.Normal("log_nu", 0.0, 1.0))
        pm.Censored("censored_demo", pm.Normal.dist(0.0, 1.0), lower=-10.0, upper=10.0,
                    observed=y[:2] - y.mean())
        pm.StudentT("kid_score", nu=nu + 1, mu=mu, sigma=sigma, observed=y)
        if m.coords:
            pass
    return m
'''


@pytest.mark.parametrize("source", [EIGHT_SCHOOLS, REGRESSION], ids=["eight_schools",
                                                                      "regression"])
def test_real_programs_pass(source):
    verify(source)


def test_the_shipped_translations_pass():
    """Each under the profile its meta.json names (strict unless it says otherwise)."""
    import json

    models = sorted((ROOT / "corpus" / "translations").glob("*/model.py"))
    models += [ROOT / "tests" / "fixtures" / "eight_schools" / "model.py"]
    assert len(models) > 1
    for path in models:
        meta = path.parent / "meta.json"
        settings = json.loads(meta.read_text()).get("settings", {}) if meta.is_file() else {}
        verify(path.read_text(), profile.get(settings.get("pymc", {}).get("profile", "strict")))


def test_every_allow_listed_name_exists_in_the_installed_libraries():
    """A stale table (a renamed member) shows up here, not as a refused real program."""
    pytest.importorskip("pymc")
    assert profile.missing_from_installed() == {}


def test_no_allow_listed_member_is_a_module_unless_it_is_an_allowed_sub_module():
    """``pt.math.builtins`` was reachable because modules hide inside modules: every
    allow-listed member must be a function, class or constant."""
    import importlib
    import types

    pytest.importorskip("pymc")
    for path, members in profile.STRICT.modules.items():
        module = importlib.import_module(path)
        modules = {m for m in members if isinstance(getattr(module, m), types.ModuleType)}
        assert not modules, (path, modules)


# -- issue 9: attacks 1-3 and forgeries F1-F3, on verify() alone ------------------------
ATTACKS = [
    ("attack 1: pt.math.config", program(
        'with pt.math.config.change_flags(gcc__cxxflags="-wrapper /bin/sh,-c,touch M"):\n'
        "    pt.as_tensor_variable(1.0).eval()"), 5, "pt.math.config"),
    ("attack 1: from pt.math import config", "from pytensor.tensor.math import config\n"
     + program("pass"), 1, "config"),
    ("attack 1: .eval", program("x = pt.as_tensor_variable(1.0)\nx.eval()"), 6, ".eval"),
    ("attack 1: .owner.fgraph", program("x = pt.exp(1.0)\nx.owner"), 6, ".owner"),
    ("attack 1: .fn", program("x = pt.exp(1.0)\nx.fn"), 6, ".fn"),
    ("attack 1: pm.draw compiles", program("pm.draw(pt.exp(1.0))"), 5, "pm.draw"),
    ("attack 2: pm.summary", program("pm.summary({}).to_csv('/tmp/x')"), 5, "pm.summary"),
    ("attack 2: to_csv on any value", program("x = np.ones(2)\nx.to_csv('/tmp/x')"), 6,
     "to_csv"),
    ("attack 2: to_pickle", program("x = np.ones(2)\nx.to_pickle('/tmp/x')"), 6, "to_pickle"),
    *[(f"attack 2: pm.{name}", program(f"pm.{name}(1)"), 5, f"pm.{name}")
      for name in ("hdi", "ess", "loo", "waic", "compare", "rhat", "mcse", "kde",
                   "r2_score", "bfmi", "autocorr", "psislw")],
    ("attack 2: from pymc import summary", "from pymc import summary\n" + program("pass"), 1,
     "summary"),
    ("attack 3: DataFrame.eval", program(
        "frame = np.ones(2)\nframe.eval('@frame.' + '_' * 2 + 'class' + '_' * 2)"), 6,
     ".eval"),
    ("attack 3: query", program("frame = np.ones(2)\nframe.query('x')"), 6, ".query"),
    ("attack 3: pipe", program("frame = np.ones(2)\nframe.pipe(print)"), 6, ".pipe"),
    ("compile: pm.compile_fn", program("pm.compile_fn(1)"), 5, "compile"),
    ("compile: pm.sample_smc", program("pm.sample_smc()"), 5, "sampler"),
    ("compile: pm.modelcontext", program("pm.modelcontext(None)"), 5, "pm.modelcontext"),
    ("pt.grad", program("pt.grad(1, 2)"), 5, "pt.grad"),
    ("pt.random", program("pt.random.normal()"), 5, "pt.random"),
    ("pt.vector free input", program("pt.vector('x')"), 5, "pt.vector"),
    ("pm.gp", program("pm.gp.cov.ExpQuad(1)"), 5, "pm.gp"),
    ("pm.ode", program("pm.ode.DifferentialEquation"), 5, "pm.ode"),
    ("pm.set_data", program("pm.set_data({})"), 5, "pm.set_data"),
    ("np.frompyfunc", program("np.frompyfunc(print, 1, 1)"), 5, "np.frompyfunc"),
    ("np.seterrcall", program("np.seterrcall(print)"), 5, "np.seterrcall"),
    ("np.dtype object", program("np.dtype('O')"), 5, "np.dtype"),
    ("model internals", program("m = pm.Model()\nm.named_vars"), 6, "internals"),
    ("shared get_value", program("d = pm.Data('d', data['y'])\nd.get_value()"), 6,
     "get_value"),
    ("unknown free name", program("sys.exit()"), 5, "'sys'"),
    ("print to an object", program("print('x', file=data)"), 5, "file="),
    ("** kwargs hide observed", program(
        "kw = {'observed': 1}\nwith pm.Model():\n    pm.Normal('x', 0.0, 1.0, **kw)"),
     7, "**"),
    # F1: observed values that are not data
    ("F1 observed literal", program("pm.Normal('y', 0.0, 1.0, observed=3.0)"), 5, "observed"),
    ("F1 Bernoulli observed=1", program(
        "mu = pm.Normal('mu', 0.0, 1.0)\npm.Bernoulli('x', logit_p=-mu ** 2, observed=1)"),
     6, "observed=1"),
    ("F1 observed list literal", program("pm.Normal('y', 0, 1, observed=[1.0, 2.0])"), 5,
     "observed"),
    ("F1 observed constant name", program("k = np.ones(3)\npm.Normal('y', 0, 1, observed=k)"),
     6, "observed=k"),
    ("F1 observed rebound to a literal", program(
        "y = data['y']\ny = 3.0\npm.Normal('y', 0, 1, observed=y)"), 7, "observed"),
    ("F1 observed pm.Data of a constant", program(
        "k = pm.Data('k', np.ones(3))\npm.Normal('y', 0, 1, observed=k)"), 6, "observed"),
    ("F1 helper called with a literal", program(
        "def lik(v):\n    pm.Normal('y', 0, 1, observed=v)\nlik(np.ones(2))"), 6, "observed"),
    ("F1 helper default", program(
        "def lik(v=1.0):\n    pm.Normal('y', 0, 1, observed=v)\nlik()"), 6, "observed"),
    ("F1 helpers deriving each other in a cycle", program(
        "def f():\n    return 3.0 if True else g()\ndef g():\n    return f()\n"
        "pm.Normal('y', 0, 1, observed=f())"), 9, "observed"),
    ("F1 lambda parameter", program(
        "lik = lambda v: pm.Normal('y', 0, 1, observed=v)\nlik(data['y'])"), 5, "observed"),
    ("F1 helper passed around", program(
        "def lik(v):\n    pm.Normal('y', 0, 1, observed=v)\nlist(map(lik, [3.0]))"), 6,
     "observed"),
    ("F1 helper called with *args", program(
        "def lik(v):\n    pm.Normal('y', 0, 1, observed=v)\nlik(*[3.0])"), 6, "observed"),
    # F2
    ("F2 total_size", program(
        "pm.Normal('y', 0, 1, observed=data['y'], total_size=100 * len(data['y']))"), 5,
     "total_size"),
    # F3
    ("F3 Deterministic theta[1]", program(
        "theta = pm.Normal('theta', 0, 1, shape=2)\n"
        "pm.Deterministic('theta[1]', 100 + 0 * theta[1])"), 6, "theta[1]"),
    ("F3 name keyword", program("pm.Deterministic(name='b]', var=1.0)"), 5, "b]"),
    ("F3 f-string", program("i = 1\npm.Normal(f'theta[{i}]', 0, 1)"), 6, "theta["),
    ("F3 from-imported", "from pymc import Normal\n" + program("Normal('a[2]', 0, 1)"), 6,
     "a[2]"),
]


@pytest.mark.parametrize("name,source,line,word", ATTACKS, ids=[c[0] for c in ATTACKS])
def test_issue9_attacks_and_forgeries_are_refused_with_their_line(name, source, line, word):
    test_forbidden_construct_is_refused_with_its_line(name, source, line, word)


DATA_DERIVED = [
    "pm.Normal('y', 0, 1, observed=data['y'])",
    "y = np.asarray(data['y'], dtype=float)\ny = (y - y.mean()) / y.std()\n"
    "pm.Normal('y', 0, 1, observed=y)",
    "def col(name):\n    return np.asarray(data[name], dtype=float)\n"
    "pm.Normal('y', 0, 1, observed=np.log(col('w')))",
    "def lik(v):\n    pm.Normal('y', 0, 1, observed=v)\nlik(data['y'])\nlik(data['z'])",
    "ys = [np.asarray(data[k]) for k in ('a', 'b')]\nfor i, y in enumerate(ys):\n"
    "    pm.Normal(f'y{i}', 0, 1, observed=y)",
    "y = data['y']\ny += 1\npm.Normal('y', 0, 1, observed=y)",
    "d = pm.Data('d', np.asarray(data['y']))\npm.Normal('y', 0, 1, observed=d)",
    "pm.Normal('y', 0, 1, observed=None)",
]


@pytest.mark.parametrize("body", DATA_DERIVED)
def test_observed_values_derived_from_data_pass(body):
    verify(program(body))


def test_the_profile_is_extensible_by_tables():
    """A later profile (issue 10) allows more by extending tables, not code."""
    wider = profile.STRICT.extended("wider", modules={"pymc": frozenset({"Potential"})},
                                    allow_potentials=True)
    source = program("with pm.Model() as m:\n    pm.Potential('p', 1.0)\nreturn m")
    verify(source, wider)
    with pytest.raises(ProgramRefused):
        verify(source)
    assert "Potential" not in profile.STRICT.modules["pymc"]


def test_the_data_flow_is_linear_on_a_maximal_program():
    """It runs in the API process on untrusted sources: a 200 000-character chain of
    bindings whose last link is a constant is refused in well under a second or two."""
    import time

    n = 11_000
    body = "".join(f"x{i} = x{i + 1}\n" for i in range(n))
    source = program(body + f"x{n} = data\nx{n} = 3.0\npm.Normal('y', 0, 1, observed=x0)")
    assert len(source) < profile.MAX_SOURCE_CHARS
    started = time.perf_counter()
    with pytest.raises(ProgramRefused, match="observed=x0"):
        verify(source)
    assert time.perf_counter() - started < 5.0


def test_no_name_explained_as_refused_is_on_an_allow_list():
    """WHY_REFUSED only words messages; this keeps it from contradicting the tables."""
    allowed = set(profile.STRICT.value_attributes).union(*profile.STRICT.modules.values())
    assert not allowed & set(profile.WHY_REFUSED), allowed & set(profile.WHY_REFUSED)
    assert not set(profile.STRICT.builtins) & set(profile.FORBIDDEN_NAMES)
