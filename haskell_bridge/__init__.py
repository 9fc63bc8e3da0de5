"""Run untrusted LazyPPL programs: lint, Safe Haskell compile (cached), sandboxed fit.

    lint(source)                                  -> None or ProgramRefused
    compile_program(source, limits=...)           -> Path of the linked binary
    fit_lazyppl(source, data, chains=..., ...)    -> workers.fit.Fit

See docs/ARCHITECTURE.md for the harness protocol and scripts/build-lazyppl.sh for the
private package database the programs are compiled against.
"""
from __future__ import annotations

from haskell_bridge.compile import CompiledProgram, build_program, compile_program
from haskell_bridge.lint import lint
from haskell_bridge.paths import ToolchainMissing, lazyppl_build
from haskell_bridge.run import fit_lazyppl

__all__ = ["CompiledProgram", "ToolchainMissing", "build_program", "compile_program",
           "fit_lazyppl", "lazyppl_build", "lint"]
