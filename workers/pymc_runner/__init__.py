"""PyMC side: the SPEC §2.1 verifier and the sandboxed NUTS fit."""
from workers.pymc_runner.verifier import verify

__all__ = ["verify"]
