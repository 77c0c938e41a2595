"""Plots of runs and sweeps (matplotlib; PNG or SVG): ``uvmsim plot KIND DIR``.

Each kind is a function from data (a sweep's DataFrame from ``uvmsim.sweep.load_sweep``, a run's metrics or
its ``batches`` table) to a matplotlib ``Figure``, so a notebook can call it directly; ``render`` reads a run
or sweep directory, draws the kind and writes the file. Figures are built without pyplot: drawing one changes
no global matplotlib state (backend, current figure) of the caller.

A kind whose data a directory lacks (no records, not a multi-GPU run) refuses with a message saying what to
run, rather than draw something else.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvmsim
from uvmsim import diff as diff_mod
from uvmsim import sweep as sweep_mod
from uvmsim._core import ConfigError
from uvmsim._files import MissingInputError, atomic_write, check_output_file, refuse_input
from uvmsim._names import nearest
from uvmsim.timeline import STAGES

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = [
    "FORMATS",
    "KINDS",
    "PlotDataError",
    "batch_stages",
    "batch_time_vs_bytes",
    "l2_miss_latency",
    "link_utilization",
    "metric_vs_axis",
    "render",
    "runtime_bars",
    "save",
    "tlb_hit_rates",
]

FORMATS = ("png", "svg")
# TLB levels of `tlb-hit-rates`: label -> metric; a level a run does not have (IOMMU in GMMU mode) is left out.
TLB_LEVELS = {"L1 TLB": "gpu0.l1tlb.hit_rate", "L2 TLB": "gpu0.l2tlb.hit_rate", "IOMMU TLB": "iommu.tlb.hit_rate"}
# Columns of the batches table that are timestamps, not stage durations.
BATCH_TIMESTAMPS = ("start_ns", "end_ns")
# `*_ns` columns of the batches table that are not stages: the copies' time on the link overlaps the stages.
BATCH_NOT_STAGES = (*BATCH_TIMESTAMPS, "copy_ns")
# batch-stages: one bar per batch up to STAGE_BARS_MAX batches, stacked areas beyond, each step the mean of
# consecutive batches beyond STAGE_GROUPS_MAX; the figure grows with the batches up to a width (inches).
STAGE_BARS_MAX = 200
STAGE_GROUPS_MAX = 2000
STAGE_FIGURE_MAX_WIDTH_IN = 24.0


class PlotDataError(ConfigError):
    """The directory lacks the data a plot kind needs (the message says what to run); exit code 2 in the CLI."""


# --- the kinds ----------------------------------------------------------------------------------------------


def _new_figure(width: float = 7.0, height: float = 4.2) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _short_keys(keys: Sequence[str]) -> dict[str, str]:
    """Each dotted key by its last component where that is unambiguous (``threads`` for
    ``workload.regular.threads``), else in full."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last, strict=True)}


def _label(values: dict[str, Any], short: dict[str, str]) -> str:
    return ", ".join(f"{short[k]}={v}" for k, v in values.items()) or "all runs"


def _ok_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The sweep's successful runs, each override column completed (``_with_base_values``)."""
    ok = df[df["status"] == "ok"]
    if ok.empty:
        raise PlotDataError("the sweep has no successful run to plot")
    return _with_base_values(ok)


_MISSING = object()  # a key absent from a run's config (None is a value)


