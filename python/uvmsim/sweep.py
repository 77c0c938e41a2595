"""Sweeps: many runs over one base configuration, stored as a Parquet dataset as they finish.

A spec is a TOML file (or, for ``run_sweep``, a dict of the same tables)::

    preset = "titan-v"            # the base: a preset, a config file (relative to the spec) and/or a [set] table
    config = "base.toml"
    [set]
    "workload.kind" = "regular"

    [grid]                        # either a grid: the cartesian product of its axes (dotted key -> values) ...
    "uvm.batch_size" = [64, 256]
    "uvm.replay_policy" = ["batch", "once"]

    # [[runs]]                    # ... or an explicit list of runs, each a table of overrides
    # "uvm.batch_size" = 64

Each run's overrides are laid over the base. A run's id is a hash of its overrides, so it is the same in every
sweep of the same spec; its result is written atomically to ``DIR/runs/<id>.parquet`` (one row: ``run_id``,
``status`` ``ok``/``failed``, ``error``, one ``set.<key>`` column per override, one column per metric,
``config`` (the resolved config as JSON), ``version``, ``finished_unix_s``) by the driver process as soon as the
run ends. ``DIR/sweep.json`` records the base and the runs. ``resume=True`` skips the runs whose file says ``ok``
and runs the others again, so an interrupted sweep loses no finished run and repeats none.

Engines: ``local`` (a process pool on this machine) and ``ray`` (one Ray task per run, on a cluster or on a
local Ray instance). The simulator is deterministic, so both give the same metrics.
"""

from __future__ import annotations

import concurrent.futures as cf
import fcntl
import hashlib
import itertools
import json
import math
import multiprocessing
import numbers
import os
import signal
import sys
import time
import tomllib
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import uvmsim
from uvmsim import _core
from uvmsim._core import ConfigError
from uvmsim._files import (
    MissingInputError,
    atomic_write,
    atomic_write_json,
    check_output_dir,
    inputs_of,
    read_toml_text,
    reading_input,
    refuse_input_in_dir,
)
from uvmsim._names import counted, nearest
from uvmsim._signals import signal_of, sigterm_as_interrupt, stop_signals_deferred

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ENGINES",
    "RunSpec",
    "SweepInterrupted",
    "SweepSpec",
    "SweepSummary",
    "execute",
    "load_spec",
    "load_sweep",
    "run_sweep",
]

ENGINES = ("local", "ray")
SPEC_KEYS = ("preset", "config", "set", "grid", "runs")
DICT_SPEC = "<dict spec>"  # the name messages give a spec passed to run_sweep as a dict
SWEEP_FILE = "sweep.json"
RUNS_DIR = "runs"
LOCK_FILE = ".lock"
SET_PREFIX = "set."  # column prefix of a run's overrides: `sim.seed` is both a config key and a metric
# Leading columns of a run's row, in this order; then the overrides, the metrics, and these trailing ones.
HEAD_COLUMNS = ("run_id", "status", "error")
TAIL_COLUMNS = ("version", "finished_unix_s", "config")

Scalar = bool | int | float | str
Row = dict[str, Any]


class SweepInterrupted(Exception):
    """The sweep stopped on SIGINT or SIGTERM; every run that had finished is stored. ``stored``: how many runs
    this sweep stored before it stopped; ``failed``: the rows of those that failed."""

    def __init__(self, signum: int, stored: int, failed: Sequence[Row] = ()) -> None:
        self.signum = signum
        self.stored = stored
        self.failed = list(failed)
        of_which = f" ({len(self.failed)} failed)" if self.failed else ""
        super().__init__(
            f"interrupted by {signal.Signals(signum).name} after storing {counted(stored, 'run')}{of_which}"
        )


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: its id and its overrides (dotted key -> value), laid over the base."""

    id: str
    overrides: dict[str, Scalar]


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep spec: the base (``preset``, ``config`` file, ``set`` table), the axes and the runs."""

    path: Path | None
    preset: str | None
    config: Path | None
    set: dict[str, Scalar]
    axes: list[str]
    runs: list[RunSpec]

    def sources(self) -> list[tuple[str, str, bool]]:
        """The base's ``(name, toml_text)`` layers, read once so that workers need no access to these files."""
        return uvmsim.sources(self.config, self.preset)

    def base_overrides(self) -> list[str]:
        return uvmsim.overrides(self.set)


