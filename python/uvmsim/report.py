"""The reproduction report: ``uvmsim reproduce --all -o DIR`` and ``DIR/report.html``.

``data/validation.toml`` lists every experiment of ``shared/VALIDATION.md``, supported or not (with the reason).
``reproduce_all`` runs the supported ones one after the other; each experiment's outputs (``DIR/ID/comparison.csv``,
its runs, ``DIR/ID/plot.png`` and ``DIR/ID/result.json``) are written as soon as it finishes, and a failing
experiment is recorded with its error while the others go on. ``write_report`` turns the results found in ``DIR``
into one self-contained HTML page (CSS inline, plots embedded as base64 PNG, no network), rewritten after every
experiment so that an interrupted run still leaves a report of what finished. ``markdown_table`` and
``update_markdown`` regenerate the summary table of ``docs/validation.md`` between its markers.

Plots: an experiment-specific figure where one is registered in ``PLOTTERS`` (e.g. latency against concurrency
for ``apu-walk-concurrency``), else a bar chart of published against simulated value per check.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import html
import json
import math
import os
import re
import time
import tomllib
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvmsim
from uvmsim import reproduce as rep
from uvmsim._core import ConfigError
from uvmsim._files import atomic_write, atomic_write_json, atomic_write_text, read_input_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

VALIDATION_FILE = Path(__file__).parent / "data" / "validation.toml"
REPORT_FILE = "report.html"
RESULT_FILE = "result.json"
PLOT_FILE = "plot.png"
ERROR_FILE = "error.txt"
RUN_FILE = "run.json"
STATUSES = ("supported", "unsupported")
MD_BEGIN = "<!-- BEGIN reproduce-summary"
MD_END = "<!-- END reproduce-summary -->"


# --- the list of VALIDATION.md experiments ------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """A section of VALIDATION.md: one seed (or "beyond the seeds") and its system."""

    id: str
    title: str
    system: str


@dataclass(frozen=True)
class Target:
    """One row of VALIDATION.md: what is measured, the published result and its tolerance, as stated there."""

    id: str
    group: str
    what: str
    published: str
    tolerance: str
    status: str
    fit: bool = False
    reason: str = ""

    @property
    def supported(self) -> bool:
        return self.status == "supported"


_GROUP_KEYS = {"id", "title", "system"}
_TARGET_KEYS = {"id", "group", "what", "published", "tolerance", "status", "fit", "reason"}


def _check_keys(where: str, table: Mapping[str, Any], allowed: set[str], required: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key `{unknown[0]}`; accepted: {', '.join(sorted(allowed))}")
    missing = sorted(required - set(table))
    if missing:
        raise ConfigError(f"{where}: missing key `{missing[0]}`")


def load_validation(path: Path = VALIDATION_FILE) -> tuple[list[Group], list[Target]]:
    """The groups and experiments of ``validation.toml``, in file order; ``ConfigError`` naming the file and the
    entry when it is malformed (unknown key, unknown group or status, repeated ID, a supported experiment that is
    not registered, an unsupported one without a reason)."""
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    _check_keys(str(path), raw, {"groups", "experiments"}, {"groups", "experiments"})
    groups = []
    for i, g in enumerate(raw["groups"]):
        _check_keys(f"{path}: groups[{i}]", g, _GROUP_KEYS, _GROUP_KEYS)
        groups.append(Group(**g))
    group_ids = {g.id for g in groups}
    targets: list[Target] = []
    seen: set[str] = set()
    for i, e in enumerate(raw["experiments"]):
        where = f"{path}: experiments[{i}] (`{e.get('id', '?')}`)"
        _check_keys(where, e, _TARGET_KEYS, {"id", "group", "what", "published", "tolerance", "status"})
        t = Target(**e)
        if t.id in seen:
            raise ConfigError(f"{where}: the ID is listed twice")
        seen.add(t.id)
        if t.group not in group_ids:
            raise ConfigError(f"{where}: unknown group `{t.group}`; groups: {', '.join(sorted(group_ids))}")
        if t.status not in STATUSES:
            raise ConfigError(f"{where}: unknown status `{t.status}`; accepted: {', '.join(STATUSES)}")
        if t.supported and t.id not in rep.REGISTRY:
            raise ConfigError(f"{where}: status is supported but no experiment `{t.id}` is registered")
        if not t.supported and not t.reason:
            raise ConfigError(f"{where}: an unsupported experiment needs a `reason`")
        targets.append(t)
    return groups, targets


# --- outcomes of one --all run ------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What running one experiment gave: its comparison rows, or the error that stopped it; ``DIR/ID/result.json``.

    ``status`` is PASS (every checked row passed), FAIL (some did not), INFO (rows, none of them checked) or ERROR
    (the experiment raised).
    """

    id: str
    status: str
    elapsed_s: float
    quick: bool
    rows: list[rep.Row] = field(default_factory=list)
    error: str = ""
    plot: str = ""
    plot_error: str = ""
    finished: str = ""

    @property
    def checked(self) -> list[rep.Row]:
        return [r for r in self.rows if r.passed is not None]

    @property
    def passed(self) -> int:
        return sum(bool(r.passed) for r in self.checked)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["rows"] = [{**asdict(r), "simulated": _json_float(r.simulated)} for r in self.rows]
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Outcome:
        rows = [rep.Row(**{**r, "simulated": float(r["simulated"])}) for r in d.get("rows", [])]
        return cls(**{**d, "rows": rows})


