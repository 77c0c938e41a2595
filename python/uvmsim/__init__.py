"""uvmsim: a fast event-level simulator of GPU virtual memory.

The simulator itself is Rust (``uvmsim._core``); this package configures runs
and reads their results::

    import uvmsim
    r = uvmsim.run(preset="kaveri-apu", set={"workload.stride.stride_bytes": 4096})
    r.metrics["gpu0.l2tlb.misses"]

A configuration is layered: the preset, then the user's config (a TOML file or
a dict), then ``set`` overrides (``key.path=value``); later layers win.

Sweeps over many configurations are in ``uvmsim.sweep`` and plots of runs and
sweeps in ``uvmsim.plot``; both are imported on first use (they pull in
pyarrow and matplotlib, which a single run does not need).
"""

from __future__ import annotations

import html
import importlib
import json
import math
import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from uvmsim import _core
from uvmsim._core import BudgetExceeded, ConfigError, SimulationError
from uvmsim._files import (
    BINARY,
    CSV_TEXT,
    InputError,
    MissingInputError,
    atomic_write_json,
    atomic_write_parquet,
    check_output_dir,
    check_record_out,
    check_trace_name,
    inputs_of,
    read_toml_text,
    reading_input,
    refuse_input,
    refuse_input_in_dir,
    refuse_pipe,
)
from uvmsim._names import nearest
from uvmsim.presets import list_presets, load_preset

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BudgetExceeded",
    "ConfigError",
    "InputError",
    "Result",
    "SimulationError",
    "WALL_CLOCK_METRICS",
    "__version__",
    "config_reference",
    "config_sections",
    "list_presets",
    "load",
    "plot",
    "resolve",
    "run",
    "sweep",
    "timeline",
    "trace_convert",
    "trace_info",
    "trace_record",
    "trace_workload",
    "workloads",
]

__version__: str = _core.__version__

#: Metrics that measure the host machine (wall-clock time and rates), not the simulated system: they
#: differ between otherwise identical runs, and determinism checks leave them out.
WALL_CLOCK_METRICS: frozenset[str] = frozenset(_core.WALL_CLOCK_METRICS)

SUMMARY_FILE = "summary.json"
#: The record tables a run can keep, from the core (api.rs `TABLE_NAMES`; docs/metrics.md "Record tables").
TABLE_NAMES: tuple[str, ...] = tuple(_core.TABLE_NAMES)

ConfigLike = str | os.PathLike[str] | Mapping[str, Any] | None
SetLike = Mapping[str, Any] | Sequence[str] | None