def _config_value(config: Any, key: str) -> Any:
    """The value of dotted ``key`` in a run's resolved config (its JSON text), or ``_MISSING``."""
    import json

    try:
        node = json.loads(config) if isinstance(config, str) else None
    except ValueError:
        return _MISSING
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _with_base_values(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the value of each ``set.<key>`` a run does not override (a ``[[runs]]`` entry without the key:
    NaN after load_sweep's concat) read from the run's resolved config, and integer keys as ints again (the NaN
    made pandas store the column as floats). ``PlotDataError`` when a run's value cannot be told."""
    import pandas as pd

    cols = [c for c in df.columns if c.startswith(sweep_mod.SET_PREFIX)]
    configs = list(df["config"]) if "config" in df.columns else [None] * len(df)
    out = df.copy()
    for col in cols:
        key = col[len(sweep_mod.SET_PREFIX) :]
        values = []
        for rid, v, config in zip(df["run_id"], df[col], configs, strict=True):
            base = _config_value(config, key)
            if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
                if base is _MISSING:
                    raise PlotDataError(
                        f"run {rid} does not override `{key}` and the sweep stores no resolved config with it: "
                        "its value is unknown"
                    )
                v = base
            elif isinstance(v, float) and v.is_integer() and isinstance(base, int) and not isinstance(base, bool):
                v = int(v)
            values.append(v)
        out[col] = pd.Series(values, index=df.index, dtype=object)
    return out


def _axis_column(df: pd.DataFrame, axis: str) -> str:
    col = axis if axis.startswith(sweep_mod.SET_PREFIX) else sweep_mod.SET_PREFIX + axis
    if col not in df.columns:
        axes = [c[len(sweep_mod.SET_PREFIX) :] for c in df.columns if c.startswith(sweep_mod.SET_PREFIX)]
        raise PlotDataError(f"the sweep has no axis `{axis}`; its axes: {', '.join(axes) or 'none'}")
    return col


def _metric_column(df: pd.DataFrame, metric: str) -> str:
    if metric not in df.columns:
        near = nearest(metric, [str(c) for c in df.columns])
        hint = f"; did you mean `{near}`?" if near else ""
        raise PlotDataError(f"the runs have no metric `{metric}`{hint}")
    return metric


def _groups(df: pd.DataFrame, keys: Sequence[str]) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """``df`` split by the values of ``keys`` columns, in order of first appearance."""
    if not keys:
        return [({}, df)]
    out = []
    for values, part in df.groupby(list(keys), sort=False, dropna=False):
        vals = values if isinstance(values, tuple) else (values,)
        out.append((dict(zip(keys, vals, strict=True)), part))
    return out


def runtime_bars(df: pd.DataFrame, by: str, metric: str = "time.total_ns", baseline: Any = None) -> Figure:
    """Bars of ``metric`` per value of axis ``by``, normalized to its ``baseline`` value (default: the first)
    within each combination of the other axes, with their geometric mean (the seeds' normalized-runtime figure)."""
    import numpy as np

    ok = _ok_runs(df)
    by_col, metric = _axis_column(ok, by), _metric_column(ok, metric)
    others = [c for c in ok.columns if c.startswith(sweep_mod.SET_PREFIX) and c != by_col]
    values = list(dict.fromkeys(ok[by_col]))
    base = values[0] if baseline is None else baseline
    if base not in values:
        raise PlotDataError(f"`{by}` has no value {base!r} to normalize to; its values: {values}")
    short = _short_keys([c[len(sweep_mod.SET_PREFIX) :] for c in others])
    labels, norm = [], []  # norm[group][value]
    for group, part in _groups(ok, others):
        by_value = {v: float(part.loc[part[by_col] == v, metric].mean()) for v in values}
        ref = by_value[base]
        labels.append(_label({k[len(sweep_mod.SET_PREFIX) :]: v for k, v in group.items()}, short))
        norm.append([by_value[v] / ref if ref > 0 else math.nan for v in values])
    table = np.array(norm, dtype=float)
    geo = []
    for j in range(len(values)):  # over the groups that have the value (a [[runs]] list need not have all)
        ratios = table[:, j][np.isfinite(table[:, j]) & (table[:, j] > 0)]
        geo.append(float(np.exp(np.log(ratios).mean())) if len(ratios) else math.nan)
    labels.append("geomean")
    table = np.vstack([table, geo])

    fig = _new_figure(max(6.0, 0.6 * len(labels) * max(1, len(values)) / 2 + 2))
    ax = fig.add_subplot()
    width = 0.8 / len(values)
    x = np.arange(len(labels))
    for j, v in enumerate(values):
        ax.bar(x + (j - (len(values) - 1) / 2) * width, table[:, j], width, label=str(v))
    ax.axhline(1.0, color="0.3", linewidth=0.8)
    ax.set_xticks(x, labels, rotation=30 if len(labels) > 4 else 0, ha="right" if len(labels) > 4 else "center")
    ax.set_ylabel(f"{metric}\n(normalized to {by.removeprefix(sweep_mod.SET_PREFIX)} = {base})")
    ax.legend(
        title=by.removeprefix(sweep_mod.SET_PREFIX), fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0)
    )
    ax.set_title(f"Normalized {metric} per {by.removeprefix(sweep_mod.SET_PREFIX)}")
    return fig


def _system_hit_rates(m: Mapping[str, Any]) -> dict[str, Any]:
    """``m`` with a multi-GPU run's L1 and L2 TLB hit rates taken over all its GPUs (the summed hits over the summed
    accesses, as its headline's ``gpu*`` rows): GPU 0's alone are one GPU's, which may have run little or nothing."""
    system = dict(m)
    gpus = m.get("multi.gpus", 1)
    if _isnan(gpus) or int(gpus) <= 1:
        return system
    for key in ("gpu0.l1tlb.hit_rate", "gpu0.l2tlb.hit_rate"):
        if key in m and not _isnan(m[key]):
            system[key] = uvmsim._system_row(m, key, int(gpus))[1]
    return system


def tlb_hit_rates(runs: Sequence[tuple[str, dict[str, Any]]]) -> Figure:
    """Grouped bars of the hit rate of each TLB level (L1, L2, IOMMU where present), one group per run:
    ``runs`` is ``(label, metrics)`` pairs. A multi-GPU run's L1 and L2 rates are over all its GPUs."""
    import numpy as np

    runs = [(label, _system_hit_rates(m)) for label, m in runs]
    levels = [
        (name, key)
        for name, key in TLB_LEVELS.items()
        if any(key in m and not _isnan(m[key]) for _, m in runs)  # a sweep's DataFrame has NaN where absent
    ]
    if not levels:
        raise PlotDataError("the runs report no TLB hit rates")
    fig = _new_figure(max(5.0, 0.5 * len(runs) * len(levels) + 2))
    ax = fig.add_subplot()
    width = 0.8 / len(levels)
    x = np.arange(len(runs))
    for j, (name, key) in enumerate(levels):
        rates = [100.0 * float(m.get(key, math.nan)) for _, m in runs]
        ax.bar(x + (j - (len(levels) - 1) / 2) * width, rates, width, label=name)
    labels = [label for label, _ in runs]
    ax.set_xticks(x, labels, rotation=30 if len(runs) > 3 else 0, ha="right" if len(runs) > 3 else "center")
    ax.set_ylim(0, 105)
    ax.set_ylabel("hit rate (%)")
    ax.set_title("TLB hit rate per level")
    ax.legend(fontsize="small")
    return fig


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def metric_vs_axis(df: pd.DataFrame, x: str, metric: str = "gpu0.l1tlb.miss_latency_ns.mean") -> Figure:
    """``metric`` against the numeric axis ``x``, one line per combination of the other axes (e.g. per-miss
    latency against the number of concurrent work-items)."""
    ok = _ok_runs(df)
    x_col, metric = _axis_column(ok, x), _metric_column(ok, metric)
    words = sorted({str(v) for v in ok[x_col] if not isinstance(v, int | float) or isinstance(v, bool)})
    if words:  # a line through categories would draw an order and distances they do not have
        raise PlotDataError(
            f"--axis {x.removeprefix(sweep_mod.SET_PREFIX)} is not numeric (values {', '.join(words[:5])}): "
            "latency-concurrency draws a line against a number; runtime-bars takes any axis"
        )
    others = [c for c in ok.columns if c.startswith(sweep_mod.SET_PREFIX) and c != x_col]
    short = _short_keys([c[len(sweep_mod.SET_PREFIX) :] for c in others])
    fig = _new_figure()
    ax = fig.add_subplot()
    for group, part in _groups(ok, others):
        line = part.groupby(x_col, sort=True)[metric].mean()
        label = _label({k[len(sweep_mod.SET_PREFIX) :]: v for k, v in group.items()}, short)
        ax.plot(line.index, line.values, marker="o", label=label)
    ax.set_xlabel(x.removeprefix(sweep_mod.SET_PREFIX))
    ax.set_ylabel(metric)
    ax.set_ylim(bottom=0)
    ax.set_title(f"{metric} vs {x.removeprefix(sweep_mod.SET_PREFIX)}")
    if others:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _batches(batches: pd.DataFrame | None) -> pd.DataFrame:
    if batches is None or batches.empty:
        raise PlotDataError(
            "the run has no batches table: run a managed workload with per-batch records "
            "(--set workload.managed=true --set uvm.records=true)"
        )
    return batches


def batch_time_vs_bytes(batches: pd.DataFrame) -> Figure:
    """Each batch's duration against the bytes it migrated, with a least-squares line (its slope is the
    effective migration bandwidth, its intercept the fixed cost of a batch)."""
    import numpy as np

    b = _batches(batches)
    mib = b["bytes_h2d"].to_numpy(dtype=float) / 2**20
    us = (b["end_ns"] - b["start_ns"]).to_numpy(dtype=float) / 1e3
    fig = _new_figure()
    ax = fig.add_subplot()
    ax.scatter(mib, us, s=14, alpha=0.7, label=f"{len(b)} batches")
    if len(np.unique(mib)) >= 2:
        slope, intercept = np.polyfit(mib, us, 1)
        r2 = float(np.corrcoef(mib, us)[0, 1] ** 2)
        xs = np.linspace(0.0, float(mib.max()), 50)
        gbps = 2**20 / (slope * 1e3) if slope > 0 else math.inf  # MiB per µs -> bytes per ns = GB/s
        ax.plot(xs, intercept + slope * xs, color="C3", label=f"fit: {intercept:.1f} µs + {slope:.1f} µs/MiB")
        ax.plot([], [], " ", label=f"≈ {gbps:.2f} GB/s marginal, R² = {r2:.3f}")
    ax.set_xlabel("bytes migrated in the batch (MiB)")
    ax.set_ylabel("batch time (µs)")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_title("UVM batch time vs bytes migrated")
    ax.legend(fontsize="small")
    return fig


# The driver's stages in the order a batch goes through them (uvm.BatchRecord); others follow.
STAGE_ORDER = STAGES


def stage_columns(batches: pd.DataFrame) -> list[str]:
    """The per-stage duration columns of a batches table (``*_ns`` but the timestamps), in stage order."""
    cols = [str(c) for c in batches.columns if str(c).endswith("_ns") and c not in BATCH_NOT_STAGES]
    rank = {f"{s}_ns": i for i, s in enumerate(STAGE_ORDER)}
    return sorted(cols, key=lambda c: (rank.get(c, len(rank)), c))


def fault_scatter(faults: pd.DataFrame | None) -> Figure:
    """Each fault the driver saw, in the order it was written: its page (relative to the lowest) against its
    position, coloured by the batch that fetched it (seed uvm-driver Fig. 3.1); flushed faults are hollow."""
    import numpy as np

    if faults is None or faults.empty:
        raise PlotDataError(
            "the run has no faults table: run a managed workload with per-fault records "
            "(--set workload.managed=true --set uvm.fault_records=true)"
        )
    f = faults.sort_values("time_ns", kind="stable").reset_index(drop=True)
    page = f["page"].to_numpy(dtype=np.int64)
    page = page - page.min()
    order = np.arange(len(f))
    fig = _new_figure(8.0)
    ax = fig.add_subplot()
    flushed = (f["outcome"] == "flushed").to_numpy()
    sc = ax.scatter(order[~flushed], page[~flushed], c=f["batch"].to_numpy()[~flushed], s=4, cmap="viridis")
    if flushed.any():
        ax.scatter(
            order[flushed],
            page[flushed],
            s=6,
            facecolors="none",
            edgecolors="0.5",
            linewidths=0.5,
            label=f"flushed ({int(flushed.sum())}: fault again after the replay)",
        )
        ax.legend(loc="upper left", fontsize="small")
    fig.colorbar(sc, ax=ax, label="batch")
    ax.set_xlabel("fault (in buffer order)")
    ax.set_ylabel("page (4 KiB, from the lowest faulted)")
    ax.set_title(f"{len(f)} faults in {f['batch'].nunique()} batches")
    return fig


def batch_stages(batches: pd.DataFrame) -> Figure:
    """Stacked bars of each batch's stage durations (whatever ``STAGE_ns`` columns the table has).

    Beyond ``STAGE_BARS_MAX`` batches the stages are stacked areas instead, and beyond ``STAGE_GROUPS_MAX`` each
    step is the mean of consecutive batches (the title says how many): one bar per batch of a 60,000-batch run
    took minutes and gigabytes to draw."""
    import matplotlib
    import numpy as np

    b = _batches(batches)
    stages = stage_columns(b)
    if not stages:
        raise PlotDataError(
            "the batches table has no per-stage times (columns STAGE_ns besides start_ns and end_ns): "
            "batch-stages needs per-stage batch records (not yet recorded)"
        )
    n = len(b)
    fig = _new_figure(min(max(6.0, 0.12 * n + 3), STAGE_FIGURE_MAX_WIDTH_IN))
    ax = fig.add_subplot()
    x = b["batch"].to_numpy() if "batch" in b.columns else np.arange(n)
    # The default cycle has 10 colours and the driver's stages are 13: some looked alike.
    cmap = matplotlib.colormaps["tab10" if len(stages) <= 10 else "tab20"]
    palette = [cmap(i) for i in range(cmap.N)]
    per_group = max(1, math.ceil(n / STAGE_GROUPS_MAX)) if n > STAGE_BARS_MAX else 0
    if per_group:
        starts = np.arange(0, n, per_group)
        counts = np.diff(np.append(starts, n))
        edges = np.append(x[starts], x[-1] + 1).astype(float) - 0.5
        bottom = np.zeros(len(starts))
    else:
        bottom = np.zeros(n)
    for i, stage in enumerate(stages):
        us = b[stage].to_numpy(dtype=float) / 1e3
        label, colour = stage.removesuffix("_ns"), palette[i % len(palette)]
        if not per_group:
            ax.bar(x, us, 0.85, bottom=bottom, label=label, color=colour)
            bottom += us
            continue
        top = bottom + np.add.reduceat(us, starts) / counts  # each group's mean per batch
        # fill_between's steps need the last value repeated at the right edge.
        ax.fill_between(
            edges,
            np.append(bottom, bottom[-1]),
            np.append(top, top[-1]),
            step="post",
            linewidth=0,
            label=label,
            color=colour,
        )
        bottom = top
    ax.set_xlabel("batch")
    if per_group > 1:
        ax.set_ylabel(f"mean time per batch over {per_group} batches (µs)")
        ax.set_title(
            f"UVM batch time per stage: {n:,} batches, mean of each {per_group} consecutive ({len(starts):,} steps)"
        )
    else:
        ax.set_ylabel("time (µs)")
        ax.set_title("UVM batch time per stage" + (f": {n:,} batches" if per_group else ""))
    # Beside the stack: it would hide bars or areas, and finding the "best" place among thousands is slow.
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


# --- directories, files and the catalogue -------------------------------------------------------------------


def save(fig: Figure, path: str | os.PathLike[str], fmt: str | None = None) -> Path:
    """Write ``fig`` to ``path`` atomically, as ``fmt`` (default: from the suffix, else PNG)."""
    p = Path(path)
    fmt = fmt or (p.suffix.lstrip(".").lower() if p.suffix.lstrip(".").lower() in FORMATS else "png")

    # Drawn in memory first: the temporary file then exists only while the bytes are written, so a plot killed
    # while drawing (which can take a while) leaves no empty temporary file (`.NAME.<random>.tmp`) behind.
    buf = io.BytesIO()
    creator = f"uvmsim {uvmsim.__version__}"
    fig.savefig(buf, format=fmt, dpi=120, metadata={"Software" if fmt == "png" else "Creator": creator})

    def write(fd: int) -> None:
        with os.fdopen(fd, "wb") as f:
            f.write(buf.getbuffer())

    atomic_write(p, write)
    return p


def _is_sweep(d: Path) -> bool:
    """A sweep directory: its ``runs/`` holds ``<id>.parquet`` files, or ``sweep.json`` describes it (an
    experiment of ``uvmsim reproduce`` has a ``runs/`` too, of run directories)."""
    runs = d / sweep_mod.RUNS_DIR
    return runs.is_dir() and ((d / sweep_mod.SWEEP_FILE).is_file() or any(runs.glob("*.parquet")))


# What `uvmsim reproduce` writes: ID -o DIR: DIR/comparison.csv, DIR/plot.png and DIR/runs/NAME/ (run directories);
# --all -o DIR: DIR/report.html, DIR/run.json and each experiment in DIR/ID/.
COMPARISON_FILE = "comparison.csv"
ACCEPTS = "plot takes a run directory (`uvmsim run -o DIR`) or a sweep directory (`uvmsim sweep SPEC -o DIR`)"


def _not_reproduce_output(d: Path) -> None:
    """``PlotDataError`` saying what ``d`` is when ``uvmsim reproduce`` wrote it: neither a run nor a sweep, and
    reproduce draws its own plots (taken for a sweep by its ``runs/``, it was "the sweep has no successful run")."""
    from uvmsim import report as report_mod

    if (d / report_mod.REPORT_FILE).is_file() or (d / report_mod.RUN_FILE).is_file():
        runs = sorted(d.glob(f"*/{sweep_mod.RUNS_DIR}/*/{uvmsim.SUMMARY_FILE}"))
        example = runs[0].parent if runs else d / "ID" / sweep_mod.RUNS_DIR / "NAME"
        raise PlotDataError(
            f"`{d}` is the output of `uvmsim reproduce --all`, not a run or a sweep directory: its plots are drawn "
            f"already, one per experiment ({d / 'ID' / report_mod.PLOT_FILE}, shown in {d / report_mod.REPORT_FILE})"
            f"; {ACCEPTS}, such as one of an experiment's runs: `{example}`"
        )
    runs = sorted((d / sweep_mod.RUNS_DIR).glob(f"*/{uvmsim.SUMMARY_FILE}"))
    if (d / COMPARISON_FILE).is_file() or (runs and not _is_sweep(d)):
        example = runs[0].parent if runs else d / sweep_mod.RUNS_DIR / "NAME"
        raise PlotDataError(
            f"`{d}` is the output of an experiment of `uvmsim reproduce`, not a run or a sweep directory: "
            f"reproduce draws its own plot, {d / report_mod.PLOT_FILE} (published vs simulated); {ACCEPTS}, such as "
            f"one of the experiment's runs: `{example}`"
        )


def _needs_sweep(d: Path, kind: str) -> pd.DataFrame:
    if not _is_sweep(d):
        raise PlotDataError(f"{kind} plots a sweep: `{d}` is not a sweep directory (`uvmsim sweep SPEC -o DIR`)")
    return sweep_mod.load_sweep(d)


def _needs_run(d: Path, kind: str, tables: Sequence[str] = ()) -> uvmsim.Result:
    """The run in ``d``, with only the record ``tables`` the kind draws read (a damaged table it does not need
    must not stop it)."""
    if _is_sweep(d):
        raise PlotDataError(f"{kind} plots one run: `{d}` is a sweep; give a run directory (`uvmsim run -o DIR`)")
    return uvmsim.load(d, tables=tables)


def _first_axis(d: Path, df: pd.DataFrame, numeric: bool = False) -> str:
    axes = sweep_mod.sweep_axes(d) or [
        c[len(sweep_mod.SET_PREFIX) :] for c in df.columns if c.startswith(sweep_mod.SET_PREFIX)
    ]
    for a in axes:
        col = sweep_mod.SET_PREFIX + a
        if col in df.columns and (
            not numeric or all(isinstance(v, int | float) and not isinstance(v, bool) for v in df[col])
        ):
            return a
    raise PlotDataError(f"the sweep has no {'numeric ' if numeric else ''}axis to plot against; give --axis")


def _runtime_bars(d: Path, axis: str | None, metric: str | None) -> Figure:
    df = _needs_sweep(d, "runtime-bars")
    return runtime_bars(df, axis or _first_axis(d, df), metric or "time.total_ns")


def _tlb_hit_rates(d: Path, axis: str | None, metric: str | None) -> Figure:
    if not _is_sweep(d):
        r = _needs_run(d, "tlb-hit-rates")
        return tlb_hit_rates([(str(r.config.get("workload", {}).get("kind", d.name)), r.metrics)])
    return tlb_hit_rates(_sweep_runs(d))


def _latency_concurrency(d: Path, axis: str | None, metric: str | None) -> Figure:
    df = _needs_sweep(d, "latency-concurrency")
    return metric_vs_axis(df, axis or _first_axis(d, df, numeric=True), metric or "gpu0.l1tlb.miss_latency_ns.mean")


# What each record table holds, for messages.
TABLE_RECORDS = {"batches": "UVM driver batches", "faults": "UVM driver faults", "migrations": "migrations"}


def _counts(m: Mapping[str, Any], keys: Sequence[str]) -> str:
    return ", ".join(f"{k} = {uvmsim.format_metric(k, m[k])}" for k in keys if k in m)


def _why_empty(r: uvmsim.Result, name: str) -> str:
    """Why run ``r`` recorded table ``name`` (batches, faults, migrations) without a row, from its config and
    metrics: telling the user to turn records on, as for a missing table, would send them round in a circle."""
    c, m = r.config, r.metrics
    mc = c.get("multi", {})
    gpus = int(mc.get("gpus", 1) or 1)
    head = f"the run recorded no {TABLE_RECORDS.get(name, name)} (its {name} table has no rows)"
    # Every buffer is unified in the multi-GPU model, whatever workload.managed says (docs/multi-gpu.md).
    if gpus > 1 or mc.get("model_one_gpu"):
        if name == "migrations":
            # The model writes a row per page move: none means no page moved.
            counted = _counts(m, ("multi.migrations", "multi.replications", "multi.far_faults"))
            why = f"{head}: the multi-GPU model (multi.gpus = {gpus}) moved no page ({counted})"
            if mc.get("apps") and mc.get("apps_resident"):
                why += "; multi.apps_resident = true places every application's pages in its GPU's memory"
            return why
        counted = _counts(m, ("multi.far_faults", "multi.migrations"))
        return (
            f"{head}: the multi-GPU model (multi.gpus = {gpus}) has no UVM driver fault batches; its metrics "
            f"count far faults and migrations ({counted})"
        )
    if c.get("workload", {}).get("managed") is False:
        what = (
            "the UVM driver migrated nothing (explicit copies are not migrations)"
            if name == "migrations"
            else "nothing faults to the UVM driver"
        )
        return f"{head}: workload.managed = false, so {what}; add --set workload.managed=true"
    iommu = c.get("translation", {}).get("mode") == "iommu"
    if name == "migrations":
        moved = _counts(m, ("uvm.bytes_h2d", "uvm.bytes_d2h"))
        why = f"{head}: nothing was migrated over the link ({moved})"
        if iommu:
            why += (
                '; in translation.mode = "iommu" (an APU or ATS system) the page-request path maps first touches '
                "in place, and only the driver's migrations (such as access-counter migration) are recorded"
            )
        return why
    if iommu:
        return (
            f'{head}: in translation.mode = "iommu" (an APU or ATS system) GPU faults take the IOMMU\'s page-request '
            f"path ({_counts(m, ('apu.faults',))}), not the UVM driver's fault batches"
        )
    return f"{head}: no far fault reached the UVM driver ({_counts(m, ('uvm.faults.raw',))})"


def _run_table(r: uvmsim.Result, name: str) -> pd.DataFrame | None:
    """Table ``name`` of run ``r``; ``PlotDataError`` saying why when the run recorded it empty."""
    table = r.tables.get(name)
    if table is not None and table.empty:
        raise PlotDataError(_why_empty(r, name))
    return table


def _batch_time_vs_bytes(d: Path, axis: str | None, metric: str | None) -> Figure:
    return batch_time_vs_bytes(_run_table(_needs_run(d, "batch-time-vs-bytes", ["batches"]), "batches"))


def _fault_scatter(d: Path, axis: str | None, metric: str | None) -> Figure:
    return fault_scatter(_run_table(_needs_run(d, "fault-scatter", ["faults"]), "faults"))


def _batch_stages(d: Path, axis: str | None, metric: str | None) -> Figure:
    return batch_stages(_run_table(_needs_run(d, "batch-stages", ["batches"]), "batches"))


def link_utilization(
    migrations: pd.DataFrame | None,
    bandwidth_gbps: float,
    bins: int = 200,
    links: int = 1,
    latency_ns: float | None = None,
    d2h_bandwidth_gbps: float | None = None,
) -> Figure:
    """Host-device link utilisation over time, per direction (h2d, d2h): each copy of the ``migrations`` table
    spreads its bytes evenly over its span; each time bin's bytes over what ``links`` links of ``bandwidth_gbps``
    could carry in it, device-to-host copies over ``d2h_bandwidth_gbps`` where given (``link.d2h_bandwidth_gbps``
    of an asymmetric link). A multi-GPU run's host-to-device copies share one switch uplink (or, with
    ``multi.host_uplink_shared = false``, use one link per GPU). GPU-to-GPU copies (``p2p``, multi-GPU) cross
    the peer fabric, not the host link: they are left out.

    With ``latency_ns`` (a multi-GPU run: a row spans a page move from its issue, waiting for a busy link
    included, to its arrival) a copy's bytes are spread instead over the time they take at ``bandwidth_gbps``
    up to its last byte (``end_ns - latency_ns``): spread over the whole span, pages queued together would
    overlap and add up to more than the link carries."""
    import numpy as np

    if migrations is None or migrations.empty:
        raise PlotDataError(
            "the run has no migrations table: run a managed workload with records "
            "(--set workload.managed=true --set uvm.records=true)"
        )
    host = migrations[migrations["direction"] != "p2p"]
    if host.empty:
        raise PlotDataError(
            f"the run's {len(migrations):,} migrations are all GPU-to-GPU (p2p) copies over the peer fabric "
            "(multi.peer_bandwidth_gbps); link-utilization plots the host-device link"
        )
    t0, t1 = float(host["start_ns"].min()), float(host["end_ns"].max())
    edges = np.linspace(t0, max(t1, t0 + 1.0), bins + 1)
    width = edges[1] - edges[0]
    fig = _new_figure()
    ax = fig.add_subplot()
    d2h_gbps = d2h_bandwidth_gbps or bandwidth_gbps
    for direction, part in host.groupby("direction", sort=True):
        gbps = d2h_gbps if direction == "d2h" else bandwidth_gbps
        carried = np.zeros(bins)
        for start, end, nbytes in zip(part["start_ns"], part["end_ns"], part["bytes"], strict=True):
            if latency_ns is not None:
                end = max(float(start), float(end) - latency_ns)
                start = max(float(start), end - float(nbytes) / gbps)
            span = max(float(end) - float(start), 1e-9)
            # Overlap of [start, end) with every bin, as a fraction of the copy.
            lo = np.clip(edges[:-1], start, end)
            hi = np.clip(edges[1:], start, end)
            carried += float(nbytes) * (hi - lo) / span
        util = 100.0 * carried / (links * gbps * width)  # GB/s x ns = bytes
        ax.plot((edges[:-1] + width / 2 - t0) / 1e3, util, label=str(direction))
    ax.set_xlabel("time since the first copy (µs)")
    rate = (
        f"{bandwidth_gbps:g} GB/s"
        if d2h_gbps == bandwidth_gbps
        else f"{bandwidth_gbps:g} GB/s h2d, {d2h_gbps:g} GB/s d2h"
    )
    capacity = rate if links == 1 else f"{links} links of {rate}"
    ax.set_ylabel(f"utilisation of {capacity} (%)")
    ax.set_ylim(bottom=0)
    p2p = len(migrations) - len(host)
    ax.set_title("link utilisation over time" + (f" ({p2p:,} p2p copies not shown)" if p2p else ""))
    ax.legend(fontsize="small")
    return fig


# The multi-GPU L2-TLB-miss latency terms (docs/metrics.md "Multi-GPU"), in the order they happen.
L2MISS_TERMS = ("gmmu_queue", "gmmu_pwc_miss", "batch_wait", "host_queue", "host_pwc_miss", "link", "migration")


def l2_miss_latency(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> Figure:
    """Stacked bars of the L2-TLB-miss latency per component (``multi.l2miss.*``), one bar per run: ``runs`` is
    ``(label, metrics)`` pairs."""
    import numpy as np

    present = [t for t in L2MISS_TERMS if any(f"multi.l2miss.{t}_ns" in m for _, m in runs)]
    if not present:
        raise PlotDataError(
            "the runs report no L2-miss latency breakdown: it is measured by the multi-GPU model "
            "(--set multi.gpus=2 or more, or a li-4gpu-* preset)"
        )
    fig = _new_figure(max(5.0, 0.8 * len(runs) + 3))
    ax = fig.add_subplot()
    x = np.arange(len(runs))
    bottom = np.zeros(len(runs))
    for t in present:
        v = np.array([float(m.get(f"multi.l2miss.{t}_ns", 0.0) or 0.0) for _, m in runs])
        v = np.nan_to_num(v)
        ax.bar(x, v, 0.6, bottom=bottom, label=t.replace("_", " "))
        bottom += v
    labels = [label for label, _ in runs]
    ax.set_xticks(x, labels, rotation=30 if len(runs) > 3 else 0, ha="right" if len(runs) > 3 else "center")
    ax.set_ylabel("mean per L2 TLB miss (ns)")
    ax.set_title("L2 TLB miss latency by component")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _link_utilization(d: Path, axis: str | None, metric: str | None) -> Figure:
    r = _needs_run(d, "link-utilization", ["migrations"])
    mc, link = r.config.get("multi", {}), r.config.get("link", {})
    gpus = int(mc.get("gpus", 1) or 1)
    bandwidth = float(link.get("bandwidth_gbps", 0.0))
    d2h = float(link.get("d2h_bandwidth_gbps", 0.0) or 0.0) or None  # 0 = the same as host to device
    if gpus == 1 and not mc.get("model_one_gpu"):
        return link_utilization(_run_table(r, "migrations"), bandwidth, d2h_bandwidth_gbps=d2h)
    # The multi-GPU model's page moves: through one shared uplink, or each GPU's own link; a row spans the wait.
    links = gpus if mc.get("host_uplink_shared") is False else 1
    latency = float(link.get("latency_ns", 0.0))
    return link_utilization(
        _run_table(r, "migrations"), bandwidth, links=links, latency_ns=latency, d2h_bandwidth_gbps=d2h
    )


def _sweep_runs(d: Path) -> list[tuple[str, dict[str, Any]]]:
    """(label, metrics) of each finished run of a sweep, labelled by its axis values."""
    ok = _ok_runs(sweep_mod.load_sweep(d))
    sets = [c for c in ok.columns if c.startswith(sweep_mod.SET_PREFIX)]
    short = _short_keys([c[len(sweep_mod.SET_PREFIX) :] for c in sets])
    return [
        (_label({c[len(sweep_mod.SET_PREFIX) :]: row[c] for c in sets}, short), row.to_dict())
        for _, row in ok.iterrows()
    ]


def _l2_miss_latency(d: Path, axis: str | None, metric: str | None) -> Figure:
    if _is_sweep(d):
        return l2_miss_latency(_sweep_runs(d))
    r = _needs_run(d, "l2-miss-latency")
    return l2_miss_latency([(str(r.config.get("workload", {}).get("kind", d.name)), r.metrics)])


@dataclass(frozen=True)
class Kind:
    """A plot kind: what it shows, what directory it reads, and its drawing function (None: data missing)."""

    name: str
    source: str
    description: str
    draw: Callable[[Path, str | None, str | None], Figure] | None = None
    needs: str = ""
    #: The options it reads of ``--axis`` and ``--metric``: another is refused, not ignored.
    options: tuple[str, ...] = ()


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "runtime-bars",
            "sweep",
            "time.total_ns (or --metric) per value of --axis (default: the first axis), normalized to its first "
            "value, per combination of the other axes, with the geomean",
            _runtime_bars,
            options=("axis", "metric"),
        ),
        Kind("tlb-hit-rates", "run or sweep", "L1 / L2 / IOMMU TLB hit rates, per run", _tlb_hit_rates),
        Kind(
            "latency-concurrency",
            "sweep",
            "gpu0.l1tlb.miss_latency_ns.mean (or --metric) against a numeric --axis (default: the first), "
            "one line per combination of the other axes",
            _latency_concurrency,
            options=("axis", "metric"),
        ),
        Kind(
            "batch-time-vs-bytes",
            "run",
            "per-batch time against bytes migrated, with a linear fit (needs uvm.records = true)",
            _batch_time_vs_bytes,
        ),
        Kind(
            "batch-stages",
            "run",
            "per-batch stage times, stacked; beyond 2,000 batches, means of consecutive batches "
            "(needs uvm.records = true)",
            _batch_stages,
        ),
        Kind(
            "fault-scatter",
            "run",
            "page index against fault order, coloured by batch (needs uvm.fault_records = true)",
            _fault_scatter,
        ),
        Kind(
            "link-utilization",
            "run",
            "host-device link utilisation over time per direction, from the migrations table; GPU-to-GPU "
            "copies of a multi-GPU run are left out (needs uvm.records = true)",
            _link_utilization,
        ),
        Kind(
            "l2-miss-latency",
            "run or sweep",
            "L2 TLB miss latency per component (multi.l2miss.*: GMMU queue, driver batch wait, host queue, "
            "page-walk-cache misses, link, migration), one stacked bar per run (needs a multi-GPU run)",
            _l2_miss_latency,
        ),
    )
}


