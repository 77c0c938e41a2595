"""Small file helpers shared by the API, the CLI and the experiments."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# mkstemp creates files readable by their owner only; results are ordinary files, so they get the usual
# mode. Reading the umask means setting it: done once, at import, before any thread could race on it.
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def atomic_write(path: Path, write: Callable[[int], None]) -> None:
    """Create ``path`` through ``write(fd)`` so that readers see the old file or the whole new one, never a part.

    The temporary file lives in the target's directory (``os.replace`` is only atomic within one filesystem) and
    its name starts with a dot, which Parquet dataset readers skip. ``write`` must close ``fd``.

    An ``OSError`` (of the same type and errno) names ``path``, not the temporary file: ``"OUT: cannot write: Is a
    directory"``, not ``"[Errno 21] Is a directory: '.OUT.x1y2.tmp' -> 'OUT'"``.
    """
    _refuse_special(path)
    # A symbolic link is written through, as a shell's `>` would: os.replace would replace the link itself and
    # leave its target as it was. (A dangling link resolves to the file it names, which is then created.)
    target = Path(os.path.realpath(path)) if os.path.islink(path) else path
    made = not target.parent.exists()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            try:
                os.chmod(tmp, 0o666 & ~_UMASK)
                write(fd)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except BaseException:
            # A write stopped (a signal, a full disk) leaves no trace: not even the directory it made, which a
            # resumed sweep or experiment would take for a run that was started and stored nothing.
            if made:
                with contextlib.suppress(OSError):
                    target.parent.rmdir()
            raise
    except OSError as e:
        named = type(e)(f"{path}: cannot write: {e.strerror or e}")
        named.errno = e.errno  # not strerror: str() would then be "[Errno N] strerror", without the path
        raise named from e


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see ``atomic_write``)."""

    def write(fd: int) -> None:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)

    atomic_write(path, write)


def atomic_write_parquet(path: Path, df: pd.DataFrame) -> None:
    """Write ``df`` to ``path`` as Parquet, atomically (see ``atomic_write``); the index is not stored."""

    def write(fd: int) -> None:
        with os.fdopen(fd, "wb") as f:
            df.to_parquet(f, index=False)

    atomic_write(path, write)


def atomic_write_json(path: Path, obj: Any) -> None:
    """``atomic_write_text`` of ``obj`` as indented JSON with a trailing newline."""
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def _refuse_special(path: Path) -> None:
    """Refuse an existing ``path`` that is neither a regular file nor a directory (a device such as /dev/null, a
    FIFO, a socket): ``atomic_write`` renames its temporary file over the path, which would replace the node itself
    (run as root, ``--timeline /dev/null`` left a regular file at /dev/null)."""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise OSError(
            f"{path}: cannot write: not a regular file (a device, FIFO or socket would be replaced by the output)"
        )


def check_output_file(out: Path, *, make_parents: bool = False) -> None:
    """Refuse an output file that cannot be created, before any work, as an OSError naming it (exit code 1 in the
    CLI, like `run`'s OUT; its subclass by the reason): a directory, a missing or read-only directory above it.

    With ``make_parents`` the writer creates the missing directories above ``out``: the nearest existing one
    must then be a writable directory. An existing ``out`` that is not a regular file (a device, a FIFO) is
    refused too: the writers rename a temporary file over it."""
    _refuse_special(out)
    parent = out.parent if str(out.parent) else Path(".")
    if make_parents:
        while not parent.exists() and parent.parent != parent:
            parent = parent.parent
    why = (
        errno.EISDIR
        if out.is_dir()
        else errno.ENOTDIR
        if parent.exists() and not parent.is_dir()
        else errno.ENOENT
        if not parent.is_dir()
        else errno.EACCES
        if not os.access(parent, os.W_OK)
        else 0
    )
    if why:
        kind = {errno.EISDIR: IsADirectoryError, errno.ENOTDIR: NotADirectoryError, errno.ENOENT: FileNotFoundError}
        raise kind.get(why, PermissionError)(f"{out}: cannot write: {os.strerror(why)}")


def check_output_dir(out: Path) -> None:
    """Refuse an output directory (``-o``) that cannot be made or written, before any work, as an OSError naming
    it (exit code 1, as for an output file): a file where the directory or one above it should be, or a
    directory without write permission. The missing directories are made later, by the command."""
    existing = out
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing == out and not out.is_dir():
        why = "it is a file, not a directory"
    elif not existing.is_dir():
        why = f"`{existing}` is a file, not a directory"
    elif not os.access(existing, os.W_OK | os.X_OK):
        why = os.strerror(errno.EACCES)
    else:
        return
    raise OSError(f"{out}: cannot write the output directory: {why}")