# Metrics shown by the CLI summary and a notebook's Result display, in order;
# absent ones (e.g. IOMMU metrics of a GMMU run) are skipped.
KEY_METRICS: tuple[str, ...] = (
    "time.total_ns",
    "time.kernel_ns",
    "gpu0.warp_mem_insts",
    "gpu0.l1tlb.hit_rate",
    "gpu0.l2tlb.hit_rate",
    "gpu0.l2tlb.misses",
    "gpu0.l1tlb.miss_latency_ns.mean",
    "gpu0.walker.walks",
    "gpu0.walker.utilization",
    "iommu.tlb.hit_rate",
    "iommu.walker.walks",
    "iommu.walker.utilization",
    "sim.events",
    "sim.wall_s",
)
# Unified memory's headline (runs whose driver serviced faults); the UVM_IF_NONZERO ones only when not 0.
UVM_KEY_METRICS: tuple[str, ...] = (
    "uvm.faults.raw",
    "uvm.faults.unique",
    "uvm.batches",
    "uvm.time_ns",
    "uvm.bytes_h2d",
    "uvm.prefetch.pages",
    "uvm.evictions",
    "uvm.pages_evicted",
    "uvm.host.faults",
    "uvm.host.time_ns",
)
# Host accesses to managed memory (ping-pong, managed srad) show only when the host faulted.
UVM_IF_NONZERO = frozenset(
    {"uvm.prefetch.pages", "uvm.evictions", "uvm.pages_evicted", "uvm.host.faults", "uvm.host.time_ns"}
)
# Multi-GPU runs (`multi.gpus` > 1): the headline's per-GPU rows (`gpu0.*` of KEY_METRICS) are the whole
# system's instead, named `gpu*.*`: sums over the GPUs, hit rates of the summed counts, the mean miss latency
# weighted by each GPU's misses (GPU 0 alone can have run nothing: greedy placement gives few CTAs to many GPUs).
MULTI_GPU_ROWS: dict[str, tuple[str, ...]] = {
    "gpu0.warp_mem_insts": ("sum", "warp_mem_insts"),
    "gpu0.l1tlb.hit_rate": ("ratio", "l1tlb.hits", "l1tlb.accesses"),
    "gpu0.l2tlb.hit_rate": ("ratio", "l2tlb.hits", "l2tlb.accesses"),
    "gpu0.l2tlb.misses": ("sum", "l2tlb.misses"),
    "gpu0.l1tlb.miss_latency_ns.mean": ("weighted", "l1tlb.miss_latency_ns.mean", "l1tlb.misses"),
    "gpu0.walker.walks": ("sum", "walker.walks"),
    "gpu0.walker.utilization": ("mean", "walker.utilization"),
}
# Multi-GPU runs (`multi.gpus` > 1): the whole system's translation, faults and page movement.
MULTI_KEY_METRICS: tuple[str, ...] = (
    "multi.l2tlb.mpki",
    "multi.far_faults",
    "multi.migrations",
    "multi.remote_fraction",
    "multi.invalidations.sent",
)
# The APU's page-request path (runs that faulted through it).
APU_KEY_METRICS: tuple[str, ...] = ("apu.faults", "apu.fault_latency_ns.mean")
# Managed run against the same workload on device memory (`uvm.baselines = true`).
BASELINE_KEY_METRICS: tuple[str, ...] = ("baseline.slowdown_vs_copy", "baseline.slowdown_vs_ideal")


@dataclass(frozen=True, eq=False)
class Result:
    """The outcome of one simulation.

    ``metrics`` maps dotted names (``gpu0.l1tlb.hits``, ``time.total_ns``, ...) to
    numbers; ``config`` is the fully resolved configuration the run used;
    ``tables`` holds record tables when enabled, each a pandas DataFrame with one
    row per record (``batches``: one row per UVM driver batch, with
    ``uvm.records = true``). On disk the tables are ``NAME.parquet`` files next to
    ``summary.json``, which lists them but does not hold their rows.
    """

    metrics: dict[str, float | int]
    config: dict[str, Any]
    version: str
    out: Path | None = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], out: Path | None = None, tables: Iterable[str] | None = None) -> Result:
        """The ``Result`` of a run's JSON object: the simulator's output, whose tables are dicts of columns, or
        a ``summary.json`` read from ``out``, whose tables are ``{"file", "rows"}`` references to Parquet files
        in ``out`` (older summaries, which embedded the rows, still load). With ``tables``, only the tables of
        those names are read (``load``)."""
        wanted = None if tables is None else set(tables)
        listed = raw.get("tables", {})
        read = {name: _table(name, t, out) for name, t in listed.items() if wanted is None or name in wanted}
        return cls(metrics=raw["metrics"], config=raw["config"], version=raw["version"], out=out, tables=read)

    def __eq__(self, other: object) -> bool:
        # Field-wise, except `out` (where a result is stored is not part of it); DataFrames compare by content.
        if not isinstance(other, Result):
            return NotImplemented
        return (
            self.metrics == other.metrics
            and self.config == other.config
            and self.version == other.version
            and self.tables.keys() == other.tables.keys()
            and all(self.tables[k].equals(other.tables[k]) for k in self.tables)
        )

    __hash__ = None  # type: ignore[assignment]  # holds dicts and DataFrames

    def key_metrics(self) -> list[tuple[str, float | int]]:
        """The headline metrics that this run reports, as ``(name, value)`` pairs. A run whose driver serviced
        faults adds what unified memory cost it: faults, batches, driver time, bytes moved, evictions, the
        three stages that took most of the driver's time, and the slowdowns against the legacy baselines; a
        multi-GPU run adds the system's figures, a run that faulted through an APU's page-request path those."""
        m = self.metrics
        gpus = int(m.get("multi.gpus", 1))
        system = gpus > 1  # the GPU rows over every GPU
        rows = [_system_row(m, k, gpus) if system and k in MULTI_GPU_ROWS else (k, m[k]) for k in KEY_METRICS if k in m]
        if gpus > 1:
            rows += [(k, m[k]) for k in MULTI_KEY_METRICS if k in m]
        if m.get("apu.faults", 0) > 0:
            rows += [(k, m[k]) for k in APU_KEY_METRICS if k in m]
        if m.get("uvm.batches", 0) > 0:
            rows += [(k, m[k]) for k in UVM_KEY_METRICS if k in m and (m[k] or k not in UVM_IF_NONZERO)]
            stages = [(k, v) for k, v in m.items() if k.startswith("uvm.stage.") and k != "uvm.stage.copy_ns" and v > 0]
            rows += sorted(stages, key=lambda kv: -kv[1])[:3]
        rows += [(k, m[k]) for k in BASELINE_KEY_METRICS if k in m]
        # The simulator's own figures last, as before.
        sim = [r for r in rows if r[0].startswith("sim.")]
        return [r for r in rows if not r[0].startswith("sim.")] + sim

    def to_json(self) -> dict[str, Any]:
        """The ``summary.json`` object of this result: metrics, config and, per table, only its file and row
        count. The rows go to ``NAME.parquet`` (``run(out=...)`` writes both): a faults table can have a million
        rows, which as JSON would make every reader of the metrics parse hundreds of megabytes."""
        return {
            "version": self.version,
            "config": self.config,
            "metrics": self.metrics,
            "tables": {name: {"file": table_file(name), "rows": len(df)} for name, df in self.tables.items()},
        }

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{html.escape(k)}</code></td><td style='text-align:right'>{html.escape(format_metric(k, v))}"
            "</td></tr>"
            for k, v in self.key_metrics()
        )
        apps = self.config.get("multi", {}).get("apps") or []
        if apps:  # multi-application mode: these ran, not workload.kind
            ran = "applications " + ", ".join(str(a) for a in apps)
        else:
            ran = f"workload {self.config.get('workload', {}).get('kind', '?')}"
        caption = f"uvmsim {html.escape(self.version)} &middot; {html.escape(ran)}"
        if self.tables:
            listed = ", ".join(f"<code>{html.escape(n)}</code> ({len(df):,} rows)" for n, df in self.tables.items())
            caption += f" &middot; tables {listed}"
        return f"<table><caption>{caption}</caption><tr><th>metric</th><th>value</th></tr>{rows}</table>"


