"""corpus.loader: visible-scope derivation, reference draws, translated entries."""
import json
import math

import numpy as np
import pytest

from corpus import loader
from workers.fit import Fit

EIGHT = {"J": 8, "y": [28, 8, -3, 7, -1, 1, 18, 12], "sigma": [15, 10, 16, 11, 9, 11, 10, 18]}
EIGHT_META = {"rows": {"count": "J", "indexed": ["y", "sigma"]},
              "visible": {"kind": "prefix", "fraction": 0.8}}


# ---- derive_visible ---------------------------------------------------------------

def test_prefix_of_indexed_fields_and_count_updated():
    visible = loader.derive_visible(EIGHT, EIGHT_META)
    assert visible == {"J": 7, "y": [28, 8, -3, 7, -1, 1, 18], "sigma": [15, 10, 16, 11, 9, 11, 10]}


def test_input_is_not_modified():
    data = json.loads(json.dumps(EIGHT))
    loader.derive_visible(data, EIGHT_META)
    assert data == EIGHT


@pytest.mark.parametrize("n, fraction, expected", [
    (10, 0.8, 8), (8, 0.8, 7), (5, 0.8, 4), (434, 0.8, 348), (1, 0.8, 1), (3, 0.5, 2), (7, 1.0, 7),
])
def test_ceiling_is_exact(n, fraction, expected):
    data = {"N": n, "x": list(range(n))}
    visible = loader.derive_visible(data, {"rows": {"count": "N", "indexed": ["x"]},
                                           "visible": {"kind": "prefix", "fraction": fraction}})
    assert visible["N"] == expected == len(visible["x"])
    assert visible["x"] == list(range(expected))


def test_matrix_rows_cut_along_axis_0_and_several_count_fields():
    data = {"N": 5, "M": 5, "K": 2, "X": [[i, -i] for i in range(5)], "y": [0, 1, 0, 1, 1]}
    meta = {"rows": {"count": ["N", "M"], "indexed": ["X", "y"]},
            "visible": {"kind": "prefix", "fraction": 0.6}}
    visible = loader.derive_visible(data, meta)
    assert visible == {"N": 3, "M": 3, "K": 2, "X": [[0, 0], [1, -1], [2, -2]], "y": [0, 1, 0]}


def test_default_visible_is_eighty_percent_prefix():
    visible = loader.derive_visible({"N": 10, "y": list(range(10))},
                                    {"rows": {"count": "N", "indexed": ["y"]}})
    assert visible["N"] == 8


def test_without_rows_visible_equals_full_but_is_a_copy():
    visible = loader.derive_visible(EIGHT, {})
    assert visible == EIGHT
    visible["y"].append(0)
    assert len(EIGHT["y"]) == 8


@pytest.mark.parametrize("data, meta, message", [
    ({"J": 9, "y": [1] * 8}, {"rows": {"count": "J", "indexed": ["y"]}}, "disagree"),
    ({"J": 8}, {"rows": {"count": "J", "indexed": ["y"]}}, "'y'"),
    ({"y": [1, 2]}, {"rows": {"count": "J", "indexed": ["y"]}}, "'J'"),
    ({"J": 1, "y": 3.0}, {"rows": {"count": "J", "indexed": ["y"]}}, "not a list"),
    (EIGHT, {"rows": EIGHT_META["rows"], "visible": {"kind": "random"}}, "prefix"),
    (EIGHT, {"rows": EIGHT_META["rows"], "visible": {"kind": "prefix", "fraction": 0}}, "fraction"),
])
def test_inconsistent_metadata_is_rejected(data, meta, message):
    with pytest.raises(ValueError, match=message):
        loader.derive_visible(data, meta)


# ---- shipped database -------------------------------------------------------------

def test_all_47_reference_posteriors_are_shipped():
    names = loader.reference_posteriors()
    assert len(names) == 47
    assert "eight_schools-eight_schools_centered" in names and "nes2000-nes" in names


def test_reference_draws_are_ten_chains_of_1000_as_a_reference_fit():
    ref = loader.load_reference("eight_schools-eight_schools_noncentered")
    assert isinstance(ref, Fit) and ref.language == "reference"
    assert set(ref.draws) == {"mu", "tau"} | {f"theta[{i}]" for i in range(1, 9)}
    assert all(a.shape == (10, 1000) and a.dtype == np.float64 for a in ref.draws.values())
    assert sorted(ref.reportable) == ["mu", "tau", "theta"]
    assert (ref.draws["tau"] > 0).all()
    # Known posterior: mu ≈ 4.4, tau ≈ 3.6 (Gelman et al., BDA3 §5.5).
    assert abs(ref.draws["mu"].mean() - 4.4) < 0.3
    assert ref.sampler["chains"] == 10 and ref.sampler["source"] == "posteriordb"


def test_centred_eight_schools_uses_non_centred_reference():
    centred = loader.load_reference("eight_schools-eight_schools_centered")
    noncentred = loader.load_reference("eight_schools-eight_schools_noncentered")
    np.testing.assert_array_equal(centred.draws["mu"], noncentred.draws["mu"])
    assert loader.reference_names("eight_schools-eight_schools_centered") == list(centred.draws)


def test_data_are_posteriordb_values_and_no_temp_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert loader.load_data("eight_schools-eight_schools_noncentered") == EIGHT
    assert list(tmp_path.iterdir()) == []


def test_unknown_posterior_is_a_key_error():
    with pytest.raises(KeyError, match="not in the shipped corpus"):
        loader.load_data("no-such-posterior")


# ---- translated entries -----------------------------------------------------------

