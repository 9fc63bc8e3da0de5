"""Issue 9's LazyPPL attacks through the whole audit (workers.pipeline.run_audit): the
verdict is ``error`` with a reason naming the construct, never a comparison."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from workers.pipeline import AuditRequest, run_audit
from workers.settings import AuditSettings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "eight_schools"
SPEC_MODEL = (FIX / "Model.hs").read_text()
SMALL = AuditSettings.model_validate({
    "pymc": {"tune": 100, "draws": 60, "chains": 2},
    "lazyppl": {"warmup": 100, "draws": 60, "thin": 1, "chains": 2},
    "budget": {"max_looks": 1},
})


def _audit(lazyppl_source: str) -> dict:
    evidence, _ = run_audit(AuditRequest(
        name="attack", pymc_source=(FIX / "model.py").read_text(),
        lazyppl_source=lazyppl_source,
        scopes={"full": json.loads((FIX / "full.json").read_text())}, settings=SMALL))
    return evidence


def test_foreign_export_after_a_control_escape_is_an_error():
    """Attacks 5 and 6: the old lint missed the declaration after "\\^\\"."""
    source = SPEC_MODEL + ('s :: String\ns = "\\^\\"; foreign export ccall "write" '
                           'hook :: Int -> Int -> Int -> IO Int -- "\n'
                           'hook :: Int -> Int -> Int -> IO Int\nhook _ _ n = return n\n')
    evidence = _audit(source)
    assert evidence["verdict"] == "error"
    assert "foreign" in evidence["reason"] and evidence["error"]["code"] == "refused"


def test_a_model_running_its_own_sampler_is_an_error():
    """F4: runChain is not importable; the model would resample an inner chain."""
    source = SPEC_MODEL.replace(
        "model :: Data -> Meas Draw",
        "inner :: Meas Double\ninner = sample (normal 0 1)\n\nmodel :: Data -> Meas Draw",
    ).replace(
        'return (draw [scalar "mu" mu,',
        'return (draw [scalar "mu" (head (crDraws (runChain defaultSettings inner 0))),')
    evidence = _audit(source)
    assert evidence["verdict"] == "error", evidence["reason"]
    assert "runChain" in evidence["reason"]


def test_a_bad_scalar_name_is_an_error_naming_it():
    evidence = _audit(SPEC_MODEL.replace('scalar "tau" tau', 'scalar "x]" tau'))
    assert evidence["verdict"] == "error", evidence["reason"]
    assert "x]" in evidence["reason"]