def table_file(name: str) -> str:
    """The file name of record table ``name`` in a run directory."""
    return f"{name}.parquet"


def _table(name: str, entry: Any, out: Path | None) -> pd.DataFrame:
    """A table of a run's JSON: columns (the simulator's output, ``{"name": [values]}``), rows (an old
    summary.json) or a Parquet reference (``{"file", "rows"}``)."""
    import pandas as pd  # here, not at the top: pandas costs ~0.3 s to import and only runs with tables need it

    if isinstance(entry, list):
        return pd.DataFrame.from_records(entry)
    if isinstance(entry, dict) and all(isinstance(v, list) for v in entry.values()):
        return pd.DataFrame(entry)
    if not (isinstance(entry, dict) and isinstance(entry.get("file"), str) and isinstance(entry.get("rows"), int)):
        where = f"{out / SUMMARY_FILE}: " if out is not None else ""
        raise ConfigError(f"{where}table `{name}` is neither columns, rows nor a {{file, rows}} reference")
    if out is None:
        raise ConfigError(f"table `{name}` is stored in a file, but no run directory was given to read it from")
    # Only the file's name: a summary must not point outside its directory.
    path = out / Path(str(entry["file"])).name
    if not path.exists():
        raise ConfigError(f"{out / SUMMARY_FILE}: not a complete run: it lists table `{name}` but {path} is missing")
    with reading_input(path, f"table `{name}` of run"):
        try:
            df = pd.read_parquet(path)
        except OSError:
            raise
        except Exception as e:  # pyarrow's ArrowInvalid and kin: a damaged file, not a bug
            raise ConfigError(f"{path}: not a readable Parquet table: {e}") from None
    if len(df) != entry["rows"]:
        raise ConfigError(
            f"{path}: {len(df)} rows, but {out / SUMMARY_FILE} lists {entry['rows']} (a table of another run?)"
        )
    return df


