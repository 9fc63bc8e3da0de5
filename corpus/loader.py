"""Read the shipped posteriordb corpus and its translations.

Layout (docs/ARCHITECTURE.md, "Corpus"):

    corpus/posterior_database/               posteriordb subset, read with the posteriordb package
    corpus/translations/<posterior>/model.py     PyMC program (SPEC §2.1)
    corpus/translations/<posterior>/Model.hs     LazyPPL program (SPEC §2.2)
    corpus/translations/<posterior>/meta.json    parameters, row metadata, visible scope

A posterior is *translated* when its folder holds all three files. Data come from
posteriordb unchanged (the ``full`` scope); the ``visible`` scope is derived from
``meta.json`` by :func:`derive_visible`. Reference draws become a
:class:`workers.fit.Fit` with ``language="reference"``: arrays shaped
(chains, draws) = (10, 1000), names exactly as posteriordb gives them (``theta[1]``).
"""
from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import numpy as np
from posteriordb import PosteriorDatabase

from workers.fit import Fit, base_name

CORPUS_DIR = Path(__file__).resolve().parent
DATABASE_DIR = CORPUS_DIR / "posterior_database"
TRANSLATIONS_DIR = CORPUS_DIR / "translations"
TRANSLATION_FILES = ("model.py", "Model.hs", "meta.json")


@dataclass(frozen=True)
class CorpusEntry:
    """One translated posterior, ready to audit.

    ``scopes`` is ``{"visible": data, "full": data}`` (independent copies);
    ``parameters`` lists the base names to compare (posteriordb's names, all present
    in the reference draws); ``reference`` holds posteriordb's reference draws.
    """

    name: str
    pymc_source: str
    lazyppl_source: str
    meta: dict
    parameters: list[str]
    scopes: dict[str, dict]
    reference: Fit
    notes: str

    def settings(self, base=None):
        """The audit settings for this posterior: ``base`` (default: the product's
        defaults) with ``meta.json``'s ``settings`` applied on top, e.g. the ODE programs'
        ``{"pymc": {"profile": "standard"}}`` (they use ``pytensor.scan``)."""
        from workers.settings import AuditSettings

        return (base or AuditSettings()).with_overrides(self.meta.get("settings"))


@lru_cache(maxsize=1)
def database() -> PosteriorDatabase:
    """The shipped posteriordb subset."""
    return PosteriorDatabase(str(DATABASE_DIR))


def reference_posteriors() -> list[str]:
    """Every shipped posterior (each names a reference posterior), sorted."""
    return sorted(database().posterior_names())


def list_posteriors() -> list[str]:
    """Posteriors with a complete translations folder, sorted."""
    if not TRANSLATIONS_DIR.is_dir():
        return []
    return sorted(
        d.name for d in TRANSLATIONS_DIR.iterdir()
        if d.is_dir() and all((d / f).is_file() for f in TRANSLATION_FILES)
    )


def open_database(path: str | Path) -> PosteriorDatabase:
    """A user's posteriordb checkout (any commit with posteriordb's layout: the folder
    holding ``posteriors/``, ``models/``, ``data/``, ``reference_posteriors/``)."""
    root = Path(path)
    if (root / "posterior_database").is_dir():  # the repository root was given
        root = root / "posterior_database"
    if not (root / "posteriors").is_dir():
        raise FileNotFoundError(f"{path} is not a posteriordb checkout (no posteriors/)")
    return PosteriorDatabase(str(root))


def _posterior(name: str, db: PosteriorDatabase | None = None):
    if name not in (db.posterior_names() if db is not None else reference_posteriors()):
        where = "the database" if db is not None else "the shipped corpus"
        raise KeyError(f"posterior {name!r} is not in {where}")
    return (db or database()).posterior(name)


def load_data(name: str, db: PosteriorDatabase | None = None) -> dict:
    """posteriordb's data for ``name``, unchanged (the ``full`` scope)."""
    # .values() unzips in memory; .file_path() would leave a temporary file behind.
    return _posterior(name, db).data.values()


def pymc_implementation(name: str, db: PosteriorDatabase | None = None) -> str | None:
    """The posterior's own PyMC program (``models/info/<model>.info.json`` →
    ``model_implementations.pymc``), or None when the database has none."""
    model = _posterior(name, db).model
    if "pymc" not in model._implementations:  # noqa: SLF001 - the package has no accessor
        return None
    return model.code("pymc")


def load_stan_code(name: str) -> str:
    """The Stan program posteriordb gives for ``name`` (what the translations follow)."""
    return _posterior(name).model.code("stan")


def reference_names(name: str) -> list[str]:
    """Scalar names in the reference draws of ``name``, in the draws file's order."""
    # The draws file is authoritative: its key order can differ from the
    # diagnostics' name list in draws/info.
    return list(load_reference(name).draws)


