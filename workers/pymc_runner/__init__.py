"""PyMC side: the SPEC §2.1 verifier and the sandboxed NUTS fit.

``verify(source)`` is cheap (no PyMC import) and safe in the API process;
``fit_pymc(...)`` runs the program only in a sandboxed child process.
"""
from workers.pymc_runner.runner import DEFAULT_BACKEND, fit_pymc
from workers.pymc_runner.verifier import verify

__all__ = ["DEFAULT_BACKEND", "fit_pymc", "verify"]