def _system_row(m: Mapping[str, float | int], key: str, gpus: int) -> tuple[str, float | int]:
    """Headline row ``key`` (a ``gpu0.*`` metric) over all ``gpus`` GPUs of a multi-GPU run, named ``gpu*.*``."""
    how, *names = MULTI_GPU_ROWS[key]

    def total(name: str) -> float | int:
        return sum(m.get(f"gpu{i}.{name}", 0) for i in range(gpus))

    if how == "sum":
        value: float | int = total(names[0])
    elif how == "mean":  # over the GPUs (each GPU's walkers have the same threads)
        value = total(names[0]) / gpus
    elif how == "ratio":
        den = total(names[1])
        value = total(names[0]) / den if den else 0.0
    else:  # a mean weighted by each GPU's count
        den = total(names[1])
        num = sum(m.get(f"gpu{i}.{names[0]}", 0.0) * m.get(f"gpu{i}.{names[1]}", 0) for i in range(gpus))
        value = num / den if den else 0.0
    return "gpu*." + key.removeprefix("gpu0."), value


def format_metric(name: str, value: float | int) -> str:
    """A human-readable rendering of one metric value, by the unit in its name."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if name.endswith("_ns") or "_ns." in name:
        return _format_ns(float(value))
    if name.endswith(("hit_rate", "utilization")):
        return f"{100.0 * value:.2f} %"
    if name.endswith("_s"):
        return f"{value:.3f} s"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.4g}"


def _format_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.1f} ns"


def plain_scalar(v: Any) -> Any:
    """``v`` as a plain Python bool, int or float if it is a number of another type (NumPy's, as from a
    DataFrame column or ``np.linspace``), else ``v`` unchanged. Duck-typed: NumPy is not imported."""
    if isinstance(v, bool) or type(v) in (int, float, str):
        return v
    if isinstance(v, numbers.Integral):  # np.int64, IntEnum, ...
        return int(v)
    if isinstance(v, numbers.Real):  # np.float64 (a float subclass whose repr is "np.float64(1.0)"), np.float32
        return float(v)
    item = getattr(v, "item", None)  # np.bool_ is no numbers.Number
    if callable(item) and type(v).__module__ == "numpy" and getattr(v, "shape", None) == ():
        plain = item()
        if isinstance(plain, bool | int | float):
            return plain
    return v


def toml_value(v: Any) -> str:
    """``v`` as a TOML value (the form ``--set`` and config files take)."""
    v = plain_scalar(v)
    if isinstance(v, bool):  # before int: bool is an int subclass
        return "true" if v else "false"
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        return float.__repr__(v)
    if isinstance(v, str | os.PathLike):
        # A JSON string is a TOML basic string, except that TOML forbids a raw DEL.
        return json.dumps(os.fspath(v), ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list | tuple):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot express {type(v).__name__} {v!r} as a config value")


def flatten(d: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.extend(flatten(v, key))
        else:
            out.append((key, v))
    return out


def flatten_unique(d: Mapping[str, Any], what: str) -> list[tuple[str, Any]]:
    """``flatten(d)``, refusing a key given twice (``{"uvm.batch_size": 1, "uvm": {"batch_size": 2}}``): the
    last one would silently win."""
    items = flatten(d)
    seen: set[str] = set()
    for k, _ in items:
        if k in seen:
            raise ConfigError(f"{what}: key `{k}` given twice (as a dotted key and nested, or both)")
        seen.add(k)
    return items


def dict_to_toml(d: Mapping[str, Any]) -> str:
    """A nested dict of config values as TOML text, one dotted key per line."""
    items = flatten_unique(d, "<dict config>")
    for k, v in items:
        v = plain_scalar(v)
        # TOML integers are i64; the parser's own error for a bigger one is a multi-line excerpt.
        if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
            raise ConfigError(
                f"<dict config>: key `{k}`: {v} is out of range: config integers are at most {2**63 - 1} "
                "(2^63 - 1, the TOML limit)"
            )
    # Dotted keys at top level are plain TOML and keep the emitter trivial.
    return "".join(f"{k} = {config_value('<dict config>', k, v)}\n" for k, v in items)


def config_value(source: str, key: str, v: Any) -> str:
    """``toml_value(v)`` of the value given for ``key``; a value no config key takes (None, a dict in a list, an
    object) is a ``ConfigError`` naming ``source`` and the key, as the core names a value of the wrong type."""
    try:
        return toml_value(v)
    except TypeError as e:
        raise ConfigError(f"{source}: key `{key}`: {e}") from None


def overrides(set: SetLike) -> list[str]:
    """``set`` (a mapping of dotted keys to values, or ``key=value`` strings) as ``key=value`` strings."""
    if set is None:
        return []
    if isinstance(set, Mapping):
        return [f"{k}={config_value('--set', k, v)}" for k, v in flatten_unique(set, "set")]
    if isinstance(set, str):
        raise TypeError("set must be a mapping or a list of 'key=value' strings, not a single string")
    if not isinstance(set, Iterable):
        raise TypeError(f"set must be a mapping or a list of 'key=value' strings, not {type(set).__name__}")
    items = list(set)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"set entries must be 'key=value' strings, got {item!r}")
    return items


def sources(config: ConfigLike = None, preset: str | os.PathLike[str] | None = None) -> list[tuple[str, str, bool]]:
    """The ``(name, toml_text, is_preset)`` layers of a run: the preset first, then the user's config. A preset may
    set keys the configured mode does not read (it describes its machine); the user's config may not."""
    layers: list[tuple[str, str, bool]] = []
    if preset is not None and not isinstance(preset, str | os.PathLike):
        raise TypeError(f"preset must be a preset name or the path of a preset file, not {type(preset).__name__}")
    if config is not None and not isinstance(config, str | os.PathLike | Mapping):
        raise TypeError(
            f"config must be the path of a TOML file or a mapping of config values, not {type(config).__name__}"
        )
    if preset is not None:
        layers.append((*load_preset(preset), True))
    if config is None:
        return layers
    if isinstance(config, Mapping):
        layers.append(("<dict config>", dict_to_toml(config), False))
    else:
        path = Path(config)
        layers.append((str(path), read_toml_text(path, "config file"), False))
    return layers


