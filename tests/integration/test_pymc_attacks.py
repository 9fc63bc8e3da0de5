"""Issue 9 attacks 1-3 and forgeries F1-F3 through the real entry point ``fit_pymc``.

Each program ran (and wrote files, or forged a verdict) against the deny-list verifier.
Each must now end in ``ProgramRefused`` naming the construct and its line, before any
process starts; where a construct can only be seen at run time (a computed variable
name) the child refuses the built model. A marker file the attack tries to create never
appears.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from workers.errors import ProgramRefused
from workers.pymc_runner import fit_pymc

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eight_schools"
FULL = json.loads((FIXTURES / "full.json").read_text())
QUICK = dict(chains=1, tune=50, draws=50, seed=3)

HEADER = "import numpy as np\nimport pymc as pm\nimport pytensor.tensor as pt\n\n\n"
# A valid eight-schools model; {extra} is spliced in on line 13.
BODY = """\
def model(data):
    y = np.asarray(data["y"], dtype=float)
    sigma = np.asarray(data["sigma"], dtype=float)
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta = pm.Normal("theta", mu, tau, shape=int(data["J"]))
{extra}
        pm.Normal("y", mu=theta, sigma=sigma, observed=y)
    return m
"""
LINE = 13


def attack(extra: str) -> str:
    return HEADER + BODY.format(extra="\n".join("        " + ln for ln in extra.splitlines()))


def refused(source: str, word: str, line: int | None = LINE) -> ProgramRefused:
    with pytest.raises(ProgramRefused) as info:
        fit_pymc(source, FULL, **QUICK)
    err = info.value
    assert word.lower() in err.message.lower(), err.message
    if line is not None:
        assert err.details.get("line") == line, (str(err), err.details)
    return err


def assert_never_appears(marker: Path) -> None:
    time.sleep(1.0)
    assert not marker.exists()


def test_attack1_config_change_flags_then_eval_is_refused(tmp_path):
    marker = tmp_path / "MARKER"
    source = attack(
        f'with pt.math.config.change_flags(gcc__cxxflags="-wrapper /bin/sh,-c,touch {marker}"):\n'
        "    (pt.as_tensor_variable(np.ones(3)) * 2.0).sum().eval()")
    refused(source, "pt.math.config")
    assert_never_appears(marker)


def test_attack1_eval_alone_is_refused():
    refused(attack("z = (theta * 2.0).sum().eval()"), ".eval")


@pytest.mark.parametrize("extra,word", [
    ("s = pm.summary({{'x': np.ones((2, 50))}})\ns.to_csv('{marker}')", "pm.summary"),
    ("pm.hdi(np.ones(50)).to_netcdf('{marker}')", "pm.hdi"),
    ("pm.ess(np.ones((2, 50)))", "pm.ess"),
    ("pm.loo(None)", "pm.loo"),
    ("pm.compare({{}})", "pm.compare"),
])
def test_attack2_arviz_reexports_are_refused(tmp_path, extra, word):
    marker = tmp_path / "MARKER"
    refused(attack(extra.format(marker=marker)), word)
    assert_never_appears(marker)


def test_attack3_dataframe_eval_with_a_built_dunder_is_refused(tmp_path):
    marker = tmp_path / "MARKER"
    extra = ("frame = pm.summary({'x': np.ones((2, 50))})\n"
             "frame.eval('@frame.' + '_' * 2 + 'class' + '_' * 2, engine='python')")
    refused(attack(extra), "pm.summary")
    # and the method alone, on whatever object, is refused by name
    refused(attack("frame = np.ones(3)\nframe.eval('@frame.' + '_' * 2 + 'class')"), ".eval",
            line=LINE + 1)
    assert_never_appears(marker)


def test_f1_literal_observed_values_are_refused():
    refused(attack('pm.Normal("fake", mu, 1.0, observed=3.0)'), "observed")
    refused(attack('pm.Bernoulli("x", logit_p=-(mu - 1.0) ** 2, observed=1)'), "observed")
    refused(attack('k = 1\npm.Bernoulli("x", logit_p=mu, observed=k)'), "observed",
            line=LINE + 1)
    refused(attack('k = pm.Data("k", np.ones(3))\npm.Poisson("x", pt.exp(mu), observed=k)'),
            "observed", line=LINE + 1)


def test_f2_total_size_is_refused():
    refused(attack('pm.Normal("y2", mu, 1.0, observed=y, total_size=100 * int(data["J"]))'),
            "total_size")


def test_f3_a_name_that_is_a_scalar_name_is_refused():
    refused(attack('pm.Deterministic("theta[1]", 100 + 0 * theta[1])'), "theta[1]")


def test_f3_a_computed_scalar_name_is_refused_by_the_child():
    """The verifier cannot read a computed name; the child refuses the built model."""
    err = refused(attack('pm.Deterministic("theta" + "[" + "1]", 100 + 0 * theta[1])'),
                  "theta[1]", line=None)
    assert err.details["language"] == "pymc"
