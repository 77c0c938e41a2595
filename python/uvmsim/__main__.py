"""``python -m uvmsim``: the same as the ``uvmsim`` command."""

from uvmsim.cli import main

main()
