"""SPEC §6 `ppl-audit audit` end to end (issue 10, item 4): the real CLI entry point, real
PyMC and GHC in the sandbox, on a small model with a 2×3 matrix (cheap settings: two
chains of a few hundred draws, one look)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main as cli_main
from workers import compare
from workers.settings import derive_seed

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "matrix"
BETA = [f"beta[{i},{j}]" for i in (1, 2) for j in (1, 2, 3)]
# every rule threshold moved off its default, and run lengths at which the defaults
# could not call it agree (so that ignoring any override shows): k = 5 makes every D
# wider than the default delta, and R wider than the default band; 2 x 150 LazyPPL
# draws cannot reach the default ESS gates of 400.
SETTINGS = {
    "seed": 777,
    "pymc": {"chains": 2, "tune": 300, "draws": 400},
    "lazyppl": {"chains": 2, "warmup": 2000, "draws": 150, "thin": 10},
    "rule": {"k": 5.0, "delta": 1.5, "sd_ratio_band": [0.4, 2.5], "rhat_max": 1.05,
             "ess_bulk_min": 50, "ess_tail_min": 50, "max_divergences": 3},
    "budget": {"max_looks": 1},
}
RULE = dict(k=5.0, delta=1.5, sd_ratio_band=(0.4, 2.5), rhat_max=1.05, ess_bulk_min=50,
            ess_tail_min=50, max_divergences=3)


def _audit(tmp_path, capsys, *extra, lazyppl="Model.hs"):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(SETTINGS))
    code = cli_main(["audit", "--pymc", str(FIX / "model.py"), "--lazyppl", str(FIX / lazyppl),
                     "--scope", f"full={FIX / 'data.json'}", "--settings", str(settings),
                     "--json", "--no-save", *extra])
    out = capsys.readouterr().out
    return code, json.loads(out)  # stdout is exactly one JSON object (progress is on stderr)


def test_audit_json_agrees_with_matrix_names_settings_seeds_and_rule(tmp_path, capsys):
    code, ev = _audit(tmp_path, capsys)
    # catches: a non-zero exit for a finished audit, or `verdict` moved off the top level
    assert code == 0 and ev["verdict"] == "agree", ev["reason"]
    full = ev["scopes"]["full"]
    # catches: PyMC matrices named other than SPEC §2.3's 1-based row-major `beta[2,3]`
    assert full["compared"] == ["mu", *BETA]
    assert sorted(full["fits"]["pymc"]["reportable"]) == ["beta", "mu"]
    # catches: settings not stored (or the defaults stored instead of those used)
    stored_rule = ev["settings"]["rule"]
    assert ev["settings"]["seed"] == 777
    assert {k: stored_rule[k] for k in SETTINGS["rule"]} == SETTINGS["rule"]
    assert ev["settings"]["pymc"]["draws"] == 400 and ev["settings"]["lazyppl"]["thin"] == 10
    # catches: the `seed` setting ignored (each side's seed is derived from it)
    for side in ("pymc", "lazyppl"):
        assert full["seeds"][side] == derive_seed(777, "full", side)
        assert full["fits"][side]["sampler"]["seed"] == derive_seed(777, "full", side)
        assert full["fits"][side]["chains"] == 2
    assert (full["fits"]["pymc"]["draws"], full["fits"]["lazyppl"]["draws"]) == (400, 150)
    # catches: rule overrides (k, delta, band, gate thresholds) not reaching the comparison
    rule = compare.Rule(**RULE)
    for row in full["comparisons"]:
        lazy, pymc = compare.Summary(**row["lazyppl"]), compare.Summary(**row["pymc"])
        _, d_int, _, r_int = compare.intervals(lazy, pymc, RULE["k"])
        assert row["D"] == pytest.approx(list(d_int), rel=1e-9)
        assert row["R"] == pytest.approx(list(r_int), rel=1e-9)
        assert compare.interval_verdict(d_int, r_int, rule) == row["verdict"] == "agree"
        # the default delta or the default band would not have said agree
        for default in ({"delta": 0.2}, {"sd_ratio_band": (0.8, 1.25)}):
            assert compare.interval_verdict(d_int, r_int, compare.Rule(**{**RULE, **default})) != "agree"
    # the gates passed under the override, where the default ESS gates (400) would not
    assert full["gates"] == {"lazyppl": [], "pymc": []}
    assert min(min(row["lazyppl"]["ess_bulk"], row["lazyppl"]["ess_tail"])
               for row in full["comparisons"]) < 400


def test_audit_disagree_exits_0_and_parameters_limits_the_comparison(tmp_path, capsys):
    code, ev = _audit(tmp_path, capsys, "--parameters", "beta", lazyppl="ModelWideBeta.hs")
    # catches: exit status tied to the verdict (SPEC §6: 0 for any verdict)
    assert code == 0 and ev["verdict"] == "disagree", ev["reason"]
    full = ev["scopes"]["full"]
    # catches: --parameters ignored (mu would be compared) or uncompared names not listed
    assert full["compared"] == BETA and full["uncompared_pymc"] == ["mu"]
    assert all(row["parameter"] in BETA for row in full["comparisons"])
    assert any(row["verdict"] == "disagree" for row in full["comparisons"])


@pytest.mark.parametrize("scope,word", [
    ("full", "--scope takes NAME=DATA.json"),
    ("=data.json", "--scope takes NAME=DATA.json"),
    ("full=", "--scope takes NAME=DATA.json"),
    ("full=/no/such/file.json", "cannot read"),
    ("list", "must hold a JSON object"),
    ("bad-json", "cannot read"),
])
def test_scope_arguments_that_cannot_run_exit_2_naming_the_problem(tmp_path, capsys, scope, word):
    """catches: a malformed --scope accepted, or reported with exit status 0."""
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "bad.json").write_text("{not json")
    scope = {"list": f"full={tmp_path / 'list.json'}",
             "bad-json": f"full={tmp_path / 'bad.json'}"}.get(scope, scope)
    code = cli_main(["audit", "--pymc", str(FIX / "model.py"), "--lazyppl", str(FIX / "Model.hs"),
                     "--scope", scope, "--no-save"])
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())  # rich wraps long lines
    assert code == 2 and word in err and captured.out == ""


def test_no_scope_and_a_missing_program_exit_2(tmp_path, capsys):
    """catches: an audit started without data, or a missing file reported as a verdict."""
    assert cli_main(["audit", "--pymc", str(FIX / "model.py"), "--lazyppl",
                     str(FIX / "Model.hs"), "--no-save"]) == 2
    assert "--scope NAME=DATA.json is needed" in capsys.readouterr().err
    assert cli_main(["audit", "--pymc", str(tmp_path / "none.py"), "--lazyppl",
                     str(FIX / "Model.hs"), "--scope", f"full={FIX / 'data.json'}", "--no-save"]) == 2
    assert "none.py" in "".join(capsys.readouterr().err.split())
