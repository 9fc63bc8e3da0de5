"""What the sandboxed child and its parent agree on: exit codes and file names.

Kept apart from ``child.py`` so the parent can import it without importing the module
it runs with ``python -m`` (runpy warns when that module is already imported).
"""
EXIT_PROGRAM_ERROR = 3  # the program failed; error.json + one "ppl-audit: ..." stderr line
EXIT_OUT_OF_MEMORY = 4  # MemoryError in the program or a backend

END_FILE = "end"  # in the inbox: no more requests, exit
SUMMARY_FILE = "summary.json"
ERROR_FILE = "error.json"
PROGRAM_FILENAME = "model.py"  # the name tracebacks give the program's code


def attempt_file(number: int, ext: str) -> str:
    """Outputs of attempt ``number`` (0 = first target_accept, then the retries):
    ``attempt-N.npz`` (draws) and ``attempt-N.json`` (its summary)."""
    return f"attempt-{number}.{ext}"


def request_file(number: int) -> str:
    """Request ``number`` of a session, in its inbox (written by the parent only)."""
    return f"request-{number}.json"


def output_file(number: int, name: str) -> str:
    """Output ``name`` of request ``number`` (``attempt_file(...)``, ``SUMMARY_FILE``,
    ``ERROR_FILE``), written by the child straight into its working directory: the
    parent made that directory, so no path the child controls lies on the way to the
    files the parent reads (each opened without following a symlink)."""
    return f"fit-{number}-{name}"
