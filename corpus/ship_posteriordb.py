"""Copy the part of a posteriordb checkout that the corpus uses into corpus/.

Run once when the posteriordb snapshot changes:

    .venv/bin/python -m corpus.ship_posteriordb /work/shared/posteriordb

Copied, for every posterior that names a reference posterior: its
``posteriors/<name>.json``, its model's ``models/info`` and Stan code, its data
set's ``data/info`` and ``data/data`` zip, and the reference's ``draws/info`` and
``draws/draws`` zip. The layout is unchanged, so ``posteriordb.PosteriorDatabase``
reads the copy. posteriordb's own PyMC3 implementations are deliberately not
shipped: every translation in ``corpus/translations`` is written by this project.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent
TARGET = CORPUS_DIR / "posterior_database"


def referenced_posteriors(source_db: Path) -> list[dict]:
    """Posterior infos (dicts) that name a reference posterior, sorted by name."""
    infos = [json.loads(p.read_text(encoding="utf-8"))
             for p in sorted((source_db / "posteriors").glob("*.json"))]
    return [i for i in infos if i.get("reference_posterior_name")]


def files_for(source_db: Path, info: dict) -> list[Path]:
    """Paths (relative to the database root) one posterior needs."""
    model_info_rel = Path("models/info") / f"{info['model_name']}.info.json"
    model_info = json.loads((source_db / model_info_rel).read_text(encoding="utf-8"))
    data_info_rel = Path("data/info") / f"{info['data_name']}.info.json"
    data_info = json.loads((source_db / data_info_rel).read_text(encoding="utf-8"))
    ref = info["reference_posterior_name"]
    return [
        Path("posteriors") / f"{info['name']}.json",
        model_info_rel,
        Path(model_info["model_implementations"]["stan"]["model_code"]),
        data_info_rel,
        Path(data_info["data_file"] + ".zip"),
        Path("reference_posteriors/draws/info") / f"{ref}.info.json",
        Path("reference_posteriors/draws/draws") / f"{ref}.json.zip",
    ]


def ship(source_checkout: Path) -> list[str]:
    """Copy the subset from ``source_checkout`` (holding posterior_database/,
    LICENCE.md, SOURCE_COMMIT) into corpus/posterior_database; return the names."""
    source_db = source_checkout / "posterior_database"
    infos = referenced_posteriors(source_db)
    wanted: set[Path] = set()
    for info in infos:
        wanted.update(files_for(source_db, info))
    if TARGET.exists():
        shutil.rmtree(TARGET)
    for rel in sorted(wanted):
        src = source_db / rel
        if not src.exists() or src.stat().st_size == 0:
            # The snapshot holds an empty placeholder for mcycle_gp-accel_gp's draws
            # (too large upstream); ship nothing, so the loader can say so clearly.
            print(f"skipped (missing or empty in the snapshot): {rel}", file=sys.stderr)
            continue
        (TARGET / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, TARGET / rel)
    commit, _, date = (source_checkout / "SOURCE_COMMIT").read_text(
        encoding="utf-8").strip().partition(" ")
    licence = (source_checkout / "LICENCE.md").read_text(encoding="utf-8").strip()
    (CORPUS_DIR / "LICENCE-posteriordb.md").write_text(
        "# posteriordb licence\n\n"
        "`corpus/posterior_database/` is a subset of the `posterior_database/` folder of\n"
        "posteriordb (https://github.com/stan-dev/posteriordb), copied unchanged from\n"
        f"commit `{commit}` ({date}).\n"
        "It is distributed under posteriordb's BSD 3-Clause licence, reproduced below.\n\n"
        "---\n\n" + licence + "\n",
        encoding="utf-8",
    )
    return [i["name"] for i in infos]


if __name__ == "__main__":
    names = ship(Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/posteriordb"))
    print(f"shipped {len(names)} posteriors into {TARGET}")