def _json_float(v: float) -> float | str:
    """JSON has no NaN or infinity: those are written as strings (``float()`` reads them back)."""
    return v if math.isfinite(v) else str(v)


def status_of(rows: Sequence[rep.Row]) -> str:
    """FAIL if a checked row failed; INFO if it has rows and none is checked (nothing to pass); else PASS
    (also for no rows at all, which no experiment gives: each has at least one check)."""
    if any(r.passed is False for r in rows):
        return "FAIL"
    return "INFO" if rows and all(r.passed is None for r in rows) else "PASS"


def run_experiment(id: str, out: Path, *, quick: bool = False, resume: bool = False, jobs: int = 1) -> Outcome:
    """Reproduce experiment ``id`` into ``out``, draw its plot, and write ``out/result.json``.

    Any error of the experiment (a config error, a failed simulation, a bug in its analysis, a Rust panic) is
    recorded in the outcome (and its traceback in ``out/error.txt``) rather than raised; so is a failed plot.
    Only interruptions (Ctrl-C, ``SystemExit``) propagate.
    """
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    reused_s = 0.0
    try:
        rows, ctx = rep.reproduce_context(id, out, quick=quick, resume=resume, jobs=jobs)
        reused_s = ctx.reused_s
        outcome = Outcome(id, status_of(rows), 0.0, quick, rows=rows)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # noqa: BLE001 - pyo3's PanicException is a BaseException
        atomic_write_text(out / ERROR_FILE, "".join(traceback.format_exception(e)))
        outcome = Outcome(id, "ERROR", 0.0, quick, error=f"{type(e).__name__}: {e}")
    if outcome.rows:
        try:
            write_plot(id, outcome.rows, out)
            outcome.plot = PLOT_FILE
        except Exception as e:  # noqa: BLE001 - a plot must not lose the experiment's results
            outcome.plot_error = f"{type(e).__name__}: {e}"
    # A resumed experiment counts the simulation time of the runs it reused: the time the experiment takes.
    outcome.elapsed_s = time.perf_counter() - start + reused_s
    outcome.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    atomic_write_json(out / RESULT_FILE, outcome.to_json())
    return outcome