class InputError(OSError):
    """A file the user gave as input (config, preset, sweep spec, trace, markdown target, run or sweep directory)
    cannot be read. Bad input, exit code 2 in the CLI, unlike an output that cannot be written (exit code 1): a
    dedicated type, so that the CLI need not guess from the errno which of the two an ``OSError`` was. The message
    names the file; the ``OSError`` it comes from is its ``__cause__``."""


class MissingInputError(InputError, FileNotFoundError):
    """An input that does not exist, or is a directory where a file is expected (a ``FileNotFoundError`` too, as
    the API has always raised for a missing config file or run directory)."""


@contextlib.contextmanager
def reading_input(path: str | os.PathLike[str], what: str) -> Iterator[None]:
    """Turn an ``OSError`` raised in the block into an ``InputError`` naming ``what`` and ``path`` (e.g. "config
    file", "trace"); the file the error names, when it is another one (a table of a run directory), is named too."""
    try:
        yield
    except InputError:
        raise
    except OSError as e:
        name = f"{what} `{os.fspath(path)}`"
        if e.filename is not None and os.fspath(e.filename) != os.fspath(path):
            name += f" (`{os.fspath(e.filename)}`)"
        if isinstance(e, FileNotFoundError):
            raise MissingInputError(f"{name} does not exist") from e
        if isinstance(e, IsADirectoryError):
            raise MissingInputError(f"{name} is a directory, not a file") from e
        raise InputError(f"{name} cannot be read: {e.strerror or e}") from e


def refuse_pipe(path: Path, what: str) -> None:
    """Refuse an input that is read more than once (a trace: its format told by its first bytes, then read by the
    core) when it is a pipe or FIFO (``<(zcat t.csv.gz)``): the first reader took what the next one needed, and
    opening a FIFO that nobody writes waited forever. ``InputError`` naming it, decided from its type, unopened."""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise InputError(
            f"{what} `{os.fspath(path)}` is not a regular file (a pipe or FIFO?): it is read more than once; "
            "save it to a file first"
        )


def read_input_text(path: Path, what: str) -> str:
    """The UTF-8 text of an input file (see ``reading_input``); ``ConfigError`` when it is not UTF-8."""
    from uvmsim._core import ConfigError

    try:
        with reading_input(path, what):
            return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not a UTF-8 text file ({e.reason} at byte {e.start})") from None


def read_toml_text(path: Path, what: str) -> str:
    """The text of a TOML file the user named (``what``: "config file", "sweep spec"): a clear error naming the
    file when it is missing, a directory, unreadable (``InputError``) or not UTF-8 (``ConfigError``)."""
    return read_input_text(path, what)


# --- no output over an input ---------------------------------------------------------------------------------