def run(
    config: ConfigLike = None,
    *,
    preset: str | os.PathLike[str] | None = None,
    set: SetLike = None,
    out: str | os.PathLike[str] | None = None,
    trace: str | os.PathLike[str] | None = None,
) -> Result:
    """Simulate one configuration and return its metrics.

    Args:
        config: a TOML config file (path) or a nested dict of config values, layered over ``preset``.
        preset: a preset name (``uvmsim presets`` lists them) or a path to a preset ``.toml`` file.
        set: overrides applied last: ``{"gpu.l1tlb.entries": 64}`` or ``["gpu.l1tlb.entries=64"]``.
        trace: a trace to replay, as ``uvmsim run --trace``: sets ``workload.kind`` by the format and its path
            (``trace_workload``), before ``set``.
        out: a directory to write ``summary.json`` into (created if needed), and each table as ``NAME.parquet``
            (``summary.json`` lists the tables; their rows are only in the Parquet files).

    Raises:
        ConfigError: an unknown key, a bad value, an unknown preset; the message names the source and key. Also
            an ``out`` that is, or would overwrite, a file the run reads (the config file, the preset's file, a
            trace), refused before simulating.
        FileNotFoundError: ``config`` or ``trace`` names a file that does not exist.
        SimulationError: the simulation itself failed (e.g. a deadlock); ``BudgetExceeded`` (a subclass) when it
            handled ``sim.max_events`` events without finishing.
        OSError: ``out`` cannot be written (a file, or a directory without write permission): raised before
            simulating when it can be foreseen.
        TypeError: an argument of the wrong kind (``set`` not a mapping or list of strings, ``config`` neither a
            path nor a mapping).
        KeyboardInterrupt: Ctrl-C stops the run within milliseconds (the core polls for signals), as does any
            signal whose Python handler raises (``signal.signal(signal.SIGTERM, ...)``: Python's default for
            SIGTERM ends the process at once); nothing is written to ``out`` then.
    """
    sets = overrides(set)
    if trace is not None:
        sets[:0] = overrides(trace_workload(trace))
    layers = sources(config, preset)
    outdir = Path(out) if out is not None else None
    if outdir is not None:  # before simulating: no output may replace an input
        cfg = json.loads(_core.resolve(layers, sets))
        refuse_input_in_dir(
            outdir,
            inputs_of(config, preset, cfg),
            lambda name: name == SUMMARY_FILE or name.endswith(".parquet"),
            "this run",
        )
        check_output_dir(outdir)  # an OSError now, not after the simulation
    raw = json.loads(_core.run(layers, sets))
    result = Result.from_json(raw, out=outdir)
    if outdir is not None:
        # Tables first, summary last: a summary.json on disk means the tables it lists are complete.
        for name, df in result.tables.items():
            atomic_write_parquet(outdir / table_file(name), df)
        atomic_write_json(outdir / SUMMARY_FILE, result.to_json())
        # A table an earlier run left in the directory is not this run's: gone, it cannot be taken for one.
        for name in TABLE_NAMES:
            if name not in result.tables:
                (outdir / table_file(name)).unlink(missing_ok=True)
    return result