def output_path(kind: str, directory: Path, out: Path | None, fmt: str | None) -> tuple[Path, str]:
    """Where ``render`` writes and in which format: ``out`` (its suffix gives the format unless ``fmt`` does),
    else ``directory/KIND.FMT``. ``ConfigError`` if the two disagree or the suffix is unknown."""
    if out is None:
        fmt = fmt or "png"
        return directory / f"{kind}.{fmt}", fmt
    suffix = out.suffix.lstrip(".").lower()
    if fmt is None:
        if suffix not in FORMATS:
            raise ConfigError(
                f"cannot tell the format of `{out}` from its suffix; give --format ({', '.join(FORMATS)})"
            )
        return out, suffix
    if suffix in FORMATS and suffix != fmt:
        raise ConfigError(f"`{out}` has a .{suffix} suffix but --format is {fmt}")
    return out, fmt


def render(
    kind: str,
    directory: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    fmt: str | None = None,
    *,
    axis: str | None = None,
    metric: str | None = None,
) -> Path:
    """Draw plot ``kind`` from the run or sweep in ``directory`` and write it; return the file's path.

    Raises:
        ConfigError: an unknown kind or format; ``PlotDataError`` (a ConfigError) when the directory lacks the
            data the kind needs, or the kind's data is not recorded by the simulator yet.
        FileNotFoundError: ``directory`` is not a run or sweep directory.
        OSError: the output cannot be written (a directory, or a read-only or missing directory above it), before
            anything is drawn.
    """
    if kind not in KINDS:
        near = nearest(kind, KINDS)
        hint = f"did you mean `{near}`? " if near else ""
        raise ConfigError(f"unknown plot kind `{kind}`; {hint}available: {', '.join(KINDS)}")
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"unknown format `{fmt}`; available: {', '.join(FORMATS)}")
    k = KINDS[kind]
    if k.draw is None:
        raise PlotDataError(f"{kind} needs {k.needs}")
    for option, value in (("axis", axis), ("metric", metric)):
        if value is not None and option not in k.options:
            takers = " and ".join(n for n, o in KINDS.items() if option in o.options)
            raise ConfigError(f"plot kind {kind} takes no --{option}; {takers} do (uvmsim plot --list)")
    d = Path(directory)
    if not d.exists():
        raise MissingInputError(f"`{d}` does not exist")
    if not d.is_dir():
        # Bad input, not an output that cannot be written (the default output lies inside DIR).
        raise MissingInputError(f"`{d}` is not a directory: give a run's or a sweep's output directory (-o)")
    _not_reproduce_output(d)
    if out is not None:  # e.g. -o DIR/summary.json --format svg: it would replace the run it plots
        refuse_input(out, diff_mod.input_files(d), "this plot")
    # A directory, ...: before its suffix is read, and before drawing, which can take a while.
    check_output_file(Path(out) if out is not None else d / f"{kind}.{fmt or 'png'}", make_parents=True)
    path, fmt = output_path(kind, d, Path(out) if out is not None else None, fmt)
    fig = k.draw(d, axis, metric)
    return save(fig, path, fmt)
