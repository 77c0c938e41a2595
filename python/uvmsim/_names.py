"""The nearest known name to one that is not known, for the "did you mean" hints of error messages; and counts
of things, named in the singular or the plural as the count says."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from uvmsim import _core

_PART = re.compile(r"[-_.]")


def nearest(name: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``name``, letter case ignored (``TITAN-V`` finds ``titan-v``, which a case-sensitive
    match misses), or None when none is close. A choice with a part (split at ``-``, ``_``, ``.``) that is ``name``
    or ends with it (``mshr`` in ``zheng-replayable-mshr``, ``titan`` in ``titan-v``) comes first, the shortest
    such, as the Rust side's variant hints rank them; else ``difflib``'s measure decides, which scores a short
    name against a long one holding it too low to suggest it."""
    folded: dict[str, str] = {}
    for c in choices:
        folded.setdefault(c.casefold(), c)
    key = name.casefold()
    if len(key) >= 3:
        holding = [c for c in folded if any(p.endswith(key) for p in _PART.split(c))]
        if holding:
            return folded[min(holding, key=lambda c: (len(c), c))]
    near = difflib.get_close_matches(key, list(folded), n=1)
    return folded[near[0]] if near else None


def plain_key(key: str) -> str:
    """A ``--set`` key as its plain dotted path, read by the core as ``--set`` reads it: quoted segments are TOML
    keys (``"workload".kind``), and a quoted segment with dots names the nested key (``"workload.kind"``), as in a
    config file. A text that is not a key comes back as written (stripped), for the core to name the error."""
    plain = _core.plain_key(key)
    return key.strip() if plain is None else plain


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``1 run``, ``0 runs``, ``48 runs`` (regular nouns only)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
