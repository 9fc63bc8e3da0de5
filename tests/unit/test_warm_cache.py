"""``ppl-audit warm-cache --if-needed`` (run by scripts/setup.sh on every set-up): it warms
when the shared cache's stamp does not name this version's programs, backends and compiler
versions, so a machine whose cache predates a new backend or an upgrade is warmed again,
and does nothing otherwise."""
import json

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

    def fake_warm(programs, backends):  # the real one fits for ~80 s (setup runs it)
        calls.append((sorted(programs), tuple(backends)))
        return {name: 0.0 for name in programs}
    monkeypatch.setattr(runner, "warm_shared_cache", fake_warm)
    monkeypatch.setattr("sandbox.check_available", lambda: None)
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