def resolve(config: ConfigLike = None, *, preset: str | os.PathLike[str] | None = None, set: SetLike = None) -> dict:
    """The fully resolved configuration, without running it (raises ``ConfigError`` like ``run``)."""
    return json.loads(_core.resolve(sources(config, preset), overrides(set)))


def load(directory: str | os.PathLike[str], *, tables: Iterable[str] | None = None) -> Result:
    """The ``Result`` stored in ``directory`` by ``run(out=...)`` or ``uvmsim run -o``: ``summary.json``, and
    each table it lists from its ``NAME.parquet``; with ``tables`` (names, e.g. ``("batches",)`` or ``()``),
    only those of the listed tables, so that a large or damaged table that is not needed is not read.

    Raises:
        FileNotFoundError: ``directory`` holds no ``summary.json`` (the message says what it does hold).
        InputError: a file of the run cannot be read (e.g. no permission); the message names it.
        ConfigError: ``summary.json`` is not a run summary (not JSON, or a key is missing), or a table it lists
            is missing or damaged.
        TypeError: ``tables`` is not a collection of names (a single string is refused: give ``("batches",)``).
        ConfigError: also for a name in ``tables`` that is not one of ``TABLE_NAMES`` (a run without that table
            is not an error: only the tables it has are read).
    """
    if tables is not None and (isinstance(tables, str) or not isinstance(tables, Iterable)):
        # A single name would be read as its letters, and no table loaded.
        raise TypeError(f"tables must be a list of table names, e.g. ('batches',), not {type(tables).__name__}")
    for name in tables or ():
        if name not in TABLE_NAMES:  # a misspelt name would load nothing, silently
            near = nearest(str(name), TABLE_NAMES)
            hint = f"did you mean `{near}`? " if near else ""
            raise ConfigError(f"tables: unknown record table `{name}`; {hint}a run keeps {', '.join(TABLE_NAMES)}")
    d = Path(directory)
    path = d / SUMMARY_FILE
    if not path.is_file():
        what = "does not exist" if not d.exists() else "is not a run directory: it has no summary.json"
        if d.is_file():
            what = "is a file, not a run directory" + (
                f": give the directory that holds it, `{d.parent}`" if d.name == SUMMARY_FILE else ""
            )
        if (d / "sweep.json").is_file():
            what = "is a sweep directory, not a run: read it with uvmsim.sweep.load_sweep"
        raise MissingInputError(f"`{d}` {what}")
    try:
        with reading_input(path, "run summary"):
            text = path.read_text(encoding="utf-8")
        raw = json.loads(text)
        if not isinstance(raw, dict):
            kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(raw), "a number")
            raise ConfigError(f"{path}: not a run summary: {kind}, not a JSON object")
        for key, want in (("metrics", dict), ("config", dict), ("version", str), ("tables", dict)):
            if not isinstance(raw.get(key, {} if key == "tables" else None), want):  # older summaries: no tables
                what = "object" if want is dict else "string"
                raise ConfigError(f"{path}: not a run summary: `{key}` is missing or not a JSON {what}")
        return Result.from_json(raw, out=d, tables=tables)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not a run summary: {e}") from None
    except (KeyError, TypeError, AttributeError) as e:
        raise ConfigError(f"{path}: not a run summary: missing or malformed {e}") from None


