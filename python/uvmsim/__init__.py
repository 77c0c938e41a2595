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
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from uvmsim import _core
from uvmsim._core import BudgetExceeded, ConfigError, SimulationError
from uvmsim._files import atomic_write_json, atomic_write_parquet, read_toml_text
from uvmsim.presets import list_presets, load_preset

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BudgetExceeded",
    "ConfigError",
    "Result",
    "SimulationError",
    "__version__",
    "config_reference",
    "config_sections",
    "list_presets",
    "load",
    "plot",
    "resolve",
    "run",
    "sweep",
    "trace_convert",
    "trace_info",
    "trace_record",
    "workloads",
]

__version__: str = _core.__version__

SUMMARY_FILE = "summary.json"

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
    "iommu.tlb.hit_rate",
    "iommu.walker.walks",
    "sim.events",
    "sim.wall_s",
)


@dataclass(frozen=True, eq=False)
class Result:
    """The outcome of one simulation.

    ``metrics`` maps dotted names (``gpu0.l1tlb.hits``, ``time.total_ns``, ...) to
    numbers; ``config`` is the fully resolved configuration the run used;
    ``tables`` holds record tables when enabled, each a pandas DataFrame with one
    row per record (``batches``: one row per UVM driver batch, with
    ``uvm.records = true``).
    """

    metrics: dict[str, float | int]
    config: dict[str, Any]
    version: str
    out: Path | None = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], out: Path | None = None) -> Result:
        """The ``Result`` of a ``summary.json`` object (tables given as lists of row dicts)."""
        tables = {name: _frame(rows) for name, rows in raw.get("tables", {}).items()}
        return cls(metrics=raw["metrics"], config=raw["config"], version=raw["version"], out=out, tables=tables)

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
        """The headline metrics that this run reports, as ``(name, value)`` pairs."""
        return [(k, self.metrics[k]) for k in KEY_METRICS if k in self.metrics]

    def to_json(self) -> dict[str, Any]:
        """The ``summary.json`` object of this result: tables as lists of row dicts (plain JSON values)."""
        return {
            "version": self.version,
            "config": self.config,
            "metrics": self.metrics,
            "tables": {name: df.to_dict(orient="records") for name, df in self.tables.items()},
        }

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{html.escape(k)}</code></td><td style='text-align:right'>{html.escape(format_metric(k, v))}"
            "</td></tr>"
            for k, v in self.key_metrics()
        )
        workload = self.config.get("workload", {}).get("kind", "?")
        caption = f"uvmsim {html.escape(self.version)} &middot; workload {html.escape(str(workload))}"
        if self.tables:
            listed = ", ".join(f"<code>{html.escape(n)}</code> ({len(df):,} rows)" for n, df in self.tables.items())
            caption += f" &middot; tables {listed}"
        return f"<table><caption>{caption}</caption><tr><th>metric</th><th>value</th></tr>{rows}</table>"


def _frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    import pandas as pd  # here, not at the top: pandas costs ~0.3 s to import and only runs with tables need it

    return pd.DataFrame.from_records(list(rows))


def format_metric(name: str, value: float | int) -> str:
    """A human-readable rendering of one metric value, by the unit in its name."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if name.endswith("_ns") or "_ns." in name:
        return _format_ns(float(value))
    if name.endswith("hit_rate"):
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


def toml_value(v: Any) -> str:
    """``v`` as a TOML value (the form ``--set`` and config files take)."""
    if isinstance(v, bool):  # before int: bool is an int subclass
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
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


def dict_to_toml(d: Mapping[str, Any]) -> str:
    """A nested dict of config values as TOML text, one dotted key per line."""
    # Dotted keys at top level are plain TOML and keep the emitter trivial.
    return "".join(f"{k} = {toml_value(v)}\n" for k, v in flatten(d))


def overrides(set: SetLike) -> list[str]:
    """``set`` (a mapping of dotted keys to values, or ``key=value`` strings) as ``key=value`` strings."""
    if set is None:
        return []
    if isinstance(set, Mapping):
        return [f"{k}={toml_value(v)}" for k, v in flatten(set)]
    if isinstance(set, str):
        raise TypeError("set must be a mapping or a list of 'key=value' strings, not a single string")
    items = list(set)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"set entries must be 'key=value' strings, got {item!r}")
    return items


def sources(config: ConfigLike = None, preset: str | os.PathLike[str] | None = None) -> list[tuple[str, str]]:
    """The ``(name, toml_text)`` layers of a run: the preset first, then the user's config."""
    layers: list[tuple[str, str]] = []
    if preset is not None:
        layers.append(load_preset(preset))
    if config is None:
        return layers
    if isinstance(config, Mapping):
        layers.append(("<dict config>", dict_to_toml(config)))
    else:
        path = Path(config)
        layers.append((str(path), read_toml_text(path, "config file")))
    return layers


