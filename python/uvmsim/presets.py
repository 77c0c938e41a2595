"""System presets: TOML files describing one modelled machine each.

A preset is found by name in the directories of ``UVMSIM_PRESET_PATH``
(``os.pathsep``-separated, searched first so users can shadow a shipped
preset) and then in the package's ``data/presets``. Anything that names an
existing ``.toml`` file is taken as a path instead. The leading ``#`` comment
lines of a preset are its description; the first is its one-line summary.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from uvmsim._core import ConfigError
from uvmsim._files import read_input_text
from uvmsim._names import nearest

PRESET_PATH_ENV = "UVMSIM_PRESET_PATH"
BUILTIN_DIR = Path(__file__).parent / "data" / "presets"


@dataclass(frozen=True)
class PresetInfo:
    """One preset file: its name (file stem), description (comment header) and path."""

    name: str
    description: str
    path: Path
    # The files of the same name it hides (a preset of UVMSIM_PRESET_PATH named like a shipped one).
    shadows: tuple[Path, ...] = ()

    @property
    def summary(self) -> str:
        """The first line of the description."""
        return self.description.split("\n", 1)[0]


def search_dirs() -> list[Path]:
    """Directories searched for presets, highest priority first."""
    extra = [Path(p) for p in os.environ.get(PRESET_PATH_ENV, "").split(os.pathsep) if p]
    return [*extra, BUILTIN_DIR]


def header(text: str) -> str:
    """The leading block of ``#`` comment lines of a TOML text, without the ``#``."""
    lines: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("#"):
            if stripped or lines:
                break
            continue  # blank lines before the header
        lines.append(stripped.lstrip("#").strip())
    return "\n".join(lines).strip()


def _all() -> dict[str, list[Path]]:
    """Every preset file by name, in search order: the first is the one a name finds."""
    found: dict[str, list[Path]] = {}
    for d in search_dirs():
        if d.is_dir():
            for p in sorted(d.glob("*.toml")):
                found.setdefault(p.stem, []).append(p)
    return found


def _index() -> dict[str, Path]:
    return {name: paths[0] for name, paths in _all().items()}  # earlier directories shadow later ones


def list_presets() -> list[PresetInfo]:
    """Every available preset, sorted by name."""
    return [PresetInfo(name, header(_text(ps[0])), ps[0], tuple(ps[1:])) for name, ps in sorted(_all().items())]


def find_preset(name_or_path: str | os.PathLike[str]) -> Path:
    """The file a ``--preset`` argument refers to: a preset name or a path to a ``.toml`` file.

    Raises ``ConfigError`` naming the available presets (and the nearest one) when nothing matches.
    """
    arg = os.fspath(name_or_path)
    index = _index()
    if arg in index:
        return index[arg]
    as_path = Path(arg)
    if as_path.suffix == ".toml" or os.sep in arg or (os.altsep and os.altsep in arg):
        if as_path.is_file():
            return as_path
        if as_path.is_dir():  # was "does not exist", of a directory that does
            raise ConfigError(f"preset file `{arg}` is a directory, not a file")
        raise ConfigError(f"preset file `{arg}` does not exist")
    names = sorted(index)
    near = nearest(arg, names)
    hint = f"did you mean `{near}`? " if near else ""
    available = ", ".join(names) if names else "none found"
    raise ConfigError(f"unknown preset `{arg}`; {hint}available: {available}")


def load_preset(name_or_path: str | os.PathLike[str]) -> tuple[str, str]:
    """``(source_name, toml_text)`` of a preset, ready for ``_core.run``.

    The source name is what configuration errors are reported against:
    ``preset NAME`` for a named preset, the file path otherwise.
    """
    path = find_preset(name_or_path)
    text = _text(path)
    arg = os.fspath(name_or_path)
    source = f"preset {arg}" if arg == path.stem and not arg.endswith(".toml") else str(path)
    return source, text


def describe(name_or_path: str | os.PathLike[str]) -> PresetInfo:
    """The ``PresetInfo`` of one preset."""
    path = find_preset(name_or_path)
    found = _all().get(path.stem, [])
    # Only the files after it in the search order: the shipped file named by its path hides nothing.
    hidden = tuple(found[found.index(path) + 1 :]) if path in found else ()
    return PresetInfo(path.stem, header(_text(path)), path, hidden)


def _text(path: Path) -> str:
    # A preset the user cannot read (their own, in UVMSIM_PRESET_PATH) is bad input naming the file.
    return read_input_text(path, "preset file")
