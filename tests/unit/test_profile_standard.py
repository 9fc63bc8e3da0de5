"""The `standard` PyMC profile (issue 10) on verify() alone: idiomatic model code passes,
everything that compiles, runs inference, does I/O or reaches dunders stays refused."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from workers.errors import InvalidRequest, ProgramRefused
from workers.pymc_runner import profile, verify
from workers.pymc_runner.backends import initialisation_failed
from workers.settings import PyMCSettings

ROOT = Path(__file__).resolve().parents[2]
STANDARD, STRICT = profile.STANDARD, profile.STRICT
STRICT_HEADER = "import pymc as pm\nimport numpy as np\nimport pytensor.tensor as pt\n"
HEADER = STRICT_HEADER + "import pytensor\n"


def program(body: str, header: str = HEADER, entry: str = "model(data)") -> str:
    return header + f"def {entry}:\n" + textwrap.indent(textwrap.dedent(body), "    ")


SCAN = """
y = pt.as_tensor(np.asarray(data["y"], dtype=float))
with pm.Model() as m:
    rho = pm.Normal("rho", 0.0, 1.0)
    out, _ = pytensor.scan(fn=lambda y_t, prev, r: y_t - r * prev, sequences=[y],
                           outputs_info=[pt.as_tensor(0.0)], non_sequences=[rho])
    pm.Potential("lik", pm.logp(pm.Normal.dist(0.0, 1.0), out).sum())
return m
"""
CUSTOM_DIST = """
def logp(value, mu):
    return -0.5 * (value - mu) ** 2 - pt.log(1.0 + pt.exp(-value))

with pm.Model() as m:
    mu = pm.Normal("mu", 0.0, 1.0)
    pm.CustomDist("y", mu, logp=logp, observed=np.asarray(data["y"]))
    pm.DensityDist("z", mu, logp=logp, observed=np.asarray(data["y"]))