def load_reference(name: str, db: PosteriorDatabase | None = None) -> Fit:
    """posteriordb's reference draws for ``name`` as a Fit (language "reference"), from
    the shipped snapshot or from ``db``."""
    posterior = _posterior(name, db)
    try:
        draws_path = posterior.reference_draws_file_path()
    except AssertionError:  # the package asserts a reference_posterior_name
        draws_path = ""
    if not draws_path or not Path(draws_path + ".zip").is_file():
        raise FileNotFoundError(
            f"{'the database' if db is not None else 'the shipped posteriordb snapshot'} "
            f"has no reference draws for {name!r}")
    chains = posterior.reference_draws()  # list of chains: {scalar name: [draws]}
    info = posterior.reference_draws_info()
    names = list(chains[0])
    draws = {
        n: np.asarray([chain[n] for chain in chains], dtype=np.float64) for n in names
    }
    shapes = {a.shape for a in draws.values()}
    if len(shapes) != 1:
        raise ValueError(f"reference draws of {name!r} are ragged: {sorted(shapes)}")
    reportable = list(dict.fromkeys(base_name(n) for n in names))
    inference = info.get("inference", {})
    diagnostics = info.get("diagnostics", {})
    return Fit(
        language="reference",
        draws=draws,
        divergences=int(sum(diagnostics.get("divergent_transitions") or [0])),
        sampler={
            "source": "posteriordb",
            "reference_posterior": info.get("name"),
            "method": inference.get("method"),
            **(inference.get("method_arguments") or {}),
        },
        stats={"posteriordb_checks": info.get("checks_made", {})},
        timings={},
        versions={
            "posteriordb_commit": _source_commit() if db is None else "unknown",
            **({"posteriordb_path": str(db.path)} if db is not None else {}),
            "rstan": (info.get("versions") or {}).get("rstan_version"),
        },
        reportable=reportable,
    )


@lru_cache(maxsize=1)
def _source_commit() -> str:
    text = (CORPUS_DIR / "LICENCE-posteriordb.md").read_text(encoding="utf-8")
    for token in text.split("`"):
        if len(token) == 40 and all(c in "0123456789abcdef" for c in token):
            return token
    return "unknown"


def derive_visible(data: dict, meta: dict) -> dict:
    """The ``visible`` scope: a prefix of the rows of ``data`` (which is not modified).

    ``meta["rows"] = {"count": "N" | ["N", ...], "indexed": [field, ...]}`` names the
    field(s) holding the row count N and the fields indexed by row along axis 0;
    ``meta["visible"] = {"kind": "prefix", "fraction": f}`` keeps the first
    ⌈f·N⌉ rows of every indexed field and sets every count field to that number.
    Without ``rows`` the visible scope equals the full data.
    """
    visible = copy.deepcopy(data)
    rows = meta.get("rows")
    if not rows:
        return visible
    spec = meta.get("visible", {"kind": "prefix", "fraction": 0.8})
    if spec.get("kind", "prefix") != "prefix":
        raise ValueError(f"unknown visible kind {spec.get('kind')!r}; only 'prefix'")
    fraction = Fraction(str(spec.get("fraction", 0.8)))
    if not 0 < fraction <= 1:
        raise ValueError(f"visible fraction must be in (0, 1], got {float(fraction)}")

    counts = rows.get("count") or []
    counts = [counts] if isinstance(counts, str) else list(counts)
    indexed = list(rows.get("indexed") or [])
    lengths = {}
    for field in counts:
        if field not in data:
            raise ValueError(f"count field {field!r} is not in the data")
        lengths[field] = int(data[field])
    for field in indexed:
        if field not in data:
            raise ValueError(f"indexed field {field!r} is not in the data")
        if not isinstance(data[field], list):
            raise ValueError(f"indexed field {field!r} is not a list")
        lengths[field] = len(data[field])
    if not lengths:
        raise ValueError("meta 'rows' names no count and no indexed field")
    if len(set(lengths.values())) != 1:
        raise ValueError(f"row counts disagree: {lengths}")
    n_full = next(iter(lengths.values()))
    n_visible = max(1, math.ceil(fraction * n_full)) if n_full else 0
    for field in indexed:
        visible[field] = visible[field][:n_visible]
    for field in counts:
        visible[field] = n_visible
    return visible


def read_meta(name: str) -> dict:
    """``meta.json`` of a translated posterior, checked against the reference."""
    meta = json.loads((TRANSLATIONS_DIR / name / "meta.json").read_text(encoding="utf-8"))
    if meta.get("posterior") != name:
        raise ValueError(f"{name}/meta.json names posterior {meta.get('posterior')!r}")
    parameters = meta.get("parameters")
    if not parameters or not all(isinstance(p, str) for p in parameters):
        raise ValueError(f"{name}/meta.json needs a non-empty 'parameters' list")
    return meta


def load(name: str, db: PosteriorDatabase | None = None) -> CorpusEntry:
    """Everything needed to audit one translated posterior: our programs and meta, with
    posteriordb's data and reference draws from the shipped snapshot or from ``db`` (a
    user's checkout, :func:`open_database`)."""
    folder = TRANSLATIONS_DIR / name
    missing = [f for f in TRANSLATION_FILES if not (folder / f).is_file()]
    if missing:
        raise KeyError(f"posterior {name!r} has no translation ({', '.join(missing)} missing)")
    meta = read_meta(name)
    reference = load_reference(name, db)
    unknown = [p for p in meta["parameters"] if p not in reference.reportable]
    if unknown:
        raise ValueError(
            f"{name}/meta.json parameters {unknown} are not in the reference draws "
            f"(which hold {reference.reportable})"
        )
    full = load_data(name, db)
    return CorpusEntry(
        name=name,
        pymc_source=(folder / "model.py").read_text(encoding="utf-8"),
        lazyppl_source=(folder / "Model.hs").read_text(encoding="utf-8"),
        meta=meta,
        parameters=list(meta["parameters"]),
        scopes={"visible": derive_visible(full, meta), "full": copy.deepcopy(full)},
        reference=reference,
        notes=meta.get("notes", ""),
    )
