"""``python -m uvmsim``: the same as the ``uvmsim`` command."""

from uvmsim.cli import entry

# Guarded: a sweep's worker processes (forkserver/spawn) import the main module again and must not re-run the CLI.
if __name__ == "__main__":
    entry()
