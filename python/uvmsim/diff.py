"""``uvmsim diff``: which runs of two result directories differ, in which metrics and settings.

A result directory is a run's (``summary.json``), a sweep's (``runs/*.parquet``), an experiment's
(``uvmsim reproduce``: ``runs/NAME/summary.json``) or any directory holding such runs below it
(``reproduce --all``'s). Runs are paired by their path below the two directories (a sweep's by run id),
so the same experiment or sweep run at two commits, or with one setting changed, lines up run by run.
Wall-clock metrics (``sim.wall_s`` and kin) differ between any two runs and are never compared.

Typical uses: after a change of the model, which experiments' runs moved (``uvmsim reproduce --all --quick``
at both commits, then ``uvmsim diff``), so that their rows in docs/validation.md are re-run; and what a
setting changes in a run (two ``uvmsim run -o`` directories).
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uvmsim._files import MissingInputError

SUMMARY_FILE = "summary.json"


@dataclass(frozen=True)
class Run:
    """One stored run: its metrics (numbers only), its configuration flattened to dotted keys and its status
    (``ok``, or a failed sweep run's ``failed``)."""

    metrics: Mapping[str, float]
    config: Mapping[str, Any]
    status: str


@dataclass(frozen=True)
class MetricChange:
    name: str
    old: float
    new: float

    @property
    def relative(self) -> float:
        """(new - old) / |old|; infinite when old is 0 and new is not."""
        if self.old == 0:
            return 0.0 if self.new == 0 else math.copysign(math.inf, self.new)
        return (self.new - self.old) / abs(self.old)


@dataclass(frozen=True)
class RunDiff:
    key: str
    metrics: list[MetricChange]  # metrics of both runs whose values differ, largest relative change first
    compared: int  # metrics compared (on both sides, after the filter)
    config: list[tuple[str, Any, Any]]  # (key, old, new) of the settings that differ; a missing side is None
    status: tuple[str, str]
    removed: list[str] = field(default_factory=list)  # metrics of the old run only (after the filter)
    added: list[str] = field(default_factory=list)  # metrics of the new run only

    @property
    def differs(self) -> bool:
        """A metric of both runs or the status differs (metrics of one side only do not count: a metric added
        to uvmsim, or one of a mode the other run does not use)."""
        return bool(self.metrics) or self.status[0] != self.status[1]


@dataclass
class Report:
    old: Path
    new: Path
    runs: list[RunDiff] = field(default_factory=list)  # every paired run, in the old side's order
    only_old: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)

    @property
    def differing(self) -> list[RunDiff]:
        """Paired runs whose compared metrics or status differ."""
        return [r for r in self.runs if r.differs]

    @property
    def common_settings(self) -> list[tuple[str, Any, Any]]:
        """The setting changes every paired run shares (a default changed, an option added): said once."""
        if not self.runs:
            return []
        rest = [{(k, json.dumps(a), json.dumps(b)) for k, a, b in r.config} for r in self.runs[1:]]
        return [c for c in self.runs[0].config if all((c[0], json.dumps(c[1]), json.dumps(c[2])) in x for x in rest)]

    @property
    def same(self) -> bool:
        """No run on one side only, and no paired run with a different metric or status."""
        return not (self.only_old or self.only_new or self.differing)

    def as_json(self) -> dict[str, Any]:
        def num(v: float) -> float | str:
            return v if math.isfinite(v) else str(v)  # JSON has no NaN or infinity

        return {
            "old": os.fspath(self.old),
            "new": os.fspath(self.new),
            "same": self.same,
            "paired": len(self.runs),
            "differing": len(self.differing),
            "only_old": self.only_old,
            "only_new": self.only_new,
            "runs": [
                {
                    "run": r.key,
                    "status": list(r.status),
                    "metrics_compared": r.compared,
                    "metrics": [
                        {"name": m.name, "old": num(m.old), "new": num(m.new), "relative": num(m.relative)}
                        for m in r.metrics
                    ],
                    "metrics_only_old": r.removed,
                    "metrics_only_new": r.added,
                    "config": [{"key": k, "old": a, "new": b} for k, a, b in r.config],
                }
                for r in self.runs
                if r.differs or r.config or r.added or r.removed
            ],
        }


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _read_summary(path: Path) -> Run:
    """The run whose ``summary.json`` is ``path``, read and checked by ``uvmsim.load`` (no tables)."""
    import uvmsim

    r = uvmsim.load(path.parent, tables=())
    return Run(_numbers(r.metrics), _flatten(r.config), "ok")