def config_reference() -> list[dict[str, Any]]:
    """Every config parameter: ``{"key", "default", "doc"}``, in declaration order."""
    return json.loads(_core.config_reference())


def config_sections() -> list[dict[str, Any]]:
    """Every config section (``gpu.l1tlb``, ...) with its description: ``{"key", "doc"}``, in declaration order."""
    return json.loads(_core.config_sections())


def trace_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Summary of a trace (CSV, .uvmt or Accel-Sim kernelslist.g): format, accesses, reads, writes, kernels,
    warps, GPUs, CUs, wavefronts, unique pages and lines, footprint, time span, request and page sizes;
    a malformed trace raises ``ConfigError`` naming the file and line or byte offset, a trace that does not
    exist, is a directory or cannot be read ``InputError`` (``MissingInputError`` for the first two)."""
    _check_trace_readable(path)
    return json.loads(_core.trace_info(os.fspath(path)))


def _check_trace_readable(path: str | os.PathLike[str]) -> None:
    """``InputError`` naming the trace at ``path`` if it cannot be opened (as ``run(trace=...)`` says it), before
    the core reports it as a malformed trace; ``TypeError`` if ``path`` is not a path."""
    p = Path(path)
    refuse_pipe(p, "trace")
    with reading_input(p, "trace"), p.open("rb"):
        pass


def trace_record(
    out: str | os.PathLike[str],
    config: ConfigLike = None,
    *,
    preset: str | os.PathLike[str] | None = None,
    set: SetLike = None,
) -> dict[str, Any]:
    """Write the warp instruction streams of the workload a config describes to a binary trace
    ``out`` (.uvmt), without simulating; returns its totals (warps, ops, mem_ops, lanes).

    The file holds the host program (allocations, copies, prefetches, launches, how the host initialised
    the managed allocations), so replaying it gives the generator's metrics (docs/traces.md). It is written
    to a temporary file beside ``out`` and renamed over it at the end.

    Raises:
        ConfigError: bad input (the config, or a workload that cannot be recorded), an ``out`` that is one of
            the files the recording reads (the config file, the preset's file, a trace the config names), or one
            named like a config (.toml, or an existing TOML file) or a CSV trace: refused before anything is written.
        OSError: ``out`` cannot be written.
    """
    layers, sets = sources(config, preset), overrides(set)
    cfg = json.loads(_core.resolve(layers, sets))
    refuse_input(out, inputs_of(config, preset, cfg), "this recording")
    check_record_out(Path(out), f"give a path such as `{Path(out).with_suffix('.uvmt').name}` as out")
    return json.loads(_core.trace_record(layers, sets, os.fspath(out)))


def trace_convert(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    preset: str | os.PathLike[str] | None = None,
    set: SetLike = None,
) -> dict[str, Any]:
    """Convert a trace: CSV -> timed .uvmt, timed .uvmt -> CSV (gzip if ``out`` ends in .gz),
    Accel-Sim kernelslist.g -> warp .uvmt (page size and managed flag from the config).

    ``out`` is written to a temporary file beside it and renamed over it at the end: a conversion that fails
    leaves no ``out`` (and an existing one as it was).

    Raises:
        ConfigError: a malformed trace (the message names the file and line, or byte offset), a bad config, or an
            ``out`` that is one of the files the conversion reads (``src``, the preset's file, a kernel file of an
            Accel-Sim ``src``) or is named for the other format (.uvmt for CSV text, .csv/.gz/.zst for a binary
            trace; zstd is read, not written).
        InputError: ``src`` does not exist or cannot be read.
        OSError: ``out`` cannot be written, before or while writing it (no such directory, a directory, a full
            disk).
    """
    _check_trace_readable(src)
    refuse_input(out, [("the input trace", Path(src)), *inputs_of(None, preset, None, [src])], "this conversion")
    writes = _convert_writes(src)
    if writes is not None:
        check_trace_name(Path(out), writes, f"`{os.fspath(src)}` converts to {writes}")
    if (preset is not None or set) and trace_workload(src)["workload.kind"] != "accelsim":
        # Only an Accel-Sim conversion reads the config, but a misspelt key or a bad value is bad input all the same
        # (the core did not resolve it for a CSV or timed trace, so `--set gpu.smss=3` went unnoticed).
        resolve(None, preset=preset, set=set)
    return json.loads(_core.trace_convert(os.fspath(src), os.fspath(out), sources(None, preset), overrides(set)))


def _convert_writes(src: str | os.PathLike[str]) -> str | None:
    """What ``trace_convert`` makes of ``src`` (docs/traces.md): an Accel-Sim kernelslist.g or a CSV trace a binary
    .uvmt, a timed .uvmt CSV text; None for a warp .uvmt, which the core refuses to convert."""
    kind = trace_workload(src)["workload.kind"]  # InputError for a missing or unreadable IN
    if kind == "accelsim":
        return BINARY
    if kind == "warp-trace":
        return None
    with reading_input(src, "trace"), open(src, "rb") as f:
        # A .uvmt name is read as a binary trace whatever its first bytes (tracefmt.rs is_uvmt), so that a damaged
        # magic is reported by the reader, not taken for CSV text.
        return CSV_TEXT if f.read(len(_UVMT_MAGIC)) == _UVMT_MAGIC or os.fspath(src).endswith(".uvmt") else BINARY


# What `workload.kind` replays which trace format (docs/traces.md); the path key is `workload.<section>.path`.
_TRACE_SECTIONS = {"trace": "trace", "warp-trace": "warp_trace", "accelsim": "accelsim"}
_UVMT_MAGIC = b"UVMTRACE"
# The reader's own bound on a .uvmt header (tracefmt.rs MAX_META): beyond it the file is not one we can classify.
_UVMT_MAX_HEADER = 64 << 20


def trace_workload(path: str | os.PathLike[str]) -> dict[str, str]:
    """The overrides that replay the trace at ``path``: ``{"workload.kind": ..., "workload.<kind>.path": ...}``.

    The kind follows the format, as the readers select it (docs/traces.md): an Accel-Sim ``kernelslist.g``
    (by its ``.g`` name) is ``accelsim``; a ``.uvmt`` (by its magic bytes) is ``warp-trace`` or ``trace`` by the
    ``mode`` of its header; anything else is a CSV trace (plain, gzip or zstd), ``trace``. Only the first bytes are
    read; a malformed trace is left to the reader, whose error names the byte or line.

    Raises:
        InputError: the file does not exist, is a directory or cannot be read (``MissingInputError``, a
            ``FileNotFoundError`` too, for the first two), or is a pipe or FIFO (read more than once).
    """
    p = Path(path)
    kind = "trace"
    refuse_pipe(p, "trace")
    with reading_input(p, "trace"), p.open("rb") as f:
        head = f.read(16)
        if os.fspath(p).endswith(".g"):  # accelsim.rs is_kernelslist: by name
            kind = "accelsim"
        elif len(head) == 16 and head[:8] == _UVMT_MAGIC:
            hlen = int.from_bytes(head[12:16], "little")
            header: Any = None
            if hlen <= min(_UVMT_MAX_HEADER, os.fstat(f.fileno()).st_size):
                try:
                    header = json.loads(f.read(hlen))
                except ValueError:
                    pass  # the reader reports a bad header with its byte offset
            if isinstance(header, dict) and header.get("mode") == "warps":
                kind = "warp-trace"
    return {"workload.kind": kind, f"workload.{_TRACE_SECTIONS[kind]}.path": os.fspath(p)}


def workloads() -> list[dict[str, Any]]:
    """Every workload generator: ``{"name", "description", "params": [{"key", "default", "doc"}]}``."""
    return json.loads(_core.workloads())


def __getattr__(name: str) -> ModuleType:
    # `uvmsim.sweep` and `uvmsim.plot` import pyarrow and matplotlib: load them on first use, not with every run;
    # `uvmsim.timeline` too, so that `uvmsim.timeline.write(result, ...)` works after a plain `import uvmsim`.
    if name in ("sweep", "plot", "timeline"):
        return importlib.import_module(f"uvmsim.{name}")
    raise AttributeError(f"module 'uvmsim' has no attribute {name!r}")
