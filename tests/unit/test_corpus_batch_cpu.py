"""The batch benchmark's sampling CPU (benchmarks/corpus_batch.py): which stored fits
count and what is subtracted. No fits here; the figures mirror a real hmm_drive_1 audit."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("corpus_batch", ROOT / "benchmarks" / "corpus_batch.py")
batch = importlib.util.module_from_spec(_spec)
sys.modules["corpus_batch"] = batch
_spec.loader.exec_module(batch)


def _pymc(cpu: float) -> dict:
    return {"stats": {"process": {"cpu_seconds": cpu}}, "timings": {"compile": 99.0}}


def _lazyppl(cpu: float) -> dict:
    return {"stats": {"cpu_seconds": cpu}, "timings": {"compile": 2.5}}


def test_only_refitted_fits_count_and_pymc_set_up_is_subtracted():
    scopes = {"visible": {"looks": [
        {"look": 1, "refitted": ["pymc", "lazyppl"],
         "pymc_fit": {"import": 4.0, "prewarm": 0.5, "build": 2.5, "compile": 54.0, "sample": 27.0}},
        {"look": 2, "refitted": ["lazyppl"], "pymc_fit": {}},   # PyMC's look-1 fit kept
        {"look": 3, "refitted": ["pymc"], "pymc_fit": {"compile": 0.0, "sample": 29.0}},
    ]}}
    fits = [("visible", "pymc", 1, _pymc(77.5)), ("visible", "lazyppl", 1, _lazyppl(6.5)),
            ("visible", "pymc", 2, _pymc(77.5)),          # the kept fit, stored again
            ("visible", "lazyppl", 2, _lazyppl(31.5)),
            ("visible", "pymc", 3, _pymc(36.5)),
            ("visible", "lazyppl", 3, _lazyppl(31.5)),     # kept: not refitted at look 3
            ("visible", "reference", 0, _lazyppl(1.0))]
    spent = batch.sampling_seconds(scopes, fits)
    # the look's set-up phases, not the fit's own timings, are subtracted
    assert spent["pymc"] == pytest.approx((77.5 - 61.0) + 36.5)
    assert spent["lazyppl"] == pytest.approx(6.5 + 31.5)
    assert spent["pymc_cpu"] == pytest.approx(77.5 + 36.5)


def test_set_up_longer_than_the_cpu_counts_nothing():
    # a contended compile: its wall seconds exceed the child's CPU
    scopes = {"full": {"looks": [{"look": 1, "refitted": ["pymc"],
                                  "pymc_fit": {"import": 3.0, "compile": 10.0}}]}}
    assert batch.sampling_seconds(scopes, [("full", "pymc", 1, _pymc(12.0))])["pymc"] == 0.0