def _read_sweep(d: Path) -> dict[str, Run]:
    from uvmsim import sweep as sweep_mod

    df = sweep_mod.load_sweep(d)
    fixed = {*sweep_mod.HEAD_COLUMNS, *sweep_mod.TAIL_COLUMNS}
    metric_cols = [c for c in df.columns if c not in fixed and not c.startswith(sweep_mod.SET_PREFIX)]
    runs: dict[str, Run] = {}
    for row in df.to_dict("records"):
        metrics = {c: row[c] for c in metric_cols if not (isinstance(row[c], float) and math.isnan(row[c]))}
        try:
            config = json.loads(row.get("config") or "{}")
        except (TypeError, ValueError):
            config = {}
        runs[str(row["run_id"])] = Run(
            _numbers(metrics), _flatten(config) if isinstance(config, dict) else {}, str(row["status"])
        )
    return runs


def collect(path: str | os.PathLike[str]) -> dict[str, Run]:
    """Every run stored at ``path``, keyed by its place: ``.`` for a run directory or a ``summary.json`` given
    itself, the run id in a sweep directory, else each run directory's path below ``path`` (sorted)."""
    from uvmsim import sweep as sweep_mod

    p = Path(path)
    if not p.exists():
        raise MissingInputError(f"`{p}` does not exist")
    if p.is_file():
        if p.name != SUMMARY_FILE:
            raise MissingInputError(
                f"`{p}` is not a result: give a run, sweep or experiment directory, or a summary.json"
            )
        return {".": _read_summary(p)}
    if (p / sweep_mod.RUNS_DIR).is_dir() and any((p / sweep_mod.RUNS_DIR).glob("*.parquet")):
        return _read_sweep(p)
    found = sorted(f for f in p.rglob(SUMMARY_FILE) if f.is_file())
    if not found:
        raise MissingInputError(
            f"`{p}` holds no results: no summary.json below it and no sweep runs ({sweep_mod.RUNS_DIR}/*.parquet)"
        )
    return {f.parent.relative_to(p).as_posix(): _read_summary(f) for f in found}


def _differs(a: float, b: float, tolerance: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return not (math.isnan(a) and math.isnan(b))
    if tolerance == 0:
        return a != b
    return abs(a - b) > tolerance * max(abs(a), abs(b))


def compare_runs(
    key: str, old: Run, new: Run, tolerance: float = 0.0, patterns: Sequence[str] = (), ignore: Iterable[str] = ()
) -> RunDiff:
    """One paired run: its differing metrics (those matching ``patterns``, shell globs, when given; never those
    in ``ignore``), largest relative change first, and its differing settings."""
    skip = set(ignore)
    names = sorted((set(old.metrics) | set(new.metrics)) - skip)
    if patterns:
        names = [n for n in names if any(fnmatch.fnmatchcase(n, pat) for pat in patterns)]
    removed = [n for n in names if n not in new.metrics]
    added = [n for n in names if n not in old.metrics]
    both = [n for n in names if n in old.metrics and n in new.metrics]
    changes = [MetricChange(n, old.metrics[n], new.metrics[n]) for n in both]
    changes = [c for c in changes if _differs(c.old, c.new, tolerance)]
    changes.sort(key=lambda c: (-abs(c.relative) if not math.isnan(c.relative) else -math.inf, c.name))  # NaN first
    missing = object()
    config = [
        (k, old.config.get(k), new.config.get(k))
        for k in sorted(set(old.config) | set(new.config))
        if old.config.get(k, missing) != new.config.get(k, missing)
    ]
    return RunDiff(key, changes, len(both), config, (old.status, new.status), removed, added)


def compare(
    old: str | os.PathLike[str],
    new: str | os.PathLike[str],
    *,
    tolerance: float = 0.0,
    metrics: Sequence[str] = (),
) -> Report:
    """Compare the runs stored at ``old`` and ``new`` (see the module's doc). ``tolerance`` is relative: a metric
    differs when |new - old| > tolerance x max(|old|, |new|) (0: any change). ``metrics``: shell globs of the
    metrics to compare (default: all but the wall-clock ones).

    Raises:
        MissingInputError: a path does not exist or holds no results.
        InputError: a result file cannot be read.
        ConfigError: a result file is damaged.
        ValueError: ``tolerance`` is negative or not a number.
    """
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, not {tolerance}")
    from uvmsim import WALL_CLOCK_METRICS

    a, b = collect(old), collect(new)
    report = Report(Path(old), Path(new))
    for key, run in a.items():
        if key in b:
            report.runs.append(compare_runs(key, run, b[key], tolerance, metrics, WALL_CLOCK_METRICS))
        else:
            report.only_old.append(key)
    report.only_new = [k for k in b if k not in a]
    return report


def _fmt(v: float) -> str:
    if math.isfinite(v) and v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:.6g}"


