"""``ppl-audit warm-cache --if-needed`` (run by scripts/setup.sh on every set-up): it warms
when the shared cache's stamp does not name this version's programs, backends and compiler
versions, so a machine whose cache predates a new backend or an upgrade is warmed again,
and does nothing otherwise."""
import json
import shutil

import pytest

from service import cli
from workers.pymc_runner import runner


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PPL_AUDIT_CACHE", str(tmp_path))
    runner.shared_compile_cache().mkdir(parents=True)
    return runner.shared_compile_cache()


@pytest.fixture
def warmed(monkeypatch):
    calls = []

    def fake_warm(programs, backends, **_):  # the real one fits for ~80 s (setup runs it)
        calls.append((sorted(programs), tuple(backends)))
        return {name: 0.0 for name in programs}
    monkeypatch.setattr(runner, "warm_shared_cache", fake_warm)
    monkeypatch.setattr("sandbox.check_available", lambda: None)
    # GHC on the translations' Model.hs (real in test_lazyppl_binaries_are_compiled_...)
    monkeypatch.setattr(cli, "_warm_lazyppl_binaries", lambda names: calls.append(("ghc", sorted(names))))
    return calls


def test_a_cache_stamped_with_this_versions_programs_and_backends_is_left_alone(cache, warmed, capsys):
    runner.write_warm_stamp(cli.warm_cache_stamp())
    assert cli.main(["warm-cache", "--if-needed"]) == 0
    assert warmed == []
    assert "already holds" in capsys.readouterr().out


def _older(**changes) -> dict:
    return {**cli.warm_cache_stamp(), **changes}


@pytest.mark.parametrize("stamp", [
    None,
    _older(backends=["nutpie"]),  # warmed before PyMC's own NUTS was
    _older(versions={**cli.warm_cache_stamp()["versions"], "pytensor": "2.0.0"}),  # upgraded since
])
def test_a_cache_without_the_stamp_or_with_an_older_one_is_warmed_and_stamped(cache, warmed, stamp):
    if stamp is not None:
        (cache / runner.WARM_STAMP).write_text(json.dumps(stamp))
    assert cli.main(["warm-cache", "--if-needed"]) == 0
    assert warmed == [(sorted(cli.WARM_PROGRAMS), ("nutpie", "pymc"))]
    assert runner.warm_stamp() == cli.warm_cache_stamp()
    assert runner.warm_stamp()["backends"] == ["nutpie", "pymc"]


def test_without_if_needed_it_always_warms(cache, warmed):
    runner.write_warm_stamp(cli.warm_cache_stamp())
    assert cli.main(["warm-cache"]) == 0
    assert len(warmed) == 1


# ``--corpus``: the shipped translations on both scopes' data, so a batch of them loads
# their compiled code; the stamp lists them, and ``--if-needed`` warms only the missing.
CORPUS_A, CORPUS_B = "kidiq-kidscore_momhs", "earnings-earn_height"


def test_corpus_warms_the_named_translations_and_stamps_them(cache, warmed):
    runner.write_warm_stamp(cli.warm_cache_stamp())  # the base programs are held
    assert cli.main(["warm-cache", "--if-needed", "--corpus", f"{CORPUS_A},{CORPUS_B}"]) == 0
    assert warmed == [("ghc", sorted([CORPUS_A, CORPUS_B])),
                      ([CORPUS_B], ("nutpie",)), ([CORPUS_A], ("nutpie",))]  # one at a time
    assert sorted(runner.warm_stamp()["corpus"]) == sorted([CORPUS_A, CORPUS_B])
    # a later set-up (no --corpus) keeps what the cache holds
    assert cli.main(["warm-cache", "--if-needed"]) == 0
    assert len(warmed) == 3 and sorted(runner.warm_stamp()["corpus"]) == sorted([CORPUS_A, CORPUS_B])