def run(
    config: ConfigLike = None,
    *,
    preset: str | os.PathLike[str] | None = None,
    set: SetLike = None,
    out: str | os.PathLike[str] | None = None,
) -> Result:
    """Simulate one configuration and return its metrics.

    Args:
        config: a TOML config file (path) or a nested dict of config values, layered over ``preset``.
        preset: a preset name (``uvmsim presets`` lists them) or a path to a preset ``.toml`` file.
        set: overrides applied last: ``{"gpu.l1tlb.entries": 64}`` or ``["gpu.l1tlb.entries=64"]``.
        out: a directory to write ``summary.json`` into (created if needed), and each table as ``NAME.parquet``.

    Raises:
        ConfigError: an unknown key, a bad value, an unknown preset; the message names the source and key.
        FileNotFoundError: ``config`` names a file that does not exist.
        SimulationError: the simulation itself failed (e.g. a deadlock); ``BudgetExceeded`` (a subclass) when it
            handled ``sim.max_events`` events without finishing.
    """
    raw = json.loads(_core.run(sources(config, preset), overrides(set)))
    outdir = Path(out) if out is not None else None
    result = Result.from_json(raw, out=outdir)
    if outdir is not None:
        # summary.json stays the one complete record (it is what `load` reads); the Parquet copies of the
        # tables are for tools that read Parquet directly (pandas, polars, DuckDB, Arrow).
        for name, df in result.tables.items():
            atomic_write_parquet(outdir / f"{name}.parquet", df)
        atomic_write_json(outdir / SUMMARY_FILE, result.to_json())
    return result


def resolve(config: ConfigLike = None, *, preset: str | os.PathLike[str] | None = None, set: SetLike = None) -> dict:
    """The fully resolved configuration, without running it (raises ``ConfigError`` like ``run``)."""
    return json.loads(_core.resolve(sources(config, preset), overrides(set)))


def load(directory: str | os.PathLike[str]) -> Result:
    """The ``Result`` stored in ``directory/summary.json`` by ``run(out=...)`` or ``uvmsim run -o``.

    Raises:
        FileNotFoundError: ``directory`` holds no ``summary.json`` (the message says what it does hold).
        ConfigError: ``summary.json`` is not a run summary (not JSON, or a key is missing).
    """
    d = Path(directory)
    path = d / SUMMARY_FILE
    if not path.is_file():
        what = "does not exist" if not d.exists() else "is not a run directory: it has no summary.json"
        if (d / "sweep.json").is_file():
            what = "is a sweep directory, not a run: read it with uvmsim.sweep.load_sweep"
        raise FileNotFoundError(f"`{d}` {what}")
    try:
        return Result.from_json(json.loads(path.read_text(encoding="utf-8")), out=d)
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


def trace_info(path: str | Path) -> dict[str, Any]:
    """Summary of a trace (CSV, .uvmt or Accel-Sim kernelslist.g): format, accesses, reads, writes, kernels,
    warps, GPUs, CUs, wavefronts, unique pages and lines, footprint, time span, request and page sizes;
    a malformed trace raises ``ConfigError`` naming the file and line or byte offset."""
    return json.loads(_core.trace_info(str(path)))


def trace_record(
    out: str | os.PathLike[str],
    config: ConfigLike = None,
    *,
    preset: str | os.PathLike[str] | None = None,
    set: SetLike = None,
) -> dict[str, Any]:
    """Write the warp instruction streams of the workload a config describes to a binary trace
    ``out`` (.uvmt), without simulating; returns its totals (warps, ops, mem_ops, lanes)."""
    return json.loads(_core.trace_record(sources(config, preset), overrides(set), str(out)))


def trace_convert(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    preset: str | os.PathLike[str] | None = None,
    set: SetLike = None,
) -> dict[str, Any]:
    """Convert a trace: CSV -> timed .uvmt, timed .uvmt -> CSV (gzip if ``out`` ends in .gz),
    Accel-Sim kernelslist.g -> warp .uvmt (page size and managed flag from the config)."""
    return json.loads(_core.trace_convert(str(src), str(out), sources(None, preset), overrides(set)))


def workloads() -> list[dict[str, Any]]:
    """Every workload generator: ``{"name", "description", "params": [{"key", "default", "doc"}]}``."""
    return json.loads(_core.workloads())


def __getattr__(name: str) -> ModuleType:
    # `uvmsim.sweep` and `uvmsim.plot` import pyarrow and matplotlib: load them on first use, not with every run.
    if name in ("sweep", "plot"):
        return importlib.import_module(f"uvmsim.{name}")
    raise AttributeError(f"module 'uvmsim' has no attribute {name!r}")