def _fmt_change(c: MetricChange) -> str:
    r = c.relative
    if math.isnan(r):
        return "NaN on a side"
    if math.isinf(r):
        return "from 0"
    return f"{r * 100:+.3g}%"


def _fmt_setting(v: Any) -> str:
    return "-" if v is None else json.dumps(v, ensure_ascii=False)


def _names(counts: Mapping[str, int], runs: int, most: int = 20) -> str:
    """Names with how many of ``runs`` runs they are in, when not all."""
    shown = [n if c == runs else f"{n} ({c} of {runs})" for n, c in sorted(counts.items())[:most]]
    return ", ".join(shown) + (f", ... ({len(counts) - most} more)" if len(counts) > most else "")


def render(report: Report, rows: int = 10) -> list[str]:
    """The report as text lines: the tally, the runs on one side only, the metrics on one side only and the
    setting changes every run shares (each said once), then each differing run with its other settings that
    differ and its ``rows`` largest metric changes (0: all)."""
    runs, diff = report.runs, report.differing
    common = report.common_settings
    own = {r.key: [c for c in r.config if c not in common] for r in runs}
    settings_alone = sum(1 for r in runs if not r.differs and own[r.key])
    lines = [
        f"{len(runs)} run{'s' if len(runs) != 1 else ''} in both: "
        f"{len(runs) - len(diff)} with the same metrics, {len(diff)} with different ones"
        + (f" ({settings_alone} of the same with different settings)" if settings_alone else "")
    ]
    for side, keys in ((report.old, report.only_old), (report.new, report.only_new)):
        if keys:
            lines.append(f"{len(keys)} only in {side}: {', '.join(keys[:20])}{', ...' if len(keys) > 20 else ''}")
    for side, attr in ((report.old, "removed"), (report.new, "added")):
        counts: dict[str, int] = {}
        for r in runs:
            for n in getattr(r, attr):
                counts[n] = counts.get(n, 0) + 1
        if counts:
            lines.append(f"metrics only in {side}: {_names(counts, len(runs))}")
    groups: dict[str, list[int]] = {}  # first path part (an experiment of reproduce --all): [differing, paired]
    for r in runs:
        g = groups.setdefault(r.key.split("/", 1)[0], [0, 0])
        g[0] += r.differs
        g[1] += 1
    if diff and len(groups) > 1 and any("/" in r.key for r in runs):  # reproduce --all: one group an experiment
        moved = [f"{k} {d}/{n}" for k, (d, n) in groups.items() if d]
        lines.append(f"runs that differ, by directory: {', '.join(moved)}")
    if common:
        lines.append(f"settings that differ in every run{'' if len(runs) == 1 else ' alike'}:")
        lines += [f"  set {k}: {_fmt_setting(a)} -> {_fmt_setting(b)}" for k, a, b in common]
    for r in runs:
        if not r.differs:
            continue
        lines.append("")
        head = f"{r.key}: {len(r.metrics)} of {r.compared} metrics differ"
        if r.status[0] != r.status[1]:
            head += f"; status {r.status[0]} -> {r.status[1]}"
        lines.append(head)
        for k, a, b in own[r.key]:
            lines.append(f"  set {k}: {_fmt_setting(a)} -> {_fmt_setting(b)}")
        shown = r.metrics if rows == 0 else r.metrics[:rows]
        if shown:
            width = max(len("metric"), *(len(m.name) for m in shown))
            olds = [_fmt(m.old) for m in shown]
            news = [_fmt(m.new) for m in shown]
            wo, wn = max(3, *map(len, olds)), max(3, *map(len, news))
            lines.append(f"  {'metric':<{width}}  {'old':>{wo}}  {'new':>{wn}}  change")
            for m, o, n in zip(shown, olds, news, strict=True):
                lines.append(f"  {m.name:<{width}}  {o:>{wo}}  {n:>{wn}}  {_fmt_change(m)}")
        if len(shown) < len(r.metrics):
            lines.append(f"  ... {len(r.metrics) - len(shown)} more (--rows 0 shows all)")
    return lines
