"""PyMC side: the SPEC §2.1 verifier and the sandboxed NUTS fit.

``verify(source)`` is cheap (no PyMC import) and safe in the API process;
``fit_pymc(...)`` runs the program only in a sandboxed child process; a
``PymcSession`` keeps one such child (PyMC imported, programs compiled) for the fits of
one audit.

The names are resolved on first use (PEP 562): the sandboxed child imports this package
too, and sees only its own modules, not the parent's (``sandbox``, the runner).
"""
from __future__ import annotations

__all__ = ["DEFAULT_BACKEND", "PymcSession", "fit_pymc", "verify"]


def __getattr__(name: str):
    if name in ("DEFAULT_BACKEND", "fit_pymc"):
        from workers.pymc_runner import runner
        return getattr(runner, name)
    if name == "PymcSession":
        from workers.pymc_runner.session import PymcSession
        return PymcSession
    if name == "verify":
        from workers.pymc_runner.verifier import verify
        return verify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