def reproduce_all(
    out: str | os.PathLike[str],
    *,
    quick: bool = False,
    resume: bool = False,
    jobs: int = 1,
    ids: Sequence[str] | None = None,
    on_start: Callable[[str], None] | None = None,
    on_done: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Run every supported experiment of ``validation.toml`` (or only ``ids``) into ``out/ID``; write
    ``out/report.html`` after each one. Returns the outcomes in VALIDATION.md order.

    Results of a previous run in ``out`` for the experiments about to run are removed first, so the report never
    shows a stale result as this run's. ``resume``: each experiment reuses its finished runs (``reproduce``);
    ``jobs``: each experiment simulates its runs on that many processes first.
    """
    root = Path(out)
    _, targets = load_validation()
    supported = [t.id for t in targets if t.supported]
    if ids is not None:
        unknown = [i for i in ids if i not in supported]
        if unknown:
            raise ConfigError(f"not a supported experiment: `{unknown[0]}`; supported: {', '.join(supported)}")
    todo = [i for i in supported if ids is None or i in ids]
    for i in todo:
        (root / i / RESULT_FILE).unlink(missing_ok=True)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    begin = time.perf_counter()
    meta: dict[str, Any] = {"started": started, "quick": quick, "experiments": todo, "version": uvmsim.__version__}
    meta |= {"cpus": os.cpu_count(), "elapsed_s": None}
    atomic_write_json(root / RUN_FILE, meta)
    write_report(root)
    outcomes = []
    for i in todo:
        if on_start is not None:
            on_start(i)
        outcome = run_experiment(i, root / i, quick=quick, resume=resume, jobs=jobs)
        outcomes.append(outcome)
        write_report(root)
        if on_done is not None:
            on_done(outcome)
    atomic_write_json(root / RUN_FILE, {**meta, "elapsed_s": round(time.perf_counter() - begin, 1)})
    write_report(root)
    return outcomes


def load_outcomes(out: Path) -> dict[str, Outcome]:
    """The outcomes found in ``out/*/result.json``, by experiment ID."""
    found = {}
    for p in sorted(Path(out).glob(f"*/{RESULT_FILE}")):
        o = Outcome.from_json(_read_json(p))
        found[o.id] = o
    return found


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def load_run_meta(out: Path) -> dict[str, Any]:
    """``out/run.json`` (when the run started, quick or not, elapsed seconds), or {} if absent."""
    p = Path(out) / RUN_FILE
    return _read_json(p) if p.is_file() else {}


# --- plots ------------------------------------------------------------------------------------------------


def _new_figure(width: float = 7.5, height: float = 4.0) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _numeric(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def reference(row: rep.Row) -> tuple[float, float, float] | None:
    """``(reference, low, high)`` of a comparison row, for plotting: the published number (or, for a textual
    published value, the bound or band centre of the tolerance) and the interval the tolerance accepts; None
    when the row has no number to compare with (an informational row with a textual published value)."""
    t = row.tolerance.strip()
    band = None
    if ".." in t:
        lo, hi = (float(x) for x in t.split("..", 1))
        band = (lo, hi)
    bound = None
    for sym in (">=", "<=", ">", "<"):
        if t.startswith(sym):
            bound = (sym, float(t[len(sym) :]))
            break
    if _numeric(row.published):
        ref = float(row.published)
    elif band is not None:
        ref = (band[0] + band[1]) / 2
    elif bound is not None:
        ref = bound[1]
    else:
        return None
    if t.endswith("%"):
        f = float(t.lstrip("±").rstrip("%")) / 100.0
        return ref, ref - f * abs(ref), ref + f * abs(ref)
    if t == "exact":
        return ref, ref, ref
    if band is not None:
        return ref, band[0], band[1]
    if bound is not None:
        return (ref, bound[1], math.inf) if bound[0].startswith(">") else (ref, -math.inf, bound[1])
    return ref, math.nan, math.nan  # info


STATUS_COLOURS = {"PASS": "#2e7d32", "FAIL": "#c62828", "INFO": "#757575"}


def comparison_bars(rows: Sequence[rep.Row], title: str = "") -> Figure:
    """Published against simulated value per check, both divided by the published value (so checks in any unit
    share one axis): a grey bar for the published value (1), a bar coloured by PASS / FAIL / INFO for the
    simulated one, and the interval the tolerance accepts as a black line. Rows without a numeric published
    value or bound are left out (they are in the report's table)."""
    import numpy as np

    pts = [(r, band) for r in rows if (band := reference(r)) is not None and band[0] != 0]
    if not pts:
        raise ValueError("no check has a numeric published value to plot")
    cap = 3.0  # ratios beyond are drawn at the cap, with their value written out
    fig = _new_figure(7.5, max(2.2, 0.42 * len(pts) + 1.2))
    ax = fig.add_subplot()
    y = np.arange(len(pts))[::-1].astype(float)
    h = 0.38
    for yi, (r, (ref, lo, hi)) in zip(y, pts, strict=True):
        ratio = r.simulated / ref
        shown = min(max(ratio, 0.0), cap) if math.isfinite(ratio) else 0.0
        ax.barh(yi + h / 2, 1.0, h, color="#bdbdbd")
        ax.barh(yi - h / 2, shown, h, color=STATUS_COLOURS[r.status])
        if math.isfinite(lo) or math.isfinite(hi):
            a = max(lo / ref if math.isfinite(lo) else 0.0, 0.0)
            b = min(hi / ref if math.isfinite(hi) else cap, cap)
            if ref < 0:
                a, b = b, a
            ax.plot([a, b], [yi - h / 2, yi - h / 2], color="black", linewidth=1.6)
            for edge, finite in ((a, math.isfinite(lo)), (b, math.isfinite(hi) and hi / ref <= cap)):
                if finite:
                    ax.plot([edge, edge], [yi - h, yi], color="black", linewidth=1.0)
            end = max(shown, b)
        else:
            end = shown
        label = f"{rep.fmt_value(round(r.simulated, 4) if math.isfinite(r.simulated) else r.simulated)}"
        ax.text(end + 0.04, yi - h / 2, label, va="center", fontsize=7)
    ax.set_yticks(y, [r.metric for r, _ in pts], fontsize=7)
    ax.set_xlim(0, cap + 0.45)
    ax.axvline(1.0, color="0.4", linewidth=0.6, linestyle=":")
    ax.set_xlabel("value / published (or the tolerance's bound)")
    from matplotlib.patches import Patch

    handles = [Patch(color="#bdbdbd", label="published")]
    handles += [Patch(color=c, label=f"simulated, {s}") for s, c in STATUS_COLOURS.items()]
    handles.append(Patch(facecolor="white", edgecolor="black", label="tolerance"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title or "published vs simulated", fontsize=10)
    return fig


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def walk_concurrency_plot(rows: Sequence[rep.Row], out: Path) -> Figure:
    """svm-apu Fig. 2: per-miss latency relative to one work-item against concurrent work-items, per series,
    with the knee bound and the published knees."""
    spec = rep.load_spec("apu-walk-concurrency")
    table = _read_csv(out / "latency.csv")
    fig = _new_figure()
    ax = fig.add_subplot()
    for series in dict.fromkeys(r["series"] for r in table):
        pts = [(int(r["work_items"]), float(r["vs_1"])) for r in table if r["series"] == series]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"simulated, {series}")
    ax.axhline(float(spec.params["knee_factor"]), color="0.3", linestyle="--", linewidth=0.8, label="knee bound")
    for c in spec.checks:
        if c.metric.startswith("knee_work_items.") and _numeric(c.published):
            ax.axvline(float(c.published), color="C3", linestyle=":", linewidth=1.0)
    ax.plot([], [], color="C3", linestyle=":", label="published knee (16; 32 with 32 walkers)")
    ax.set_xlabel("concurrent work-items")
    ax.set_ylabel("per-miss latency / latency at 1 work-item")
    ax.set_title("GPU TLB miss latency vs concurrency (svm-apu Fig. 2)", fontsize=10)
    ax.legend(fontsize=7)
    return fig


def base_cost_plot(rows: Sequence[rep.Row], out: Path) -> Figure:
    """uvm-driver Fig. 3.4: kernel time against data size, with the published 400-600 µs band below 100 KB."""
    table = _read_csv(out / "base_cost.csv")
    fig = _new_figure()
    ax = fig.add_subplot()
    kib = [float(r["kib"]) for r in table]
    ax.plot(kib, [float(r["kernel_us"]) for r in table], marker="o", label="simulated kernel time")
    ax.fill_between([min(kib), 100], 400, 600, color="C2", alpha=0.25, label="published: 400-600 µs below 100 KB")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("managed data (KiB)")
    ax.set_ylabel("kernel time (µs)")
    ax.set_title("UVM base cost (uvm-driver Fig. 3.4)", fontsize=10)
    ax.legend(fontsize=7)
    return fig


def batch_size_plot(rows: Sequence[rep.Row], out: Path) -> Figure:
    """uvm-driver Fig. 4.5: kernel time against the driver's batch size, one line per kernel and matrix size,
    each relative to its time at 1024 (Allen: faster up to 1024, flat beyond)."""
    table = _read_csv(out / "batch_size.csv")
    fig = _new_figure()
    ax = fig.add_subplot()
    lines = dict.fromkeys((r.get("kernel", ""), r.get("n", "")) for r in table)
    for kernel, n in lines:
        own = [r for r in table if (r.get("kernel", ""), r.get("n", "")) == (kernel, n)]
        base = next((float(r["kernel_ms"]) for r in own if int(r["batch_size"]) == 1024), 0.0) or 1.0
        xs, ys = [int(r["batch_size"]) for r in own], [float(r["kernel_ms"]) / base for r in own]
        ax.plot(xs, ys, marker="o", label=f"{kernel} n = {n}" if n else kernel or None)
    if len(lines) > 1:
        ax.legend(fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("uvm.batch_size")
    ax.set_ylabel("kernel time / kernel time at 1024")
    ax.set_title("Batch size (uvm-driver Fig. 4.5): published: faster to 1024, flat beyond", fontsize=10)
    return fig


def mpki_plot(rows: Sequence[rep.Row], out: Path) -> Figure:
    """multi-gpu Table 3: published and simulated L2-TLB MPKI per application (log scale), with the class
    bounds 0.1 and 1."""
    table = _read_csv(out / "mpki.csv")
    fig = _new_figure()
    ax = fig.add_subplot()
    x = range(len(table))
    ax.bar([i - 0.2 for i in x], [float(r["published_mpki"]) for r in table], width=0.4, label="published (Table 3)")
    ax.bar([i + 0.2 for i in x], [float(r["mpki"]) for r in table], width=0.4, label="simulated")
    for bound in (0.1, 1.0):
        ax.axhline(bound, color="0.3", linestyle="--", linewidth=0.8)
    star = {"True": "", "False": "*"}
    labels = [f"{r['app']}{star[r['counted']]}\n{r['published_class']}/{r['class']}" for r in table]
    ax.set_xticks(list(x), labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("L2 TLB misses per 1000 GCN3 instructions")
    ax.set_title("L2-TLB MPKI, class published/simulated (multi-gpu Table 3; * not counted)", fontsize=10)
    ax.legend(fontsize=7)
    return fig


def transfw_plot(rows: Sequence[rep.Row], out: Path) -> Figure:
    """multi-gpu Fig. 32: performance normalized to the GMMU baseline per application (PRT alone, host
    forwarding alone, Trans-FW, Trans-FW with a PRT that never overflows), with the published average (1.538)."""
    import numpy as np

    table = _read_csv(out / "speedups.csv")
    apps = [r["app"] for r in table]
    series = [
        ("prt_speedup", "PRT only"),
        ("forwarding_speedup", "forwarding only"),
        ("speedup", "Trans-FW"),
        ("large_prt_speedup", "Trans-FW, 65536-entry PRT"),
    ]
    fig = _new_figure(8.5, 4.0)
    ax = fig.add_subplot()
    x = np.arange(len(apps), dtype=float)
    w = 0.8 / len(series)
    for i, (col, label) in enumerate(series):
        ax.bar(x + (i - (len(series) - 1) / 2) * w, [float(r[col]) for r in table], w, label=label)
    ax.axhline(1.0, color="0.3", linewidth=0.8)
    ax.axhline(1.538, color="C3", linestyle="--", linewidth=1.0, label="published Trans-FW average (1.538)")
    ax.set_xticks(x, apps, fontsize=8)
    ax.set_ylabel("performance / baseline")
    ax.set_title("Trans-FW normalized performance (multi-gpu Fig. 32)", fontsize=10)
    ax.legend(fontsize=7)
    return fig


def zheng_eviction_plot(rows: Sequence[rep.Row], out: Path) -> Figure:
    """paged-memory Fig. 9: per workload, slowdown over copy-then-execute for each eviction/prefetch combination."""
    table = _read_csv(out / "slowdowns.csv")
    policies = list(dict.fromkeys(r["policy"] for r in table))
    apps = list(dict.fromkeys(r["workload"] for r in table))
    val = {(r["policy"], r["workload"]): float(r["slowdown_vs_copy"]) for r in table}
    fig = _new_figure(9.0, 4.0)
    ax = fig.add_subplot()
    w = 0.8 / len(policies)
    for i, pol in enumerate(policies):
        xs = [j + (i - (len(policies) - 1) / 2) * w for j in range(len(apps))]
        ax.bar(xs, [val[(pol, a)] for a in apps], width=w, label=pol)
    ax.set_xticks(range(len(apps)), apps, rotation=30, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("runtime / copy-then-execute")
    ax.set_title("50% oversubscription: eviction x continued prefetch (paged-memory Fig. 9)", fontsize=10)
    ax.legend(fontsize=7)
    return fig


def zheng_oversub_plot(rows: Sequence[rep.Row], out: Path) -> Figure:
    """paged-memory Fig. 10: per workload, slowdown over copy-then-execute against the fraction that fits."""
    table = _read_csv(out / "slowdowns.csv")
    fig = _new_figure()
    ax = fig.add_subplot()
    for app in dict.fromkeys(r["workload"] for r in table):
        pts = sorted((float(r["fraction_fits"]), float(r["slowdown_vs_copy"])) for r in table if r["workload"] == app)
        ax.plot([100 * p[0] for p in pts], [p[1] for p in pts], marker="o", label=app)
    ax.invert_xaxis()
    ax.set_yscale("log")
    ax.set_xlabel("% of the footprint that fits in GPU memory (100 = all)")
    ax.set_ylabel("runtime / copy-then-execute")
    ax.set_title("Oversubscription sensitivity (paged-memory Fig. 10)", fontsize=10)
    ax.legend(fontsize=7, ncol=3)
    return fig


def least_tlb_plot(rows: Sequence[rep.Row], out: Path) -> Figure:
    """multi-gpu Fig. 15: per-application performance with Least-TLB (spilling) normalized to the baseline mix,
    and each mix's weighted speedup ratio; the published check bars when the mixes were not run."""
    if not (out / "mixes.csv").exists():
        return comparison_bars(rows, "li-least-tlb: published vs simulated")
    table = _read_csv(out / "mixes.csv")
    mixes = list(dict.fromkeys(r["mix"] for r in table))
    fig = _new_figure(9.0, 4.0)
    ax = fig.add_subplot()
    x = 0.0
    ticks = []
    for mix in mixes:
        apps = [r for r in table if r["mix"] == mix]
        for i, r in enumerate(apps):
            ax.bar(x + i * 0.18, float(r["normalized"]), width=0.18, color=f"C{i}")
            ax.text(x + i * 0.18, 0.02, r["app"], rotation=90, fontsize=5, ha="center", va="bottom")
        ws = float(apps[0]["least_ws"]) / float(apps[0]["base_ws"])
        ax.bar(x + len(apps) * 0.18, ws, width=0.18, color="black")
        ticks.append((x + len(apps) * 0.09, mix))
        x += len(apps) * 0.18 + 0.5
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_xticks([t for t, _ in ticks], [m for _, m in ticks], fontsize=7)
    ax.set_ylabel("performance vs baseline mix")
    title = "Least-TLB, multi-application (Fig. 15): apps (colours), WS ratio (black); published WS +16.3% avg"
    ax.set_title(title, fontsize=9)
    return fig


# Experiment-specific figures, drawn from the experiment's own tables in its output directory.
def modern_presets_plot(rows: Sequence[rep.Row], out: Path) -> Figure:
    """Presets of modern systems: managed runtime over explicit copies, per preset and workload (no published
    number: the values are the presets' predictions)."""
    import numpy as np

    table = _read_csv(out / "modern_presets.csv")
    presets = list(dict.fromkeys(r["preset"] for r in table))
    workloads = list(dict.fromkeys(r["workload"] for r in table))
    value = {(r["preset"], r["workload"]): float(r["slowdown_vs_copy"]) for r in table}
    fig = _new_figure()
    ax = fig.add_subplot()
    x = np.arange(len(presets), dtype=float)
    w = 0.8 / max(1, len(workloads))
    for i, wl in enumerate(workloads):
        ax.bar(x + (i - (len(workloads) - 1) / 2) * w, [value[(p, wl)] for p in presets], w, label=wl)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(x, presets, fontsize=8)
    ax.set_ylabel("managed runtime / copy-then-execute")
    ax.set_title("Presets of modern systems: managed memory vs explicit copies (no published values)", fontsize=10)
    ax.legend(fontsize=7)
    return fig


PLOTTERS: dict[str, Callable[[Sequence[rep.Row], Path], Figure]] = {
    "apu-walk-concurrency": walk_concurrency_plot,
    "allen-base-cost": base_cost_plot,
    "allen-batch-size": batch_size_plot,
    "li-mpki": mpki_plot,
    "li-transfw": transfw_plot,
    "zheng-eviction": zheng_eviction_plot,
    "zheng-oversub-sweep": zheng_oversub_plot,
    "li-least-tlb": least_tlb_plot,
    "modern-presets": modern_presets_plot,
}


def write_plot(id: str, rows: Sequence[rep.Row], out: Path) -> Path:
    """Draw experiment ``id``'s plot (its own kind from ``PLOTTERS``, else ``comparison_bars``) to
    ``out/plot.png``."""
    from uvmsim.plot import save

    fig = PLOTTERS[id](rows, out) if id in PLOTTERS else comparison_bars(rows, f"{id}: published vs simulated")
    return save(fig, out / PLOT_FILE, "png")


# --- the HTML report ----------------------------------------------------------------------------------------

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 70em;
       padding: 0 1em; color: #212121; line-height: 1.4; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 2px solid #9e9e9e; }
.meta, .system { color: #616161; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #e0e0e0; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
section.experiment { border: 1px solid #e0e0e0; border-radius: 6px; padding: 0.4em 1em 1em; margin: 1em 0; }
.badge { display: inline-block; padding: 0.05em 0.5em; border-radius: 4px; color: white; font-weight: 600;
         font-size: 0.85em; white-space: nowrap; }
.PASS { background: #2e7d32; } .FAIL { background: #c62828; } .ERROR { background: #6a1b9a; }
.INFO { background: #757575; } .UNSUPPORTED { background: #9e9e9e; } .NOTRUN { background: #ef6c00; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; margin: 0.5em 0; }
dt { font-weight: 600; } dd { margin: 0; }
pre.error { background: #fbe9e7; padding: 0.5em; white-space: pre-wrap; }
img.plot { max-width: 100%; border: 1px solid #eeeeee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
"""

# Run by the browser: marks each plot that decoded (a test reads the marks from the rendered DOM).
SCRIPT = """
window.addEventListener("load", function () {
  document.querySelectorAll("img.plot").forEach(function (img) {
    img.setAttribute("data-rendered", img.complete && img.naturalWidth > 0 ? "yes" : "no");
  });
  document.body.setAttribute("data-loaded", "yes");
});
"""

UNSUPPORTED, NOT_RUN = "UNSUPPORTED", "NOTRUN"
_LABELS = {UNSUPPORTED: "not yet supported", NOT_RUN: "not run", "INFO": "info only"}


def experiment_status(target: Target, outcome: Outcome | None) -> str:
    """PASS, FAIL, INFO (no checks), ERROR, UNSUPPORTED (not yet supported) or NOTRUN (supported, no result in
    the directory)."""
    if not target.supported:
        return UNSUPPORTED
    return NOT_RUN if outcome is None else outcome.status


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _badge(status: str) -> str:
    return f'<span class="badge {status}">{_e(_LABELS.get(status, status))}</span>'


def _checks_text(outcome: Outcome | None) -> str:
    """``N of M checks`` of an outcome with comparison rows, else empty."""
    return f"{outcome.passed} of {len(outcome.checked)} checks" if outcome is not None and outcome.rows else ""


def _section(t: Target, outcome: Outcome | None, out: Path) -> str:
    status = experiment_status(t, outcome)
    title = rep.load_spec(t.id).title if t.supported else t.what
    parts = [
        f'<section class="experiment" id="{_e(t.id)}" data-id="{_e(t.id)}" data-status="{status}">',
        f"<h3><code>{_e(t.id)}</code>{' (fit)' if t.fit else ''} — {_e(title)} {_badge(status)}</h3>",
        "<dl>",
        f"<dt>What</dt><dd>{_e(t.what)}</dd>",
        f"<dt>Published</dt><dd>{_e(t.published)}</dd>",
        f"<dt>Tolerance</dt><dd>{_e(t.tolerance)}</dd>",
    ]
    if not t.supported:
        parts += [f'<dt>Status</dt><dd class="reason">not yet supported: {_e(t.reason)}</dd>', "</dl>", "</section>"]
        return "\n".join(parts)
    spec = rep.load_spec(t.id)
    parts.append(f"<dt>Command</dt><dd><code>uvmsim reproduce {_e(t.id)}</code> (preset {_e(spec.preset)})</dd>")
    if outcome is None:
        parts += ["<dt>Status</dt><dd>not run in this directory</dd>", "</dl>", "</section>"]
        return "\n".join(parts)
    parts.append(f"<dt>Run</dt><dd>{outcome.elapsed_s:.1f} s{', quick parameters' if outcome.quick else ''}</dd>")
    parts.append("</dl>")
    if outcome.error:
        parts.append(f'<pre class="error">{_e(outcome.error)}</pre>')
    if outcome.rows:
        parts.append(
            '<table class="checks"><tr><th>Metric</th><th>Published</th><th>Simulated</th><th>Unit</th>'
            "<th>Tolerance</th><th>Result</th><th>Source</th></tr>"
        )
        for r in outcome.rows:
            parts.append(
                f'<tr><td><code>{_e(r.metric)}</code></td><td class="num">{_e(rep.fmt_value(r.published))}</td>'
                f'<td class="num">{_e(rep.fmt_value(r.simulated))}</td><td>{_e(r.unit)}</td>'
                f"<td>{_e(r.tolerance)}</td><td>{_badge(r.status)}</td><td>{_e(r.source)}</td></tr>"
            )
        parts.append("</table>")
    png = out / t.id / outcome.plot if outcome.plot else None
    if png is not None and png.is_file():
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        parts.append(
            f'<figure><img class="plot" data-id="{_e(t.id)}" alt="plot of {_e(t.id)}" '
            f'src="data:image/png;base64,{data}"></figure>'
        )
    elif outcome.plot_error:
        parts.append(f'<pre class="error">plot failed: {_e(outcome.plot_error)}</pre>')
    parts.append("</section>")
    return "\n".join(parts)


def render_report(out: Path) -> str:
    """The HTML page of the results in ``out`` (every experiment of validation.toml, run or not)."""
    groups, targets = load_validation()
    outcomes = load_outcomes(out)
    meta = load_run_meta(out)
    statuses = {t.id: experiment_status(t, outcomes.get(t.id)) for t in targets}
    counts = {
        s: sum(v == s for v in statuses.values()) for s in ("PASS", "FAIL", "INFO", "ERROR", NOT_RUN, UNSUPPORTED)
    }
    elapsed = meta.get("elapsed_s")
    run_line = (
        f"{'quick parameters' if meta.get('quick') else 'full parameters'}; started {meta.get('started', '?')}"
        + (f"; all experiments in {elapsed:.0f} s on {meta.get('cpus')} CPUs" if elapsed is not None else "")
    )
    head = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>uvmsim reproduction report</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>uvmsim reproduction report</h1>",
        f'<p class="meta">uvmsim {_e(meta.get("version", uvmsim.__version__))}; {_e(run_line)}. '
        f"Every experiment of <code>shared/VALIDATION.md</code>: {counts['PASS']} pass, {counts['FAIL']} fail, "
        f"{counts['INFO']} info only, {counts['ERROR']} error, {counts[NOT_RUN]} not run, "
        f"{counts[UNSUPPORTED]} not yet supported.</p>",
        '<table id="summary"><tr><th>Experiment</th><th>What</th><th>Published</th><th>Tolerance</th>'
        "<th>Result</th></tr>",
    ]
    for t in targets:
        head.append(
            f'<tr data-id="{_e(t.id)}"><td><a href="#{_e(t.id)}"><code>{_e(t.id)}</code></a>'
            f"{' (fit)' if t.fit else ''}</td><td>{_e(t.what)}</td><td>{_e(t.published)}</td>"
            f"<td>{_e(t.tolerance)}</td><td>{_badge(statuses[t.id])} {_e(_checks_text(outcomes.get(t.id)))}</td></tr>"
        )
    head.append("</table>")
    body = []
    for g in groups:
        body.append(f'<h2 id="group-{_e(g.id)}">{_e(g.title)}</h2><p class="system">{_e(g.system)}</p>')
        body += [_section(t, outcomes.get(t.id), out) for t in targets if t.group == g.id]
    return "\n".join([*head, *body, f"<script>{SCRIPT}</script>", "</body></html>"]) + "\n"


def write_report(out: str | os.PathLike[str]) -> Path:
    """Write ``out/report.html`` from the results in ``out`` (atomically); return its path."""
    root = Path(out)
    path = root / REPORT_FILE
    text = render_report(root)

    def write(fd: int) -> None:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)

    atomic_write(path, write)
    return path


# --- docs/validation.md -------------------------------------------------------------------------------------


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _simulated_summary(outcome: Outcome | None) -> str:
    if outcome is None:
        return ""
    if outcome.error:
        return f"error: {outcome.error}"
    checked = outcome.checked
    if not checked:
        return f"{len(outcome.rows)} informational values (below)"
    if len(checked) > 4:
        return f"{outcome.passed} of {len(checked)} checks within tolerance (below)"
    return "; ".join(f"`{r.metric}` = {rep.fmt_value(round(r.simulated, 3))} {r.unit}".rstrip() for r in checked)


def markdown_table(out: Path, previous: str | None = None) -> str:
    """The summary table of ``docs/validation.md`` from the results in ``out``, between its markers.

    Each result says when its experiment ran and how long it took. An experiment with no result in ``out`` keeps
    its row from ``previous`` (the file's current text) when it has one, so re-running some experiments replaces
    only their rows; otherwise it is "not run".
    """
    return markdown_table_of(load_outcomes(out), load_run_meta(out), previous)


def markdown_table_of(outcomes: Mapping[str, Outcome], meta: Mapping[str, Any], previous: str | None = None) -> str:
    """``markdown_table`` from outcomes in hand (``meta``: the run's ``run.json``, may be empty)."""
    _, targets = load_validation()
    kept = _previous_rows(previous or "")
    cpus = meta.get("cpus") or os.cpu_count()
    version = meta.get("version", uvmsim.__version__)
    status = (
        "Each result gives the date its experiment ran and how long it took "
        f"(on a {cpus}-CPU machine, uvmsim {version}). "
        "`uvmsim reproduce ID -o DIR --markdown docs/validation.md` replaces that experiment's row; "
        "`--all` replaces every row."
    )
    supported = [t.id for t in targets if t.supported]
    # Each experiment's own duration: this invocation's, else the one its kept row records (an
    # update of one row keeps the total). Not the --all invocation's wall time: with --resume that
    # counts only the runs it simulated.
    durations = {i: outcomes[i].elapsed_s for i in supported if i in outcomes}
    durations |= {i: d for i in supported if i not in durations and (d := _kept_duration(kept.get(i, ""))) is not None}
    if set(supported) <= set(durations) and not meta.get("quick"):
        total = sum(durations.values())
        status += (
            f" The experiments' durations add up to {total / 60:.0f} min "
            "(a run reused by `--resume` counts the time it took when it ran)."
        )
    rows = []
    undated = False
    for t in targets:
        o = outcomes.get(t.id)
        st = experiment_status(t, o)
        name = f"`{t.id}`{' (fit)' if t.fit else ''}"
        if st == NOT_RUN and t.id in kept:
            rows.append(kept[t.id])
            undated |= "; ran " not in kept[t.id]
            continue
        if st == UNSUPPORTED:
            result = f"not yet supported: {t.reason}"
        elif st == NOT_RUN or o is None:  # (the same: a supported experiment without an outcome)
            result = "not run"
        else:
            if st == "ERROR":
                result = "error"
            elif not o.checked:  # every check is `info`: there is nothing to pass
                result = f"info only ({len(o.rows)} values, none checked)"
            else:
                result = f"{st.lower()} ({o.passed} of {len(o.checked)} checks)"
            result += f"; ran {o.finished[:10] or '?'} in {_duration(o.elapsed_s)}"
        rows.append(
            f"| {name} | {_md(t.published)} | {_md(_simulated_summary(o))} | {_md(t.tolerance)} | {_md(result)} |"
        )
    if undated:
        status += " Rows with no date were kept from a table written before dates were recorded."
    lines = [
        f"{MD_BEGIN}: generated by `uvmsim reproduce [ID | --all] -o DIR --markdown docs/validation.md`; "
        "do not edit by hand -->",
        "",
        status,
        "",
        "| Experiment | Published | Simulated | Tolerance | Result |",
        "|---|---|---|---|---|",
        *rows,
        "",
        MD_END,
    ]
    return "\n".join(lines)


def _previous_rows(text: str) -> dict[str, str]:
    """The summary rows of a previous table, by experiment ID (empty when ``text`` has no table)."""
    if MD_BEGIN not in text or MD_END not in text:
        return {}
    block = text[text.index(MD_BEGIN) : text.index(MD_END)]
    rows = {}
    for line in block.splitlines():
        if line.startswith("| `") and "`" in line[3:]:
            rows[line[3 : line.index("`", 3)]] = line
    return rows


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _kept_duration(row: str) -> float | None:
    """Seconds a kept summary row says its experiment took (``ran DATE in 86 s`` / ``in 2.6 min``), else None."""
    m = re.search(r"; ran \S+ in ([0-9.]+) (s|min)\b", row)
    if m is None:
        return None
    return float(m.group(1)) * (60 if m.group(2) == "min" else 1)


def update_markdown(path: Path, table: str) -> None:
    """Replace the text between the summary markers of ``path`` with ``table`` (which includes them)."""
    text = check_markdown_target(path)
    start = text.index(MD_BEGIN)
    end = text.index(MD_END, start) + len(MD_END)
    atomic_write_text(path, text[:start] + table + text[end:])


def check_markdown_target(path: Path) -> str:
    """The text of ``path``; ``ConfigError`` unless it holds the summary markers (checked before any run)."""
    text = read_input_text(Path(path), "markdown file")
    if MD_BEGIN not in text or MD_END not in text.partition(MD_BEGIN)[2]:
        raise ConfigError(
            f"{path}: no summary markers to replace between: the file needs a line starting with `{MD_BEGIN}` "
            f"and, after it, a line `{MD_END}`"
        )
    return text


def summary_counts(outcomes: Iterable[Outcome]) -> dict[str, int]:
    """How many outcomes are PASS, FAIL, INFO and ERROR."""
    counts = dict.fromkeys(("PASS", "FAIL", "INFO", "ERROR"), 0)
    for o in outcomes:
        counts[o.status] += 1
    return counts