return m
"""
STANDARD_PROGRAMS = {
    "fixture (make_model, Potential Jacobian, scan)":
        (ROOT / "tests/fixtures/standard_profile/model.py").read_text(),
    "scan with a lambda": program(SCAN),
    "positional scan": program(SCAN.replace("fn=lambda", "lambda").replace(
        "sequences=[y]", "[y]").replace("outputs_info=", "").replace("non_sequences=", "")),
    "CustomDist and DensityDist with a PyTensor logp": program(CUSTOM_DIST,
                                                                header=STRICT_HEADER),
    "import inside the function": program(
        "import pytensor\nimport pytensor.tensor as tt\n" + SCAN.replace("pt.", "tt."),
        header="import pymc as pm\nimport numpy as np\n"),
    "from pytensor import scan": program(SCAN.replace("pytensor.scan", "scan"),
                                         header=HEADER + "from pytensor import scan\n"),
    "make_model with prior_only": program(
        "with pm.Model() as m:\n    x = pm.Normal('x')\n    if not prior_only:\n"
        "        pm.Normal('y', x, 1.0, observed=data['y'])\nreturn m",
        entry="make_model(data, prior_only=False)"),
    "pm.logcdf in a Potential": program(
        "with pm.Model() as m:\n    x = pm.Normal('x')\n"
        "    pm.Potential('c', pm.logcdf(pm.Normal.dist(x, 1.0), data['y']).sum())\nreturn m",
        header=STRICT_HEADER),
}


@pytest.mark.parametrize("name", STANDARD_PROGRAMS)
def test_idiomatic_programs_pass_standard(name):
    verify(STANDARD_PROGRAMS[name], STANDARD)


@pytest.mark.parametrize("name,construct", [
    ("fixture (make_model, Potential Jacobian, scan)", "pytensor"),
    ("scan with a lambda", "pytensor"),
    ("CustomDist and DensityDist with a PyTensor logp", "pm.CustomDist"),
    ("pm.logcdf in a Potential", "pm.Potential"),
])
def test_strict_refuses_them_naming_the_construct(name, construct):
    with pytest.raises(ProgramRefused) as info:
        verify(STANDARD_PROGRAMS[name], STRICT)
    assert construct in info.value.message and "standard" in info.value.message


def test_strict_names_from_pytensor_import_scan_and_the_profile_that_allows_it():
    source = program(SCAN.replace("pytensor.scan", "scan"),
                     header=STRICT_HEADER + "from pytensor import scan\n")
    with pytest.raises(ProgramRefused, match=r"from pytensor import scan .*`standard`"):
        verify(source, STRICT)
    with pytest.raises(ProgramRefused, match="import from 'pytensor' is not allowed"):
        verify("from pytensor import function\n" + program("return None"), STRICT)


def test_an_imported_scan_is_checked_and_may_only_be_called_directly():
    header = HEADER + "from pytensor import scan as sc\n"
    with pytest.raises(ProgramRefused, match="mode"):
        verify(program("sc(abs, data, mode='FAST_COMPILE')\nreturn None", header), STANDARD)
    with pytest.raises(ProgramRefused, match="sc may only be called directly"):
        verify(program("f = sc\nreturn None", header), STANDARD)
    verify(program("sc(abs, data)\nreturn None", header), STANDARD)


def test_strict_names_potential_and_the_profile_that_allows_it():
    source = program("with pm.Model() as m:\n    x = pm.Normal('x')\n"
                     "    pm.Potential('p', -x ** 2)\nreturn m",
                     header="import pymc as pm\n")
    with pytest.raises(ProgramRefused, match=r"pm\.Potential is not allowed: .*"
                                             r"the `standard` profile allows it"):
        verify(source, STRICT)
    verify(source, STANDARD)


STILL_REFUSED = [
    ("pytensor.function", "f = pytensor.function([], 1.0)", "pytensor.function"),
    ("pytensor.config", "c = pytensor.config", "pytensor.config"),
    ("pytensor.printing", "p = pytensor.printing", "pytensor.printing"),
    ("from pytensor import function", None, "function"),
    (".eval()", "x = pt.as_tensor(1.0).eval()", ".eval"),
    ("pm.compile", "f = pm.compile([], [])", "pm.compile"),
    ("pm.sample", "pm.sample()", "pm.sample"),
    ("scan mode=", "pytensor.scan(fn=abs, sequences=[data], mode='FAST_COMPILE')", "mode"),
    ("scan profile=", "pytensor.scan(fn=abs, sequences=[data], profile=True)", "profile"),
    ("scan allow_gc=", "pytensor.scan(fn=abs, sequences=[data], allow_gc=True)", "allow_gc"),
    ("scan 8th positional (mode)", "pytensor.scan(abs, data, None, None, None, -1, False, "
                                   "'FAST_COMPILE')", "positional"),
    ("scan *args", "a = [abs, data]\npytensor.scan(*a)", "*"),
    ("scan **kwargs", "pytensor.scan(fn=abs, **data)", "**"),
    ("import os inside", "import os", "os"),
    ("dunder", "x = data.__class__", "__class__"),
    ("Simulator", "pm.Simulator('s', abs, observed=data)", "pm.Simulator"),
    ("Potential named like a scalar", "pm.Potential('theta[1]', 0.0)", "theta[1]"),
    ("CustomDist total_size", "pm.CustomDist('y', logp=abs, observed=data, total_size=3)",
     "total_size"),
    ("CustomDist constant observed", "pm.CustomDist('y', logp=abs, observed=3.0)",
     "observed"),
    ("scan module alias", "s = pytensor\ns.scan(abs)", "pytensor"),
    ("scan aliased", "s = pytensor.scan\ns(abs, data, mode='FAST_COMPILE')", "directly"),
    ("scan passed on", "list(map(pytensor.scan, [abs]))", "directly"),
]


@pytest.mark.parametrize("name,body,word", STILL_REFUSED, ids=[r[0] for r in STILL_REFUSED])
def test_standard_still_refuses(name, body, word):
    if body is None:
        source = "from pytensor import function\n" + program("return None")
    else:
        source = program(body + "\nreturn None")
    with pytest.raises(ProgramRefused) as info:
        verify(source, STANDARD)
    assert word in info.value.message, info.value.message


def test_standard_extends_strict_and_adds_only_its_tables():
    for path, members in STRICT.modules.items():
        assert members <= STANDARD.modules[path]
    added = {path: STANDARD.modules[path] - STRICT.modules.get(path, frozenset())
             for path in STANDARD.modules}
    assert {p: m for p, m in added.items() if m} == {
        "pymc": profile.STANDARD_PYMC, "pymc.distributions": frozenset({"CustomDist",
                                                                        "DensityDist"}),
        "pytensor": frozenset({"scan"})}
    assert STANDARD.value_attributes == STRICT.value_attributes
    assert STANDARD.builtins == STRICT.builtins
    assert STANDARD.allow_potentials and not STRICT.allow_potentials


def test_every_standard_name_exists_and_none_is_a_module():
    import importlib
    import types

    pytest.importorskip("pymc")
    assert profile.missing_from_installed(STANDARD) == {}
    for path, members in STANDARD.modules.items():
        module = importlib.import_module(path)
        modules = {m for m in members if isinstance(getattr(module, m), types.ModuleType)}
        assert not modules, (path, modules)


def test_the_setting_names_a_profile():
    assert PyMCSettings().profile == "strict"
    assert PyMCSettings(profile="standard").profile == "standard"
    with pytest.raises(ValueError):
        PyMCSettings(profile="lenient")
    with pytest.raises(InvalidRequest, match="standard"):
        profile.get("lenient")


@pytest.mark.parametrize("message,failed", [
    ("RuntimeError: All initialization points failed", True),
    ("SamplingError: Initial evaluation of model at starting point failed!", True),
    ("ValueError: shapes (3,) and (4,) not aligned", False),
    ("MemoryError", False),
])
def test_initialisation_failures_are_told_apart(message, failed):
    kind, _, text = message.partition(": ")
    assert initialisation_failed(type(kind, (Exception,), {})(text)) is failed