def test_corpus_if_needed_warms_only_what_the_stamp_does_not_hold(cache, warmed):
    runner.write_warm_stamp(cli.warm_cache_stamp([CORPUS_A]))
    assert cli.main(["warm-cache", "--if-needed", "--corpus", CORPUS_A]) == 0
    assert warmed == [("ghc", [CORPUS_A])]  # GHC's cache answers a held binary in ~1 ms
    warmed.clear()
    assert cli.main(["warm-cache", "--if-needed", "--corpus", f"{CORPUS_A},{CORPUS_B}"]) == 0
    assert warmed == [("ghc", sorted([CORPUS_A, CORPUS_B])), ([CORPUS_B], ("nutpie",))]
    assert sorted(runner.warm_stamp()["corpus"]) == sorted([CORPUS_A, CORPUS_B])


def test_corpus_held_under_older_compilers_is_warmed_again(cache, warmed):
    older = {**cli.warm_cache_stamp([CORPUS_A]),
             "versions": {**cli.warm_cache_stamp()["versions"], "numba": "0.1.0"}}
    (cache / runner.WARM_STAMP).write_text(json.dumps(older))
    assert cli.main(["warm-cache", "--if-needed", "--corpus", CORPUS_A]) == 0
    assert warmed == [("ghc", [CORPUS_A]), (sorted(cli.WARM_PROGRAMS), ("nutpie", "pymc")),
                      ([CORPUS_A], ("nutpie",))]
    assert runner.warm_stamp() == cli.warm_cache_stamp([CORPUS_A])


@pytest.mark.parametrize("entry", ["0" * 64, None])
def test_a_translation_changed_since_it_was_warmed_is_warmed_again(cache, warmed, entry):
    """The stamp holds each translation's digest (program, profile, both scopes' data): an
    edited translation (a different digest), or a stamp from before digests (a list of
    names), does not count as held."""
    stamp = cli.warm_cache_stamp([CORPUS_A, CORPUS_B])
    if entry is None:
        stamp["corpus"] = sorted(stamp["corpus"])
    else:
        stamp["corpus"][CORPUS_A] = entry
    runner.write_warm_stamp(stamp)
    assert cli.main(["warm-cache", "--if-needed", "--corpus", f"{CORPUS_A},{CORPUS_B}"]) == 0
    assert ([CORPUS_A], ("nutpie",)) in warmed
    assert (([CORPUS_B], ("nutpie",)) in warmed) == (entry is None)
    assert runner.warm_stamp() == cli.warm_cache_stamp([CORPUS_A, CORPUS_B])


def test_the_digest_follows_the_program_and_the_data(monkeypatch):
    before = cli._corpus_digest(CORPUS_A)
    assert before == cli._corpus_digest(CORPUS_A) and before != cli._corpus_digest(CORPUS_B)
    real = cli._corpus_programs

    def edited(names):
        source, datasets, profile = real(names)[names[0]]
        return {names[0]: (source + "\n# edited\n", datasets, profile)}
    monkeypatch.setattr(cli, "_corpus_programs", edited)
    assert cli._corpus_digest(CORPUS_A) != before


def test_corpus_refuses_a_name_that_is_not_a_translation(cache, warmed, capsys):
    assert cli.main(["warm-cache", "--corpus", "../../etc/passwd"]) == 2
    assert warmed == [] and "no translation" in capsys.readouterr().err


def test_corpus_programs_carry_both_scopes_data_and_their_profile():
    programs = cli._corpus_programs(["hudson_lynx_hare-lotka_volterra", CORPUS_A])
    source, datasets, profile = programs["hudson_lynx_hare-lotka_volterra"]
    assert profile == "standard" and "pytensor.scan" in source  # an RK4 scan program
    visible, full = datasets
    assert len(visible["ts"]) < len(full["ts"])
    assert programs[CORPUS_A][2] == "strict"


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("ghc") is None, reason="GHC is not installed")
def test_lazyppl_binaries_are_compiled_into_the_ghc_cache(capsys):
    """--corpus also puts each translation's LazyPPL binary in the GHC cache (the real
    one: a scope task then reads it instead of running GHC)."""
    from corpus.loader import TRANSLATIONS_DIR
    from haskell_bridge import build_program
    from sandbox import Limits

    cli._warm_lazyppl_binaries([CORPUS_A])
    assert "ready (" in capsys.readouterr().out
    again = build_program((TRANSLATIONS_DIR / CORPUS_A / "Model.hs").read_text(),
                          limits=Limits(cpu_seconds=60, memory_mb=1024, wall_seconds=60))
    assert again.cached