@dataclass
class SweepSummary:
    """What ``run_sweep`` did: runs in the spec, skipped (already ok), run now, of which ok and failed."""

    total: int
    skipped: int = 0
    ok: int = 0
    failed: list[Row] = field(default_factory=list)

    @property
    def ran(self) -> int:
        return self.ok + len(self.failed)


def run_id(overrides: Mapping[str, Scalar]) -> str:
    """The stable id of a run: a hash of its overrides (key order does not matter; ``1`` and ``1.0`` differ)."""
    canonical = json.dumps(dict(sorted(overrides.items())), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# --- the spec -----------------------------------------------------------------------------------------------


def _known_keys() -> list[str]:
    return [p["key"] for p in uvmsim.config_reference()]


def _check_key(where: str, key: str, known: Sequence[str]) -> None:
    if key in known:
        return
    near = nearest(key, known)
    hint = f"; did you mean `{near}`?" if near else "; `uvmsim config` lists the keys"
    raise ConfigError(f"{where}: unknown config key `{key}`{hint}")


def _check_value(where: str, key: str, value: Any) -> Scalar:
    # NumPy numbers (values from a DataFrame or np.linspace) become plain ones: ids, rows and sweep.json hold those.
    value = uvmsim.plain_scalar(value)
    if isinstance(value, bool | int | float | str):
        return value
    what = "a table" if isinstance(value, Mapping) else type(value).__name__
    raise ConfigError(f"{where}: `{key}` must be a number, a boolean or a string, got {what}")


def _written_form(path: Sequence[str]) -> str:
    """A key path as TOML writes it: segments other than bare keys quoted (``"uvm.batch_size"``, ``uvm.batch_size``)."""
    return ".".join(
        p if p and all(c.isascii() and (c.isalnum() or c in "_-") for c in p) else json.dumps(p) for p in path
    )


def _leaves(table: Mapping[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for k, v in table.items():
        if isinstance(v, Mapping):
            yield from _leaves(v, (*path, str(k)))
        else:
            yield (*path, str(k)), v


def _flat_table(where: str, table: Any, known: Sequence[str]) -> dict[str, Any]:
    """A TOML table of overrides as dotted key -> value (``a.b = 1`` and ``"a.b" = 1`` are the same key, so a table
    giving both is an error, as TOML makes a repeated unquoted key: one of the values would be lost)."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: expected a table of `key.path = value` entries, got {type(table).__name__}")
    flat: dict[str, Any] = {}
    forms: dict[str, str] = {}
    for path, value in _leaves(table):
        key, form = ".".join(path), _written_form(path)
        if key in flat:
            raise ConfigError(
                f"{where}: key `{key}` given twice, as `{forms[key]}` and as `{form}` (a quoted dotted key is the "
                "same key); give it once"
            )
        flat[key], forms[key] = value, form
    for key in flat:
        _check_key(where, key, known)
    return flat


def parse_spec(raw: Mapping[str, Any], name: str, base_dir: Path | None = None) -> SweepSpec:
    """A ``SweepSpec`` from a parsed spec table; ``name`` is used in messages, ``config`` is relative to
    ``base_dir``. Raises ``ConfigError`` naming the spec and the key for anything malformed."""
    for key in raw:
        if key not in SPEC_KEYS:
            near = nearest(key, SPEC_KEYS)
            hint = f"did you mean `{near}`? " if near else ""
            raise ConfigError(f"{name}: unknown key `{key}`; {hint}accepted: {', '.join(SPEC_KEYS)}")
    known = _known_keys()
    preset = raw.get("preset")
    if preset is not None and not isinstance(preset, str):
        raise ConfigError(f"{name}: `preset` must be a preset name or a path to a preset .toml file")
    config = raw.get("config")
    if config is not None:
        if not isinstance(config, str):
            raise ConfigError(f"{name}: `config` must be the path of a TOML config file")
        config = (base_dir or Path.cwd()) / config
    base_flat = _flat_table(f"{name}: [set]", raw.get("set", {}), known)
    base_set = {k: _check_value(f"{name}: [set]", k, v) for k, v in base_flat.items()}

    if ("grid" in raw) == ("runs" in raw):
        raise ConfigError(f"{name}: give either a [grid] table or a [[runs]] list (not both, not neither)")
    runs: list[dict[str, Scalar]] = []
    axes: list[str] = []
    if "grid" in raw:
        grid = _flat_table(f"{name}: [grid]", raw["grid"], known)
        if not grid:
            raise ConfigError(f"{name}: [grid] has no axes; give at least one `key.path = [values]`")
        for key, values in grid.items():
            where = f"{name}: [grid] `{key}`"
            if not isinstance(values, list | tuple | str) and callable(getattr(values, "tolist", None)):
                values = values.tolist()  # a NumPy array or pandas Series of values (np.linspace, .unique())
            if not isinstance(values, list | tuple) or not len(values):
                raise ConfigError(f"{where}: an axis must be a non-empty list of values, e.g. `{key} = [1, 2]`")
            values = grid[key] = [_check_value(f"{name}: [grid]", key, v) for v in values]
            seen: set[str] = set()
            for v in values:
                canon = json.dumps(v)
                if canon in seen:
                    raise ConfigError(f"{where}: lists the value {uvmsim.toml_value(v)} twice")
                seen.add(canon)
        axes = list(grid)
        runs = [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*grid.values())]
    else:
        entries = raw["runs"]
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f"{name}: `runs` must be a non-empty list of tables: [[runs]] entries")
        for i, entry in enumerate(entries):
            where = f"{name}: [[runs]] #{i + 1}"
            flat = _flat_table(where, entry, known)
            runs.append({k: _check_value(where, k, v) for k, v in flat.items()})
            axes.extend(k for k in flat if k not in axes)

    specs: list[RunSpec] = []
    first: dict[str, int] = {}
    for i, overrides in enumerate(runs):
        rid = run_id(overrides)
        if rid in first:  # only an explicit list can repeat a run; a grid's values are distinct
            raise ConfigError(f"{name}: [[runs]] #{i + 1} repeats run #{first[rid] + 1} (the same overrides)")
        first[rid] = i
        specs.append(RunSpec(rid, overrides))
    return SweepSpec(path=None, preset=preset, config=config, set=base_set, axes=axes, runs=specs)


def load_spec(path: str | os.PathLike[str]) -> SweepSpec:
    """Parse the sweep spec file at ``path`` (see the module doc); ``ConfigError`` names the file and the key."""
    p = Path(path)
    text = read_toml_text(p, "sweep spec")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    spec = parse_spec(raw, str(p), p.parent)
    return SweepSpec(path=p, preset=spec.preset, config=spec.config, set=spec.set, axes=spec.axes, runs=spec.runs)


# --- one run ------------------------------------------------------------------------------------------------


def execute(sources: list[tuple[str, str, bool]], base: list[str], run: RunSpec) -> Row:
    """Simulate one run and return its row; any failure becomes a ``failed`` row, never an exception.

    Takes the base as loaded text (``SweepSpec.sources``) so that it runs unchanged in a pool worker or on a
    Ray node. Must stay a module-level function: both engines ship it to other processes by reference.
    """
    row: Row = {"run_id": run.id, "status": "ok", "error": None}
    row.update({SET_PREFIX + k: v for k, v in run.overrides.items()})
    overrides = base + uvmsim.overrides(run.overrides)
    config: dict[str, Any] | None = None
    metrics: dict[str, float | int] = {}
    try:
        raw = json.loads(_core.run(sources, overrides))
        metrics, config = raw["metrics"], raw["config"]
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # a failed run is data, not a crash of the sweep (a panic is a BaseException)
        kind = "simulation failed: " if isinstance(e, uvmsim.SimulationError) else ""
        if not isinstance(e, Exception):
            kind = f"internal error: {type(e).__name__}: "
        row.update(status="failed", error=kind + _strip_set(str(e) or type(e).__name__))
        try:  # a run that failed to simulate still records the config it used, when there was one
            config = json.loads(_core.resolve(sources, overrides))
        except Exception:
            config = None
    row.update(metrics)
    row.update(
        version=uvmsim.__version__,
        finished_unix_s=time.time(),
        config=None if config is None else json.dumps(config),
    )
    return row


def _failed_row(run: RunSpec, error: str) -> Row:
    """The row of a run whose worker never returned (it died, or the engine lost it)."""
    return {
        "run_id": run.id,
        "status": "failed",
        "error": error,
        **{SET_PREFIX + k: v for k, v in run.overrides.items()},
        "version": uvmsim.__version__,
        "finished_unix_s": time.time(),
        "config": None,
    }


# --- the store ----------------------------------------------------------------------------------------------


def run_path(out: Path, rid: str) -> Path:
    return out / RUNS_DIR / f"{rid}.parquet"


def write_row(out: Path, row: Row) -> None:
    """Store one run's row as ``out/runs/<id>.parquet``, atomically: a reader sees the whole file or none."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([row])

    def write(fd: int) -> None:
        with os.fdopen(fd, "wb") as f:
            pq.write_table(table, f)

    atomic_write(run_path(out, row["run_id"]), write)


def _status(path: Path) -> str | None:
    """The stored status of a run file, or None if it is missing or unreadable (then the run is done again)."""
    import pyarrow.parquet as pq

    try:
        return str(pq.read_table(path, columns=["status"]).column("status")[0].as_py())
    except (OSError, ValueError, KeyError, IndexError):
        return None


def load_sweep(directory: str | os.PathLike[str]) -> pd.DataFrame:
    """Every stored run of the sweep in ``directory`` as one DataFrame, one row per run.

    Columns: ``run_id``, ``status``, ``error``, ``set.<key>`` per override, one per metric (NaN for failed
    runs), ``version``, ``finished_unix_s``, ``config`` (JSON). Rows follow the order of ``sweep.json``'s runs;
    runs stored by an earlier spec of the same base follow, by id. A damaged run file raises ``ConfigError``
    naming it.
    """
    import pandas as pd
    import pyarrow.parquet as pq

    d = Path(directory)
    runs_dir = d / RUNS_DIR
    if not runs_dir.is_dir():
        what = "does not exist" if not d.exists() else f"is not a sweep directory: it has no {RUNS_DIR}/"
        raise MissingInputError(f"`{d}` {what}")
    # Dot files are temporaries of writes in progress (or of a killed sweep): never results.
    files = sorted(p for p in runs_dir.glob("*.parquet") if not p.name.startswith(".") and p.is_file())
    frames = []
    with reading_input(d, "sweep"):
        for p in files:
            try:
                frames.append(pq.read_table(p).to_pandas())
            except OSError:
                raise
            except Exception as e:  # pyarrow's ArrowInvalid and kin: a damaged file, not a bug
                raise ConfigError(
                    f"{p}: not a readable Parquet table ({e}); `uvmsim sweep SPEC -o {d} --resume` runs it again"
                ) from None
    if not frames:
        return pd.DataFrame(columns=[*HEAD_COLUMNS, *TAIL_COLUMNS])
    df = pd.concat(frames, ignore_index=True)  # pandas, not Arrow: a column's type may differ between runs
    order = {rid: i for i, rid in enumerate(_recorded_run_ids(d))}
    df = df.iloc[sorted(range(len(df)), key=lambda i: (order.get(df.at[i, "run_id"], math.inf), df.at[i, "run_id"]))]
    sets = [c for c in df.columns if c.startswith(SET_PREFIX)]
    axes = [SET_PREFIX + a for a in _recorded_axes(d)]
    sets = [c for c in axes if c in sets] + [c for c in sets if c not in axes]
    fixed = {*HEAD_COLUMNS, *TAIL_COLUMNS, *sets}
    metrics = [c for c in df.columns if c not in fixed]
    return df[[*HEAD_COLUMNS, *sets, *metrics, *TAIL_COLUMNS]].reset_index(drop=True)


def _sweep_record(d: Path) -> dict[str, Any]:
    """``d/sweep.json``, or ``{}`` when it is missing or damaged (only the order of runs and axes comes from it)."""
    try:
        record = json.loads((d / SWEEP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _recorded_run_ids(d: Path) -> list[str]:
    runs = _sweep_record(d).get("runs")
    if not isinstance(runs, list):
        return []
    return [r["id"] for r in runs if isinstance(r, dict) and isinstance(r.get("id"), str)]


def _recorded_axes(d: Path) -> list[str]:
    axes = _sweep_record(d).get("axes")
    return [a for a in axes if isinstance(a, str)] if isinstance(axes, list) else []


def sweep_axes(directory: str | os.PathLike[str]) -> list[str]:
    """The axes (override keys) of the sweep in ``directory``, in spec order."""
    return _recorded_axes(Path(directory))


@contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold ``out/.lock`` for the sweep: two sweeps writing one directory would each skip the other's runs."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / LOCK_FILE, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"`{out}` is in use by another sweep; wait for it or choose another -o DIR") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _first_difference(a: Any, b: Any, prefix: str = "") -> str:
    """The first key whose values differ, with both values (each cut to 100 characters: a damaged sweep.json
    may hold anything where a table was, and the whole config is hundreds of lines)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(a.keys() | b.keys()):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else k)

    def show(v: Any) -> str:
        text = json.dumps(v)
        return text if len(text) <= 100 else text[:99] + "…"

    return f"`{prefix or 'base_config'}`: {show(a)} there, {show(b)} now"


def _base_config(spec: SweepSpec) -> dict[str, Any]:
    """The resolved base config; ``ConfigError`` naming the spec if it is invalid."""
    name = str(spec.path) if spec.path else "sweep spec"
    try:
        return json.loads(_core.resolve(spec.sources(), spec.base_overrides()))
    except ConfigError as e:
        raise ConfigError(f"{name}: the base config is invalid: {_strip_set(str(e), '[set] ', '[set]')}") from None


def _strip_set(message: str, replacement: str = "", source: str = "the spec's [set] or this run") -> str:
    # The core names `--set` as the source of overrides; in a sweep they come from the spec's [set] or a run.
    message = replacement + message[len("--set: ") :] if message.startswith("--set: ") else message
    return message.replace(" from --set)", f" from {source})")


def _prepare(spec: SweepSpec, base_config: dict[str, Any], out: Path, resume: bool) -> list[RunSpec]:
    """Check the directory, record the sweep, and return the runs still to do."""
    runs_dir = out / RUNS_DIR
    stored = {p.stem for p in runs_dir.glob("*.parquet") if not p.name.startswith(".")} if runs_dir.is_dir() else set()
    if stored and not resume:
        raise ConfigError(
            f"`{out}` already holds a sweep ({counted(len(stored), 'run')}); pass --resume to continue it"
        )
    previous = _sweep_record(out)
    if resume and previous.get("base_config") not in (None, base_config):
        diff = _first_difference(previous["base_config"], base_config)
        raise ConfigError(f"`{out}` holds a sweep of another base config ({diff}); use another -o DIR")
    if runs_dir.is_dir():  # temporaries of a sweep killed mid-write; we hold the lock, so nobody is writing
        for tmp in runs_dir.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
    atomic_write_json(
        out / SWEEP_FILE,
        {
            "version": uvmsim.__version__,
            "spec": None if spec.path is None else str(spec.path),
            "preset": spec.preset,
            "config": None if spec.config is None else str(spec.config),
            "set": spec.set,
            "base_config": base_config,
            "axes": spec.axes,
            "runs": [{"id": r.id, "overrides": r.overrides} for r in spec.runs],
        },
    )
    return [r for r in spec.runs if r.id not in stored or _status(run_path(out, r.id)) != "ok"]


# --- engines ------------------------------------------------------------------------------------------------

Engine = Callable[
    [list[tuple[str, str, bool]], list[str], list[RunSpec], int | None, str | None], Generator[Row, None, None]
]


def _worker_init() -> None:
    # Ctrl-C reaches the whole process group; only the driver acts on it (it stops the workers itself).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # A driver killed outright (SIGKILL, OOM killer) cannot stop its workers, and they would wait for work
    # forever. On Linux, ask the kernel to end each worker with its parent, the driver.
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        parent = os.getppid()
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)


@contextmanager
def worker_pool(jobs: int | None) -> Iterator[cf.ProcessPoolExecutor]:
    """A process pool on this machine (``jobs`` workers, default one per CPU) whose runs in flight are stopped at
    once when the body is left by an exception (Ctrl-C) or the generator using it is closed."""
    # spawn: fresh interpreters, children of the driver. Not fork: the driver may hold threads (a notebook);
    # not forkserver: its workers keep it alive and outlive a driver killed with SIGKILL.
    pool = cf.ProcessPoolExecutor(
        max_workers=jobs or os.cpu_count() or 1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_worker_init,
    )
    done = False
    try:
        yield pool
        done = True
    finally:
        if not done:  # interrupted: stop the runs in flight now rather than wait for them
            terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
            if terminate is not None:
                terminate()
            else:  # before 3.14 the pool has no public way to stop its workers
                workers = list((getattr(pool, "_processes", None) or {}).values())
                # shutdown(wait=False) forgets its management thread without joining it; one still
                # running at interpreter exit races concurrent.futures' atexit hook, which then
                # prints "Exception ignored ... Bad file descriptor" after our one-line message.
                manager = getattr(pool, "_executor_manager_thread", None)
                pool.shutdown(wait=False, cancel_futures=True)
                for proc in workers:
                    proc.terminate()
                if manager is not None:
                    manager.join(timeout=30)  # it ends once it sees the workers gone
        pool.shutdown(wait=True)


UNGUARDED = (
    "sweep worker processes import the program that started the sweep again, so a program that calls run_sweep "
    'must call it under `if __name__ == "__main__":`'
)


def _main_is_a_file() -> bool:
    """Whether spawned workers run this program's ``__main__`` file again (not a module, ``python -m``)."""
    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", None)
    return main is not None and spec_name is None and getattr(main, "__file__", None) is not None


def main_importable() -> bool:
    """Whether spawned workers can set up this program's ``__main__``: spawn imports it again by module name
    (``python -m``) or runs its file; a program read from stdin (``python - <<EOF``: ``__file__`` is
    ``"<stdin>"``) has neither, and every worker dies starting. With no ``__file__`` at all (an interactive
    interpreter, ``python -c``, a notebook) the workers import nothing of it, which works."""
    main = sys.modules.get("__main__")
    if main is None or getattr(getattr(main, "__spec__", None), "name", None) is not None:
        return True
    path = getattr(main, "__file__", None)
    # ORIGINAL_DIR (the working directory when multiprocessing was imported) is undocumented: read with getattr.
    return path is None or os.path.isfile(
        os.path.join(getattr(multiprocessing.process, "ORIGINAL_DIR", None) or "", path)
    )


def _local_engine(
    sources: list[tuple[str, str, bool]], base: list[str], runs: list[RunSpec], jobs: int | None, address: str | None
) -> Generator[Row, None, None]:
    """A process pool on this machine; yields each run's row as it finishes. When workers could not start
    (``main_importable``), the runs go one at a time in this process instead of all failing."""
    if not main_importable():
        if (jobs or os.cpu_count() or 1) > 1 and len(runs) > 1:
            main_file = getattr(sys.modules["__main__"], "__file__", "?")
            print(
                f"uvmsim: warning: worker processes cannot start from a program without a file (`{main_file}`); "
                f"running the {counted(len(runs), 'run')} one at a time in this process (save the program to a file "
                "to run them in parallel)",
                file=sys.stderr,
            )
        for r in runs:
            yield execute(sources, base, r)
        return
    with worker_pool(jobs) as pool:
        futures = {pool.submit(execute, sources, base, r): r for r in runs}
        for fut in cf.as_completed(futures):
            try:
                yield fut.result()
            except BrokenProcessPool as e:  # a worker died (killed, out of memory): every run then fails
                hint = f" ({UNGUARDED})" if _main_is_a_file() else ""
                yield _failed_row(futures[fut], f"worker process died: {e}{hint}")


def _ray_engine(
    sources: list[tuple[str, str, bool]], base: list[str], runs: list[RunSpec], jobs: int | None, address: str | None
) -> Generator[Row, None, None]:
    """One Ray task per run; the driver yields (and so stores) each row as its task completes."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--engine ray needs Ray: pip install 'uvmsim[ray]'") from None
    import logging

    started = not ray.is_initialized()
    if started:
        # Without an address Ray starts a local instance (or joins the one RAY_ADDRESS names).
        cpus = (jobs or os.cpu_count() or 1) if address is None else None
        ray.init(address=address, num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
    task = ray.remote(num_cpus=1, max_retries=0)(execute)
    sources_ref = ray.put(sources)
    pending = {task.remote(sources_ref, base, r): r for r in runs}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                run = pending.pop(ref)
                try:
                    row = ray.get(ref)
                except ray.exceptions.RayError as e:  # the task's worker or node was lost
                    row = _failed_row(run, f"ray task failed: {e}")
                yield row
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


_ENGINES: dict[str, Engine] = {"local": _local_engine, "ray": _ray_engine}


def run_sweep(
    spec: SweepSpec | Mapping[str, Any] | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    resume: bool = False,
    engine: str = "local",
    jobs: int | None = None,
    address: str | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_result: Callable[[Row], None] | None = None,
) -> SweepSummary:
    """Run a sweep and store each run in ``out/runs/<id>.parquet`` as it finishes.

    Args:
        spec: a ``SweepSpec``, the path of a spec file, or a spec as a dict of the same tables as the file
            (``{"preset": "titan-v", "grid": {"uvm.batch_size": [64, 128]}}``; a ``config`` path in it is taken
            from the current directory; messages name it ``<dict spec>``).
        out: the sweep's directory (created if needed).
        resume: skip the runs already stored with status ``ok``; without it, ``out`` must hold no runs.
        engine: ``"local"`` (process pool) or ``"ray"``.
        jobs: local: worker processes (default: one per CPU); ray: CPUs of the local instance it starts.
        address: ray only: the cluster to join (default: start a local instance).
        on_start: called with ``(runs to do, runs skipped)`` before the first run.
        on_result: called with each run's row once it is stored.

    Raises:
        ConfigError: a bad spec, an invalid base config, ``out`` holding another sweep, or an ``out`` that is, or
            would overwrite, a file the sweep reads (the spec, its config file or preset file).
        OSError: ``out`` cannot be written (a file, or a directory without write permission).
        TypeError: ``spec`` is none of the accepted kinds, or ``jobs`` is not an integer.
        SweepInterrupted: SIGINT or SIGTERM; the runs stored so far are kept (its ``failed`` lists those that
            failed).
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        # A spawned worker imports the program that started the sweep (as multiprocessing's own check does, by
        # this flag): without this the worker ran a second sweep into the same directory and died on its lock.
        raise RuntimeError(UNGUARDED)
    if engine not in _ENGINES:
        raise ConfigError(f"unknown engine `{engine}`; available: {', '.join(ENGINES)}")
    if address is not None and engine != "ray":
        raise ConfigError("--address is for --engine ray")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, numbers.Integral)):
        raise TypeError(f"jobs must be a whole number of workers, not {type(jobs).__name__} {jobs!r}")
    if jobs is not None and jobs < 1:
        raise ConfigError(f"jobs must be at least 1, got {jobs}")
    if isinstance(spec, Mapping):
        spec = parse_spec(spec, DICT_SPEC)
    elif isinstance(spec, str | os.PathLike):
        spec = load_spec(spec)
    elif not isinstance(spec, SweepSpec):
        raise TypeError(f"spec must be a SweepSpec, the path of a spec file or a spec dict, not {type(spec).__name__}")
    outdir = Path(out)
    base_config = _base_config(spec)  # before making `out`: a bad base leaves no directory behind
    spec_file = [] if spec.path is None else [("the sweep spec", spec.path)]
    refuse_input_in_dir(outdir, [*spec_file, *inputs_of(spec.config, spec.preset, None)], _writes, "this sweep")
    check_output_dir(outdir)  # an OSError naming it, not mkdir's "File exists"
    with _locked(outdir):
        todo = _prepare(spec, base_config, outdir, resume)
        summary = SweepSummary(total=len(spec.runs), skipped=len(spec.runs) - len(todo))
        if on_start is not None:
            on_start(len(todo), summary.skipped)
        stored = 0
        rows = _ENGINES[engine](spec.sources(), spec.base_overrides(), todo, jobs, address)
        with sigterm_as_interrupt():  # SIGTERM stops the sweep as Ctrl-C does
            try:
                for row in rows:
                    # A signal between the file's rename and its count made the message one run short.
                    with stop_signals_deferred():
                        write_row(outdir, row)
                        stored += 1
                        if row["status"] == "ok":
                            summary.ok += 1
                        else:
                            summary.failed.append(row)
                    if on_result is not None:
                        on_result(row)
            except KeyboardInterrupt as e:
                raise SweepInterrupted(signal_of(e), stored, summary.failed) from None
            finally:
                rows.close()  # now, not at garbage collection: stops the engine's workers when interrupted
    return summary


def _writes(name: str) -> bool:
    """Is ``name`` a file a sweep writes over at the top of its directory (its lock file is only appended to)?"""
    return name == SWEEP_FILE


def describe_overrides(row: Mapping[str, Any]) -> str:
    """``key=value, ...`` of a row's overrides, for messages."""
    return ", ".join(
        f"{k[len(SET_PREFIX) :]}={uvmsim.toml_value(v)}" for k, v in row.items() if k.startswith(SET_PREFIX)
    )


class _CallableModule(ModuleType):
    """``uvmsim.sweep(spec, out, ...)`` runs a sweep (DESIGN.md's Python API); the module's other names stay."""

    def __call__(self, *args: Any, **kwargs: Any) -> SweepSummary:
        return run_sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
