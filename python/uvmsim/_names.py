"""The nearest known name to one that is not known, for the "did you mean" hints of error messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest(name: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``name`` by ``difflib``'s measure, letter case ignored (``TITAN-V`` finds ``titan-v``,
    which a case-sensitive match misses), or None when none is close."""
    folded: dict[str, str] = {}
    for c in choices:
        folded.setdefault(c.casefold(), c)
    near = difflib.get_close_matches(name.casefold(), list(folded), n=1)
    return folded[near[0]] if near else None