#: The files a command or call reads, as ``(what, path)``: ``("the config file", Path("c.toml"))``.
Inputs = Sequence[tuple[str, Path]]


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Are ``a`` and ``b`` one existing file: the same path, another spelling of it, a symbolic or a hard link to
    it (the same device and inode, as ``trace convert``'s check in the core)?"""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


# Bound on the kernelslist.g read to find its kernel files (a real one is a few KB).
_KERNELSLIST_MAX_BYTES = 16 << 20


def kernel_files(kernelslist: Path) -> list[Path]:
    """The kernel files an Accel-Sim ``kernelslist.g`` names (its `kernel...` lines, beside it, as accelsim.rs
    reads them); none if it cannot be read (its reader reports that), or is not a regular file (a FIFO: reading
    it here would wait for a writer, or take what the reader needs)."""
    try:
        if not kernelslist.is_file() or kernelslist.stat().st_size > _KERNELSLIST_MAX_BYTES:
            return []
        text = kernelslist.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    names = (line.strip() for line in text.splitlines())
    return [kernelslist.parent / n for n in names if n.startswith("kernel")]


def inputs_of(
    config: str | os.PathLike[str] | Mapping[str, Any] | None,
    preset: str | os.PathLike[str] | None,
    cfg: Mapping[str, Any] | None,
    traces: Sequence[str | os.PathLike[str]] = (),
) -> list[tuple[str, Path]]:
    """The files a command reads, as ``(what, path)``: the config file (not a dict config), the preset's file, the
    ``traces`` given explicitly and those the resolved config ``cfg`` replays (the workload's, and each of
    ``multi.apps``), and an Accel-Sim trace's kernel files. A preset that cannot be found adds nothing (its reader
    reports it)."""
    import uvmsim  # here: this module is imported by uvmsim itself
    from uvmsim import presets
    from uvmsim._core import ConfigError

    inputs: list[tuple[str, Path]] = []
    if config is not None and not isinstance(config, Mapping):
        inputs.append(("the config file", Path(config)))
    if preset is not None:
        with contextlib.suppress(ConfigError, OSError):
            inputs.append(("the preset file", presets.find_preset(preset)))
    paths = [("the trace", Path(t)) for t in traces]
    if cfg is not None:
        workload = cfg.get("workload", {})
        for kind in [workload.get("kind"), *cfg.get("multi", {}).get("apps", [])]:
            section = uvmsim._TRACE_SECTIONS.get(kind)
            path = workload.get(section, {}).get("path") if section else None
            if path:
                paths.append(("the trace", Path(path)))
    for what, t in paths:
        inputs.append((what, t))
        if os.fspath(t).endswith(".g"):  # accelsim.rs is_kernelslist: by name
            inputs += [(f"a kernel file of the trace `{t}`", k) for k in kernel_files(t)]
    return inputs


def refuse_input(out: str | os.PathLike[str], inputs: Inputs, reader: str = "this command") -> None:
    """Refuse, as ``ConfigError`` (bad input: exit code 2 in the CLI), an output file ``out`` that is one of the
    ``inputs`` of ``reader`` (a command, or an API call): writing it would destroy the input (as ``trace convert IN
    IN`` is refused)."""
    from uvmsim._core import ConfigError

    for what, path in inputs:
        if same_file(out, path):
            same = "" if os.fspath(out) == os.fspath(path) else f" `{path}`"
            raise ConfigError(
                f"`{os.fspath(out)}` is {what}{same} of {reader}: writing it would destroy its input; "
                "choose another path"
            )


def refuse_input_in_dir(
    out: str | os.PathLike[str], inputs: Inputs, writes: Callable[[str], bool], reader: str = "this command"
) -> None:
    """Refuse (``ConfigError``) an output directory ``out`` that is one of ``inputs`` or holds one under a name the
    command writes there (``writes(name)``)."""
    from uvmsim._core import ConfigError

    refuse_input(out, inputs, reader)
    for what, path in inputs:
        real = Path(os.path.realpath(path))
        if writes(real.name) and same_file(real.parent, out):
            raise ConfigError(
                f"`{os.fspath(out)}` would replace {what} `{path}`: {reader} writes {Path(out) / real.name}; "
                "choose another directory"
            )


# The formats trace record and convert write, and the names that promise the other one.
CSV_TEXT = "CSV text"
BINARY = "a binary .uvmt trace"


def trace_format_of_name(path: Path) -> str | None:
    """The trace format ``path``'s name promises: CSV for .csv (and any .gz or .zst, compressed CSV being the only
    compressed trace), binary for .uvmt; None for another name."""
    name = path.name.lower()
    if name.endswith((".csv", ".gz", ".zst")):
        return CSV_TEXT
    if name.endswith(".uvmt"):
        return BINARY
    return None


def check_trace_name(out: Path, writes: str, why: str) -> None:
    """Refuse (``ConfigError``) an output trace whose name says another format than the ``writes`` that goes into it,
    as a replay or a reader guided by the name would be misled: ``why`` says where the format comes from."""
    from uvmsim._core import ConfigError

    named = trace_format_of_name(out)
    if named is not None and named != writes:
        example = out.with_name(out.name.split(".")[0] + (".uvmt" if writes == BINARY else ".csv"))
        raise ConfigError(f"`{out}` names {named}, but {why}: give an output such as `{example}`")
    if writes == CSV_TEXT and out.name.lower().endswith(".zst"):
        raise ConfigError(
            f"`{out}` names zstd-compressed CSV, but convert writes plain CSV, or gzip when the output ends in .gz "
            "(zstd is read, not written)"
        )


# A file of more than this is not taken for a config (a config is a few KB; a trace may be GBs).
_CONFIG_MAX_BYTES = 1 << 20


def looks_like_config(path: Path) -> bool:
    """Is ``path`` an existing file holding a non-empty TOML table, as a config file does (a trace never does)?"""
    import tomllib

    try:
        if not path.is_file() or path.stat().st_size > _CONFIG_MAX_BYTES:
            return False
        return bool(tomllib.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False


def check_record_out(out: Path, fix: str) -> None:
    """Refuse (``ConfigError``) an output of a trace recording that is a config file, by its .toml name or its
    content (the CLI's ``trace record my.toml``, OUT forgotten, took the config for OUT and replaced it), or that is
    named for CSV (a recording is a binary .uvmt). ``fix`` says how to give the output instead."""
    from uvmsim._core import ConfigError

    if out.suffix.lower() == ".toml" or looks_like_config(out):
        what = "ends in .toml" if out.suffix.lower() == ".toml" else "is a TOML file"
        raise ConfigError(f"`{out}` {what}, like a config file, but it would receive the binary trace; {fix}")
    check_trace_name(out, BINARY, "a recording is a binary .uvmt trace")
