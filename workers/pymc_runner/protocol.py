"""What the sandboxed child and its parent agree on: exit codes and file names.

Kept apart from ``child.py`` so the parent can import it without importing the module
it runs with ``python -m`` (runpy warns when that module is already imported).
"""
EXIT_PROGRAM_ERROR = 3  # the program failed; error.json + one "ppl-audit: ..." stderr line
EXIT_OUT_OF_MEMORY = 4  # MemoryError in the program or a backend

JOB_FILE = "job.json"
SUMMARY_FILE = "summary.json"
ERROR_FILE = "error.json"
PROGRAM_FILENAME = "model.py"  # the name tracebacks give the program's code


def attempt_file(number: int, ext: str) -> str:
    """Outputs of attempt ``number`` (0 = first target_accept, then the retries):
    ``attempt-N.npz`` (draws) and ``attempt-N.json`` (its summary)."""
    return f"attempt-{number}.{ext}"