def test_list_posteriors_only_complete_translations():
    names = loader.list_posteriors()
    assert "eight_schools-eight_schools_noncentered" in names
    for name in names:
        folder = loader.TRANSLATIONS_DIR / name
        assert all((folder / f).is_file() for f in loader.TRANSLATION_FILES)


def test_load_entry_has_sources_scopes_and_reference():
    entry = loader.load("eight_schools-eight_schools_noncentered")
    assert entry.parameters == ["mu", "tau", "theta"]
    assert "def model(data)" in entry.pymc_source
    assert entry.lazyppl_source.startswith("module Model (model) where")
    assert entry.scopes["full"] == EIGHT
    assert entry.scopes["visible"]["J"] == 7 == len(entry.scopes["visible"]["y"])
    assert entry.reference.draws["theta[8]"].shape == (10, 1000)
    assert "theta_trans" in entry.notes


def test_load_without_translation_is_a_key_error():
    with pytest.raises(KeyError, match="no translation"):
        loader.load("diamonds-diamonds-not-a-posterior")


@pytest.mark.parametrize("name", loader.list_posteriors())
def test_every_translation_loads_and_its_meta_is_consistent(name):
    entry = loader.load(name)
    assert set(entry.parameters) <= set(entry.reference.reportable)
    rows = entry.meta.get("rows")
    if rows:
        counts = [rows["count"]] if isinstance(rows["count"], str) else rows["count"]
        n_full = entry.scopes["full"][counts[0]]
        fraction = entry.meta.get("visible", {}).get("fraction", 0.8)
        assert entry.scopes["visible"][counts[0]] == math.ceil(round(fraction * n_full, 9))
        assert entry.scopes["visible"][counts[0]] < n_full or n_full == 1


def test_missing_reference_draws_are_a_clear_error():
    # posteriordb's snapshot lacks the (large) draws of mcycle_gp-accel_gp.
    with pytest.raises(FileNotFoundError, match="no reference draws"):
        loader.load_reference("mcycle_gp-accel_gp")


# ---- every translation: static checks and shapes -----------------------------------

@pytest.mark.parametrize("name", loader.list_posteriors())
def test_every_translation_passes_the_static_checks(name):
    from haskell_bridge.lint import lint
    from workers.pymc_runner.verifier import verify

    from workers.pymc_runner.profile import get

    entry = loader.load(name)
    verify(entry.pymc_source, get(entry.settings().pymc.profile))  # raises ProgramRefused
    lint(entry.lazyppl_source)  # raises ProgramRefused


ODE = ["hudson_lynx_hare-lotka_volterra", "one_comp_mm_elim_abs-one_comp_mm_elim_abs"]


def test_the_corpus_has_46_translations_and_only_mcycle_gp_is_left_out():
    names = loader.list_posteriors()
    assert len(names) == 46 and set(ODE) <= set(names)
    assert sorted(set(loader.reference_posteriors()) - set(names)) == ["mcycle_gp-accel_gp"]


@pytest.mark.parametrize("name", ODE)
def test_ode_programs_need_the_standard_profile_and_meta_selects_it(name):
    from workers.errors import ProgramRefused
    from workers.pymc_runner.profile import STANDARD, STRICT
    from workers.pymc_runner.verifier import verify
    from workers.settings import AuditSettings, PyMCSettings

    entry = loader.load(name)
    verify(entry.pymc_source, STANDARD)
    with pytest.raises(ProgramRefused, match="pytensor"):
        verify(entry.pymc_source, STRICT)
    # meta.json's settings win over a batch's profile; the batch's other keys are kept
    chosen = entry.settings(AuditSettings(pymc=PyMCSettings(profile="strict", chains=2)))
    assert chosen.pymc.profile == "standard" and chosen.pymc.chains == 2


@pytest.mark.slow  # imports PyMC and builds every model twice: about 30 s in all
@pytest.mark.parametrize("name", loader.list_posteriors())
def test_every_pymc_translation_reports_the_reference_parameters(name):
    """model(data) builds on both scopes as the sandboxed child builds it (restricted
    builtins, module views, the checks on the built model); each compared parameter is a
    free RV or a Deterministic whose size on ``full`` matches the reference's scalar count."""
    from workers.pymc_runner.child import build_model

    entry = loader.load(name)
    for scope, data in entry.scopes.items():
        model = build_model(entry.pymc_source, data, entry.settings().pymc.profile)
        named = {v.name for v in model.free_RVs} | {v.name for v in model.deterministics}
        assert set(entry.parameters) <= named, (scope, named)
        if scope == "full":
            for p in entry.parameters:
                size = int(np.prod(model[p].shape.eval()))
                in_reference = [n for n in entry.reference.draws if n.split("[")[0] == p]
                assert size == len(in_reference), (p, size, in_reference)


def test_meta_settings_override_key_by_key_and_are_validated():
    from pydantic import ValidationError

    from workers.settings import AuditSettings

    base = AuditSettings.model_validate({"seed": 7, "pymc": {"backend": "pymc", "draws": 300}})
    merged = base.with_overrides({"pymc": {"profile": "standard"}, "seed": 8})
    assert (merged.seed, merged.pymc.backend, merged.pymc.draws, merged.pymc.profile) == (
        8, "pymc", 300, "standard")
    assert base.with_overrides(None) is base and base.with_overrides({}) is base
    with pytest.raises(ValidationError):
        base.with_overrides({"pymc": {"profil": "standard"}})
    with pytest.raises(ValidationError):
        base.with_overrides({"pymc": {"profile": "lenient"}})
