"""Reproductions of the seed papers' experiments (``uvmsim reproduce ID``).

Each experiment has a spec, ``data/experiments/ID.toml``: the preset, the
parameters of its runs (``[params]``, with smaller ``[quick]`` replacements for
smoke tests) and the published numbers to compare with (``[[checks]]``: metric,
published, unit, tolerance, source). The analysis is a function registered
here under the same ID; it performs the runs and returns the simulated value
of every check's metric. ``reproduce`` turns those into ``comparison.csv``.

Tolerances: ``info`` (reported, not checked), ``exact``, ``N%`` (relative to
the published number), a bound ``> X``, ``>= X``, ``< X``, ``<= X`` on the
simulated value, or a band ``A..B`` it must fall in.
"""

from __future__ import annotations

import builtins
import concurrent.futures as cf
import csv
import io
import json
import math
import operator
import os
import re
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvmsim
from uvmsim._core import ConfigError
from uvmsim._files import atomic_write_json, atomic_write_text
from uvmsim._names import nearest, plain_key
from uvmsim.presets import header

SPEC_DIR = Path(__file__).parent / "data" / "experiments"
COLUMNS = ("metric", "published", "simulated", "unit", "tolerance", "pass", "source")


@dataclass(frozen=True)
class Check:
    """One published number and how closely the simulation must match it."""

    metric: str
    published: float | int | str
    unit: str
    tolerance: str
    source: str


@dataclass(frozen=True)
class Spec:
    """An experiment's spec file, parsed."""

    id: str
    title: str
    description: str
    preset: str
    params: dict[str, Any]
    quick: dict[str, Any]
    checks: list[Check]
    path: Path

    def run_params(self, quick: bool) -> dict[str, Any]:
        """``[params]``, with ``[quick]`` laid over it when ``quick`` (its ``set`` table merged key by key)."""
        if not quick:
            return dict(self.params)
        merged = {**self.params, **self.quick}
        merged["set"] = {**self.params.get("set", {}), **self.quick.get("set", {})}
        return merged


@dataclass(frozen=True)
class Row:
    """One line of ``comparison.csv``; ``passed`` is None for informational rows."""

    metric: str
    published: float | int | str
    simulated: float
    unit: str
    tolerance: str
    passed: bool | None
    source: str

    @property
    def status(self) -> str:
        return "INFO" if self.passed is None else ("PASS" if self.passed else "FAIL")


#: Written to ``runs/NAME`` by a run that reached its event budget (``sim.max_events``): its configuration and message.
BUDGET_FILE = "budget_exceeded.json"


@dataclass
class Context:
    """What an analysis function gets: the spec, its parameters and where to put its runs."""

    spec: Spec
    params: dict[str, Any]
    out: Path
    runs: dict[str, uvmsim.Result] = field(default_factory=dict)
    #: Reuse ``runs/NAME/summary.json`` when its configuration is the one this run would use (an interrupted
    #: experiment goes on where it stopped; runs of a changed uvmsim build are not detected: re-run without it).
    resume: bool = False
    #: Simulation wall time of the runs reused from ``out/runs`` instead of run again: ``sim.total_wall_s``
    #: (with an oracle's first pass and the baselines), or ``sim.wall_s`` for a run stored before it existed.
    reused_s: float = 0.0
    #: Runs this invocation already finished ahead, in parallel (``jobs`` > 1): reused as resumed runs are; their
    #: time is in the experiment's wall clock, not in ``reused_s``.
    fresh: set[str] = field(default_factory=set)
    #: Planning (``plan_runs``): each run is listed, not simulated, and every metric of its result reads 1.
    planned: list[tuple[str, dict[str, Any], str]] | None = None
    #: The user's overrides (``uvmsim reproduce --set``): over the preset and the spec's common ``set``, under what
    #: the analysis sets per run (the values it varies stay varied).
    user_set: dict[str, Any] = field(default_factory=dict)
    #: Keys of ``user_set`` that some run set to another value itself, and how many runs took ``user_set``.
    shadowed: set[str] = field(default_factory=set)
    user_runs: int = 0
    #: The runs that set each key of ``shadowed`` themselves: key -> run names.
    shadowed_in: dict[str, set[str]] = field(default_factory=dict)
    #: Keys of ``user_set`` left out of runs whose mode does not read them (an experiment that compares an
    #: IOMMU preset with GMMU ones): key -> {run name: why}.
    left_out: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Told of each run as it finishes (``uvmsim reproduce`` prints a progress line): its name and its simulation
    #: wall time in seconds, or None when its stored summary was reused. Runs finished ahead (``jobs``) are told
    #: by ``run_ahead`` as they finish, not again when the analysis reads them back.
    on_run: Callable[[str, float | None], None] | None = None

    def run(self, name: str, set: Mapping[str, Any], preset: str | None = None) -> uvmsim.Result:
        """Run the spec's preset (or ``preset``, for experiments that compare systems) with the spec's common
        ``set`` plus ``set``; keep the summary in ``runs/NAME``."""
        for k, v in self.user_set.items():
            if k in set and set[k] != v:
                self.shadowed.add(k)
                self.shadowed_in.setdefault(k, builtins.set()).add(name)
        self.user_runs += bool(self.user_set)
        preset = preset or self.spec.preset
        common = self.params.get("set", {})
        skip = unread_user_keys(preset, common, self.user_set, set)
        for key, why in skip.items():
            self.left_out.setdefault(key, {})[name] = why
        user = {k: v for k, v in self.user_set.items() if k not in skip}
        overrides = {**common, **user, **set}
        if self.planned is not None:
            if len(self.planned) >= PLAN_LIMIT:
                raise _PlanEnd
            self.planned.append((name, overrides, preset))
            return uvmsim.Result(metrics=_Placeholder(), config={}, version="plan")
        out = self.out / "runs" / name
        reuse = self.resume or name in self.fresh
        result = self._stored(out, overrides, preset) if reuse else None
        if result is not None:
            if name not in self.fresh:
                m = result.metrics
                self.reused_s += float(m.get("sim.total_wall_s", m.get("sim.wall_s", 0.0)))
                if self.on_run is not None:
                    self.on_run(name, None)
        else:
            start = time.perf_counter()
            result = _simulate(out, overrides, preset)
            if self.on_run is not None:
                self.on_run(name, time.perf_counter() - start)
        self.runs[name] = result
        return result

    def _stored(self, out: Path, overrides: Mapping[str, Any], preset: str) -> uvmsim.Result | None:
        """The run stored in ``out`` if it finished with the configuration ``overrides`` resolve to; raises
        ``BudgetExceeded`` again when that configuration reached its event budget there."""
        if (out / BUDGET_FILE).is_file():
            try:
                noted = json.loads((out / BUDGET_FILE).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                noted = {}
            if noted.get("config") == uvmsim.resolve(preset=preset, set=overrides):
                raise uvmsim.BudgetExceeded(noted.get("error", "event budget reached (stored)"))
        if not (out / uvmsim.SUMMARY_FILE).is_file():
            return None
        try:
            stored = uvmsim.load(out)
        except uvmsim.ConfigError:
            return None  # a damaged summary: run again
        return stored if stored.config == uvmsim.resolve(preset=preset, set=overrides) else None


def unread_user_keys(
    preset: str, common: Mapping[str, Any], user: Mapping[str, Any], per_run: Mapping[str, Any]
) -> dict[str, str]:
    """The keys of ``user`` (``reproduce --set``) that a run of ``preset`` with the experiment's ``common`` and
    ``per_run`` settings does not read in its mode, each with the resolver's reason: ``--set`` applies to the
    experiment's other runs and is left out of these, where the resolver would refuse it. The keys are resolved
    as a preset-level layer (which may carry unread keys), so that they still decide the mode they are read
    in. Keys the run sets itself are not the user's there and are not listed. A configuration that does not
    resolve lists nothing: the run then reports its error as it would without this."""
    mine = {k: v for k, v in user.items() if k not in per_run}
    if not mine:
        return {}
    rest = {k: v for k, v in {**common, **per_run}.items() if k not in mine}
    try:
        layers = uvmsim.sources(None, preset) + [("--set", _as_layer(mine), True)]
        found = json.loads(uvmsim._core.unread(layers, uvmsim.overrides(rest), list(mine)))
    except (ConfigError, TypeError):
        return {}
    return {str(k): str(v) for k, v in found.items()}


def _as_layer(user: Mapping[str, Any]) -> str:
    """Dotted-key overrides as the TOML text of a config layer."""
    return "".join(f"{k} = {uvmsim.toml_value(v)}\n" for k, v in user.items())


def check_user_set(spec: Spec, user: Mapping[str, Any], quick: bool = False) -> None:
    """Refuse, before any run (``ConfigError``), a ``reproduce --set`` key or value the resolver refuses on the
    spec's preset (an unknown key, a bad value), or a key that no run of the experiment reads. A key that the
    preset's mode does not read but other runs' modes do passes, its value checked as a preset's would be;
    the runs it is left out of are listed in ``Context.left_out``."""
    _check_keys(spec.preset, user)
    ctx = Context(spec=spec, params=spec.run_params(quick), out=Path("."), user_set=dict(user))
    never = never_read(ctx, REGISTRY[spec.id])
    if never:
        key, why = next(iter(never.items()))
        raise ConfigError(f"--set: key `{key}` {why}, in every run of {spec.id}: it would change nothing")


def _check_keys(preset: str, user: Mapping[str, Any]) -> None:
    """``check_user_set``'s check of the keys and values on ``preset``."""
    try:
        uvmsim.resolve(preset=preset, set=dict(user))
    except ConfigError:
        # Refused only because the preset's mode does not read some keys: `unread_user_keys` resolved them as a
        # preset-level layer (values checked) and listed them. Anything else lists nothing: the refusal stands.
        if not unread_user_keys(preset, {}, user, {}):
            raise


#: Planning stops after this many runs (an analysis that searches could otherwise list runs without end).
PLAN_LIMIT = 5000


class _PlanEnd(Exception):
    """Planning listed ``PLAN_LIMIT`` runs."""


class _Placeholder(dict[str, float | int]):
    """A planned run's metrics: every one reads 1, so the analysis goes on to list its next runs."""

    def __missing__(self, key: str) -> float:
        return 1.0


def _simulate(out: Path, overrides: Mapping[str, Any], preset: str) -> uvmsim.Result:
    """Run one configuration into ``out``; a run that reaches its event budget is noted there (see ``_stored``)."""
    try:
        result = uvmsim.run(preset=preset, set=dict(overrides), out=out)
    except uvmsim.BudgetExceeded as e:
        # Noted, so that a resumed experiment does not spend the whole budget on it again.
        config = uvmsim.resolve(preset=preset, set=dict(overrides))
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / BUDGET_FILE, {"config": config, "error": str(e)})
        raise
    (out / BUDGET_FILE).unlink(missing_ok=True)
    return result


def _simulate_ahead(out: str, overrides: dict[str, Any], preset: str) -> float:
    """A worker's part of ``run_ahead``: the run is stored in ``out``; the result goes back through the disk.
    Returns its wall time in seconds."""
    start = time.perf_counter()
    try:
        _simulate(Path(out), overrides, preset)
    except uvmsim.BudgetExceeded:
        pass  # noted in ``out``: the analysis meets it again there
    return time.perf_counter() - start


def plan_runs(ctx: Context, analysis: Analysis) -> list[tuple[str, dict[str, Any], str]]:
    """The runs ``analysis`` asks for, found by calling it with results whose metrics all read 1 (nothing is
    simulated; its files go to a scratch directory). Where an analysis needs real numbers to go on (a search, a
    table it reads), it fails there and only the runs listed until then are returned."""
    plan, _ = _plan(ctx, analysis)
    assert plan.planned is not None
    return plan.planned


def planned_count(ctx: Context, analysis: Analysis) -> int | None:
    """How many distinct runs ``analysis`` will ask for, if planning lists them all (None where it stops early)."""
    return _count(*_plan(ctx, analysis))


def _count(plan: Context, complete: bool) -> int | None:
    assert plan.planned is not None
    return len({name for name, _, _ in plan.planned}) if complete else None


def expected_runs(
    spec: Spec, quick: bool = False, user_set: Mapping[str, Any] | None = None
) -> tuple[int | None, set[str]]:
    """From one planning pass of experiment ``spec``: how many runs it will simulate (``planned_count``), for a
    progress count, and the ``user_set`` keys it sets itself in some of the runs planning foresees
    (``Context.shadowed`` of the plan), so that ``uvmsim reproduce --set`` can say so before the runs."""
    ctx = Context(spec=spec, params=spec.run_params(quick), out=Path("."), user_set=dict(user_set or {}))
    plan, complete = _plan(ctx, REGISTRY[spec.id])
    return _count(plan, complete), plan.shadowed


def _plan(ctx: Context, analysis: Analysis) -> tuple[Context, bool]:
    """``analysis`` run on placeholder results (see ``plan_runs``): the planning context, its runs listed, and
    whether the analysis ran to its end (every run listed)."""
    with tempfile.TemporaryDirectory(prefix="uvmsim-plan-") as scratch:
        plan = Context(spec=ctx.spec, params=ctx.params, out=Path(scratch), planned=[], user_set=ctx.user_set)
        try:
            analysis(plan)
        except Exception:  # noqa: BLE001 - any failure on placeholder numbers just ends the plan
            return plan, False
    return plan, True


def run_ahead(ctx: Context, analysis: Analysis, jobs: int) -> None:
    """Simulate the runs ``analysis`` will ask for on ``jobs`` worker processes, each into ``out/runs/NAME``, and
    mark them fresh, so that the analysis, run next as usual, reads them back instead of simulating them one
    at a time. Runs it asks for that planning could not foresee, or that failed here, it simulates itself (a
    failure is then reported as without ``jobs``). Metrics are the same either way: each run is deterministic."""
    by_name: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for name, overrides, preset in plan_runs(ctx, analysis):
        by_name.setdefault(name, []).append((overrides, preset))
    todo = []
    for name, configs in by_name.items():
        if any(c != configs[0] for c in configs):
            continue  # one name, several configurations: the analysis runs them in its own order
        overrides, preset = configs[0]
        if ctx.resume:
            try:
                if ctx._stored(ctx.out / "runs" / name, overrides, preset) is not None:
                    continue
            except uvmsim.BudgetExceeded:
                continue
        todo.append((name, overrides, preset))
    if not todo:
        return
    from uvmsim.sweep import worker_pool  # the pool that stops its workers on Ctrl-C

    with worker_pool(jobs) as pool:
        futures = {
            pool.submit(_simulate_ahead, str(ctx.out / "runs" / name), overrides, preset): name
            for name, overrides, preset in todo
        }
        for fut in cf.as_completed(futures):
            try:
                wall = fut.result()
            except Exception:  # noqa: BLE001 - the analysis runs it again and reports the error
                continue
            ctx.fresh.add(futures[fut])
            if ctx.on_run is not None:
                ctx.on_run(futures[fut], wall)


Analysis = Callable[[Context], dict[str, float]]
REGISTRY: dict[str, Analysis] = {}


def experiment(id: str) -> Callable[[Analysis], Analysis]:
    """Register an analysis function under an experiment ID (its spec is ``data/experiments/ID.toml``)."""

    def register(fn: Analysis) -> Analysis:
        REGISTRY[id] = fn
        return fn

    return register


def list_experiments() -> list[Spec]:
    """The specs of all registered experiments, sorted by ID."""
    return [load_spec(i) for i in sorted(REGISTRY)]


def load_spec(id: str) -> Spec:
    """The parsed spec of experiment ``id``; ``ConfigError`` naming the nearest ID if there is none."""
    if id not in REGISTRY:
        ids = sorted(REGISTRY)
        near = nearest(id, ids)
        hint = f"did you mean `{near}`? " if near else ""
        raise ConfigError(f"unknown experiment `{id}`; {hint}available: {', '.join(ids)}")
    path = SPEC_DIR / f"{id}.toml"
    text = path.read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    checks = [
        Check(c["metric"], c["published"], c.get("unit", ""), str(c.get("tolerance", "info")), c.get("source", ""))
        for c in raw.get("checks", [])
    ]
    for c in checks:
        parse_tolerance(c.tolerance)  # a typo in a spec fails loudly, not as a silent pass
    return Spec(
        id=id,
        title=raw["title"],
        description=header(text),
        preset=raw["preset"],
        params=raw.get("params", {}),
        quick=raw.get("quick", {}),
        checks=checks,
        path=path,
    )


_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}


def parse_tolerance(tol: str) -> Callable[[float | int | str, float], bool] | None:
    """A predicate ``(published, simulated) -> bool`` for a tolerance string; None for ``info``."""
    t = tol.strip()
    if t == "info":
        return None
    if t == "exact":
        return lambda pub, sim: isinstance(pub, int | float) and sim == pub
    if t.endswith("%"):
        frac = float(t.lstrip("±").rstrip("%")) / 100.0
        return lambda pub, sim: isinstance(pub, int | float) and abs(sim - pub) <= frac * abs(pub)
    if ".." in t:
        lo, hi = (float(x) for x in t.split("..", 1))
        return lambda _pub, sim: lo <= sim <= hi
    for sym in (">=", "<=", ">", "<"):  # two-character operators first
        if t.startswith(sym):
            bound, op = float(t[len(sym) :]), _OPS[sym]
            return lambda _pub, sim: op(sim, bound)
    raise ValueError(f"bad tolerance `{tol}`: expected info, exact, N%, A..B, or >, >=, <, <= followed by a number")


def compare(checks: list[Check], simulated: Mapping[str, float]) -> list[Row]:
    """One row per check. A NaN simulated value (e.g. no knee found) fails its check."""
    rows = []
    for c in checks:
        if c.metric not in simulated:
            raise KeyError(f"the analysis produced no value for check `{c.metric}`")
        sim = float(simulated[c.metric])
        pred = parse_tolerance(c.tolerance)
        passed = None if pred is None else (not math.isnan(sim) and bool(pred(c.published, sim)))
        rows.append(Row(c.metric, c.published, sim, c.unit, c.tolerance, passed, c.source))
    return rows


def fmt_value(v: float | int | str) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def write_csv(path: Path, header_row: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header_row)
    for r in rows:
        w.writerow([fmt_value(x) for x in r])
    atomic_write_text(path, buf.getvalue())


def reproduce(
    id: str,
    out: str | Path,
    *,
    quick: bool = False,
    resume: bool = False,
    jobs: int = 1,
    set: Mapping[str, Any] | None = None,
) -> list[Row]:
    """Run experiment ``id``, write ``out/comparison.csv`` (and ``out/runs/*``), return the rows.

    ``resume``: reuse the runs already in ``out/runs`` whose stored configuration matches (see ``Context``).
    ``jobs`` > 1: simulate the experiment's runs on that many processes first (``run_ahead``).
    ``set``: config overrides (dotted keys) for every run, over the preset and the experiment's common settings but
    under the values the experiment varies per run; they are written to ``out/overrides.toml``."""
    return reproduce_context(id, out, quick=quick, resume=resume, jobs=jobs, set=set)[0]


#: Written to an experiment's output directory when it ran with ``set`` overrides (removed when it ran without).
OVERRIDES_FILE = "overrides.toml"


def parse_sets(sets: list[str]) -> dict[str, Any]:
    """``key=value`` strings as a mapping, each value read as ``uvmsim run --set`` reads it: TOML (numbers,
    booleans, quoted strings, arrays), anything else a bare string. Keys and values are checked when a run
    resolves them (``uvmsim.resolve``)."""
    out: dict[str, Any] = {}
    for item in sets:
        key, eq, raw = item.partition("=")
        if not eq:
            raise ConfigError(f"--set: `{item}` is not of the form key.path=value")
        raw = raw.strip()
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        out[plain_key(key)] = value  # `"gpu.sms"` and gpu.sms are one key, as the core reads them
    return out


def write_overrides(ctx: Context) -> None:
    """``OVERRIDES_FILE``: the user's ``--set`` overrides, and the runs each was left out of (``Context.left_out``)."""
    lines = [
        "# uvmsim reproduce --set: these overrides applied to every run of this experiment, except where the\n",
        "# experiment sets the key itself per run, or the run's mode does not read the key (listed below it)\n",
    ]
    for k, v in ctx.user_set.items():
        lines.append(f"{k} = {uvmsim.toml_value(v)}\n")
        runs = ctx.left_out.get(k, {})
        if runs:
            why = sorted(set(runs.values()))
            lines.append(f"# {k} left out of {len(runs)} run(s): {', '.join(sorted(runs))}; it {'; '.join(why)}\n")
    atomic_write_text(ctx.out / OVERRIDES_FILE, "".join(lines))


def never_read(ctx: Context, analysis: Analysis) -> dict[str, str]:
    """The keys of ``ctx.user_set`` that no run ``analysis`` plans reads (each with a reason), found by planning
    (``plan_runs``): ``--set`` would change nothing. Empty when planning lists no run. A key is not read by a run
    that sets it itself (the experiment varies it): a key every run sets, or leaves out, is listed too, when
    planning saw every run."""
    plan, complete = _plan(ctx, analysis)
    assert plan.planned is not None
    names = {name for name, _, _ in plan.planned}
    never = {k: next(iter(runs.values())) for k, runs in plan.left_out.items() if names and set(runs) >= names}
    for k, runs in plan.shadowed_in.items():
        if complete and k not in never and set(runs) | set(plan.left_out.get(k, {})) >= names:
            never[k] = "is set by the experiment itself"
    return never


def reproduce_context(
    id: str,
    out: str | Path,
    *,
    quick: bool = False,
    resume: bool = False,
    jobs: int = 1,
    set: Mapping[str, Any] | None = None,
    on_run: Callable[[str, float | None], None] | None = None,
) -> tuple[list[Row], Context]:
    """``reproduce``, also returning the experiment's ``Context`` (its runs, and the time of the reused ones).
    ``on_run`` is told of each run as it finishes (``Context.on_run``)."""
    spec = load_spec(id)
    user_set = dict(set or {})
    if user_set:
        check_user_set(spec, user_set, quick)  # a bad key or value fails here (ConfigError), before any run
    ctx = Context(
        spec=spec, params=spec.run_params(quick), out=Path(out), resume=resume, user_set=user_set, on_run=on_run
    )
    ctx.out.mkdir(parents=True, exist_ok=True)
    if user_set:
        write_overrides(ctx)
    else:
        (ctx.out / OVERRIDES_FILE).unlink(missing_ok=True)
    if jobs > 1:
        run_ahead(ctx, REGISTRY[id], jobs)
    simulated = REGISTRY[id](ctx)
    if ctx.left_out:
        write_overrides(ctx)
    rows = compare(spec.checks, simulated)
    write_csv(
        ctx.out / "comparison.csv",
        COLUMNS,
        [
            (
                r.metric,
                r.published,
                r.simulated,
                r.unit,
                r.tolerance,
                "" if r.passed is None else str(r.passed).lower(),
                r.source,
            )
            for r in rows
        ],
    )
    return rows, ctx


# --- svm-apu (Vesely et al., ISPASS 2016) -------------------------------------------------------

KERNEL_NS = "time.kernel_ns"
GPU_LLT_MISSES = "gpu0.l2tlb.misses"  # the GPU's last-level TLB misses = translations asked of the IOMMU


def _stride_run(ctx: Context, name: str, kind: str, work_items: int, stride: int, accesses: int) -> uvmsim.Result:
    p = f"workload.{kind}"
    return ctx.run(
        name,
        {
            "workload.kind": kind,
            f"{p}.work_items": work_items,
            f"{p}.accesses": accesses,
            f"{p}.stride_bytes": stride,
        },
    )


@experiment("apu-tlb-miss-latency")
def tlb_miss_latency(ctx: Context) -> dict[str, float]:
    """Table 3: the extra runtime of the page-stride run over the line-stride run, per extra TLB miss."""
    p = ctx.params
    line = _stride_run(ctx, "stride-line", "stride", p["work_items"], p["line_stride_bytes"], p["accesses"])
    page = _stride_run(ctx, "stride-page", "stride", p["work_items"], p["page_stride_bytes"], p["accesses"])
    dt = page.metrics[KERNEL_NS] - line.metrics[KERNEL_NS]
    dm = page.metrics[GPU_LLT_MISSES] - line.metrics[GPU_LLT_MISSES]
    return {
        "tlb_miss_latency_ns": dt / dm if dm > 0 else math.nan,
        "l2tlb_misses.stride_line": line.metrics[GPU_LLT_MISSES],
        "l2tlb_misses.stride_page": page.metrics[GPU_LLT_MISSES],
        "runtime_us.stride_line": line.metrics[KERNEL_NS] / 1e3,
        "runtime_us.stride_page": page.metrics[KERNEL_NS] / 1e3,
    }


def wavefront_miss_latency(t_page: float, t_line: float, m_page: float, m_line: float, n: int) -> float:
    """Fig. 2's latency seen by the wavefront per miss: Δruntime / (Δmisses / N).

    The N work-items of one wavefront miss together, so Δmisses / N is the number of times the wavefront waits.
    """
    dm = (m_page - m_line) / n
    return (t_page - t_line) / dm if dm > 0 else math.nan


def knee(latencies: Mapping[int, float], factor: float) -> tuple[int | None, int | None]:
    """``(knee, next)``: the largest N with L(N') <= factor * L(1) for every N' <= N, and the N after it.

    ``next`` is None when the latency never rises past the bound; ``knee`` is None when L(smallest N) is not finite.
    """
    ns = sorted(latencies)
    base = latencies[ns[0]]
    if not math.isfinite(base):
        return None, None
    last = None
    for n in ns:
        if not latencies[n] <= factor * base:  # also stops at NaN
            return last, n
        last = n
    return last, None


@experiment("apu-walk-concurrency")
def walk_concurrency(ctx: Context) -> dict[str, float]:
    """Fig. 2: per-miss latency vs concurrent work-items; the knee is the number of concurrent IOMMU walks."""
    p = ctx.params
    factor = float(p["knee_factor"])
    out: dict[str, float] = {}
    table: list[tuple[Any, ...]] = []
    for series in p["series"]:
        name = series["name"]
        lat: dict[int, float] = {}
        for n in p["work_items"]:
            runs = {}
            for label, stride in (("line", p["line_stride_bytes"]), ("page", p["page_stride_bytes"])):
                r = ctx.run(
                    f"{name}-n{n}-{label}",
                    {
                        **series.get("set", {}),
                        "workload.kind": "concurrency",
                        "workload.concurrency.work_items": n,
                        "workload.concurrency.accesses": p["accesses"],
                        "workload.concurrency.stride_bytes": stride,
                    },
                )
                runs[label] = (r.metrics[KERNEL_NS], r.metrics[GPU_LLT_MISSES])
            (t_line, m_line), (t_page, m_page) = runs["line"], runs["page"]
            lat[n] = wavefront_miss_latency(t_page, t_line, m_page, m_line, n)
            table.append((name, n, t_page, t_line, m_page, m_line, lat[n]))
        k, nxt = knee(lat, factor)
        base = lat[min(lat)]
        out[f"knee_work_items.{name}"] = math.nan if k is None else k
        out[f"rise_after_knee.{name}"] = math.nan if nxt is None else lat[nxt] / base
        out[f"latency_ns_1.{name}"] = base
    rows = [(*r, r[-1] / out[f"latency_ns_1.{r[0]}"]) for r in table]
    write_csv(
        ctx.out / "latency.csv",
        (
            "series",
            "work_items",
            "kernel_ns_page",
            "kernel_ns_line",
            "misses_page",
            "misses_line",
            "latency_ns",
            "vs_1",
        ),
        rows,
    )
    return out


@experiment("apu-divergence")
def divergence(ctx: Context) -> dict[str, float]:
    """Fig. 4: unsorted/sorted runtime of a table-lookup kernel with 4 KiB and 1 GiB pages."""
    p = ctx.params
    t: dict[tuple[str, bool], float] = {}
    for page in p["page_sizes"]:
        for sorted_keys in (True, False):
            name = f"{'sorted' if sorted_keys else 'unsorted'}-{page}"
            r = ctx.run(
                name,
                {
                    "workload.kind": "gather",
                    "workload.gather.table_entries": p["table_entries"],
                    "workload.gather.entry_bytes": p["entry_bytes"],
                    "workload.gather.lookups": p["lookups"],
                    "workload.gather.threads": p["threads"],
                    "workload.gather.sorted": sorted_keys,
                    "translation.page_size": page,
                },
            )
            t[(page, sorted_keys)] = r.metrics[KERNEL_NS]
    small, huge = p["page_sizes"]
    slow_small = t[(small, False)] / t[(small, True)]
    slow_huge = t[(huge, False)] / t[(huge, True)]
    return {
        f"slowdown.{small}": slow_small,
        f"slowdown.{huge}": slow_huge,
        f"slowdown_ratio.{small}_over_{huge}": slow_small / slow_huge,
    }


# --- MGPUSim traces (shared/traces/mgpusim) -------------------------------------------------------


def traces_dir() -> Path:
    """Where the MGPUSim traces are: ``UVMSIM_TRACE_DIR``, else ``shared/traces/mgpusim`` beside the checkout."""
    env = os.environ.get("UVMSIM_TRACE_DIR")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve()
    candidates += [p / "shared" / "traces" / "mgpusim" for p in (*here.parents, *Path.cwd().resolve().parents)]
    candidates.append(Path.cwd() / "shared" / "traces" / "mgpusim")
    for c in candidates:
        if (c / "REFERENCE.md").is_file():
            return c
    raise ConfigError(
        "the MGPUSim traces were not found: set UVMSIM_TRACE_DIR to the folder holding "
        "shared/traces/mgpusim (README.md, REFERENCE.md, *.csv.gz)"
    )


@experiment("mgpusim-tlb")
def mgpusim_tlb(ctx: Context) -> dict[str, float]:
    """Replay MGPUSim's traces and compare L1/L2 TLB hits, misses and MSHR hits with its own statistics."""
    folder = traces_dir()
    out: dict[str, float] = {}
    table: list[tuple[Any, ...]] = []
    ties: list[tuple[str, int, float]] = []
    for t in ctx.params["traces"]:
        name, gpus = t["name"], int(t["gpus"])
        total = dict.fromkeys(("l1h", "l1m", "l1s", "l2h", "l2m", "l2s"), 0.0)
        for g in range(1, gpus + 1):
            r = ctx.run(
                f"{name}-gpu{g}",
                {
                    "workload.kind": "trace",
                    "workload.trace.path": str(folder / f"{name}.csv.gz"),
                    "workload.trace.gpu": g,
                    "workload.trace.engine": str(t.get("engine", "event")),
                },
            )
            m = r.metrics
            for key, metric in (
                ("l1h", "gpu0.l1tlb.hits"),
                ("l1m", "gpu0.l1tlb.misses"),
                ("l1s", "gpu0.l1tlb.mshr_hits"),
                ("l2h", "gpu0.l2tlb.hits"),
                ("l2m", "gpu0.l2tlb.misses"),
                ("l2s", "gpu0.l2tlb.mshr_hits"),
            ):
                total[key] += m[metric]
        out[f"l1_hits.{name}"] = total["l1h"]
        out[f"l1_miss_plus_mshr_hit.{name}"] = total["l1m"] + total["l1s"]
        # The cycle engine's own spread: the same trace with same-cycle events in seeded orders.
        seeds = [int(s) for s in t.get("tie_seeds", [])]
        for s in seeds:
            r = ctx.run(
                f"{name}-tie{s}",
                {
                    "workload.kind": "trace",
                    "workload.trace.path": str(folder / f"{name}.csv.gz"),
                    "workload.trace.engine": str(t.get("engine", "event")),
                    "workload.trace.tie_seed": s,
                },
            )
            hits = float(r.metrics["gpu0.l1tlb.hits"])
            ties.append((name, s, hits))
        if seeds:
            spread = [h for n, _, h in ties if n == name] + [total["l1h"]]
            out[f"l1_hits_tie_min.{name}"] = min(spread)
            out[f"l1_hits_tie_max.{name}"] = max(spread)
        out[f"l2_hits.{name}"] = total["l2h"]
        out[f"l2_miss_plus_mshr_hit.{name}"] = total["l2m"] + total["l2s"]
        table.append((name, *(total[k] for k in ("l1h", "l1m", "l1s", "l2h", "l2m", "l2s"))))
    write_csv(
        ctx.out / "tlb.csv",
        ("trace", "l1_hits", "l1_misses", "l1_mshr_hits", "l2_hits", "l2_misses", "l2_mshr_hits"),
        table,
    )
    write_csv(ctx.out / "ties.csv", ("trace", "tie_seed", "l1_hits"), ties)
    return out


# --- uvm-driver (Allen, PhD thesis 2022) ----------------------------------------------------------


def _batch_rows(result: uvmsim.Result) -> list[dict[str, Any]]:
    """The run's per-batch records as row dicts (none when the run recorded no batch)."""
    batches = result.tables.get("batches")
    return [] if batches is None else batches.to_dict(orient="records")


@experiment("allen-vecadd-probe")
def vecadd_probe(ctx: Context) -> dict[str, float]:
    """Listing 3.1 on managed memory: what the first batches hold, without and with prefetch instructions."""
    plain = _batch_rows(ctx.run("vecadd", {}))
    pre = _batch_rows(ctx.run("vecadd-prefetch", {"workload.vecadd_probe.prefetch": True}))
    first_write = next((i for i, b in enumerate(plain) if b["writes"] > 0), None)
    write_csv(
        ctx.out / "batches.csv",
        ("run", "batch", "fetched", "reads", "writes", "prefetches", "unique", "flushed", "start_ns", "end_ns"),
        [
            (name, b["batch"], b["fetched"], b["reads"], b["writes"], b["prefetches"], b["unique"], b["flushed"])
            + (b["start_ns"], b["end_ns"])
            for name, rows in (("vecadd", plain), ("vecadd-prefetch", pre))
            for b in rows
        ],
    )
    return {
        "first_batch_faults": plain[0]["fetched"] if plain else math.nan,
        "reads_before_first_write": math.nan if first_write is None else sum(b["reads"] for b in plain[:first_write]),
        "batches_before_first_write": math.nan if first_write is None else first_write,
        "first_batch_faults_prefetch": pre[0]["fetched"] if pre else math.nan,
    }


@experiment("allen-batch-composition")
def batch_composition(ctx: Context) -> dict[str, float]:
    """Tables 3.1 and 4.1: mean faults per SM and VA blocks per batch, regular and random kernels."""
    p = ctx.params
    out: dict[str, float] = {}
    rows = []

    def composition(name: str, kind: str, threads: int, cta: int, r: uvmsim.Result) -> tuple[float, ...]:
        batches = _batch_rows(r)
        sms = int(r.config["gpu"]["sms"])
        n = len(batches)
        per_sm = _coalesced_per_sm(batches, sms)
        fetched_per_sm = _per_sm_per_batch(batches, sms, lambda b: b["fetched"])
        unique_per_sm = _per_sm_per_batch(batches, sms, lambda b: b["unique"])
        blocks = sum(b["va_blocks"] for b in batches) / n if batches else math.nan
        rows.append((name, kind, threads, cta, n, per_sm, fetched_per_sm, unique_per_sm, blocks))
        return per_sm, fetched_per_sm, unique_per_sm, blocks

    def measure(name: str, kind: str, threads: int, cta: int, extra: Mapping[str, Any] = {}) -> tuple[float, float]:
        sets = {"workload.kind": kind, f"workload.{kind}.threads": threads, "workload.threads_per_cta": cta}
        r = ctx.run(name, {**sets, **extra})
        per_sm, _, _, blocks = composition(name, kind, threads, cta, r)
        return per_sm, blocks

    for kind in ("regular", "random"):
        per_sm, blocks = measure(kind, kind, p["threads"], p["threads_per_cta"])
        out[f"{kind}.faults_per_sm_per_batch"] = per_sm
        out[f"{kind}.va_blocks_per_batch"] = blocks
    for cta in p.get("sensitivity_ctas", (256, 512)):
        _, blocks = measure(f"regular-cta{cta}", "regular", p["sensitivity_threads"], cta)
        out[f"regular.va_blocks_per_batch.cta{cta}"] = blocks
    # Information: the regular kernel with its first CTAs dispatched another way (gpu.cta_dispatch), e.g. each SM
    # filled first, so that neighbouring CTAs share a µTLB rather than sitting on 80 different SMs.
    for dispatch in p.get("dispatch_sensitivity", ()):
        extra = {"gpu.cta_dispatch": dispatch}
        _, blocks = measure(f"regular-{dispatch}", "regular", p["threads"], p["threads_per_cta"], extra)
        out[f"regular.va_blocks_per_batch.{dispatch}"] = blocks
    # Information: duplicate-heavy kernels, counted as the artifact counts (entries left after the fetch's
    # merging) and, for comparison, as raw fetched entries and as distinct pages per batch.
    for case in p.get("info_cases", []):
        name, sets = case["name"], case["set"]
        r = ctx.run(name, sets)
        per_sm, fetched_per_sm, unique_per_sm, blocks = composition(name, str(sets["workload.kind"]), 0, 0, r)
        out[f"{name}.faults_per_sm_per_batch"] = per_sm
        out[f"{name}.fetched_per_sm_per_batch"] = fetched_per_sm
        out[f"{name}.unique_per_sm_per_batch"] = unique_per_sm
        out[f"{name}.va_blocks_per_batch"] = blocks
    header = ("run", "kind", "threads", "threads_per_cta", "batches", "faults_per_sm_per_batch")
    more = ("fetched_per_sm_per_batch", "unique_per_sm_per_batch", "va_blocks_per_batch")
    write_csv(ctx.out / "composition.csv", (*header, *more), rows)
    return out


def _coalesced_per_sm(batches: list[dict[str, Any]], sms: int) -> float:
    """Table 3.1's faults per SM per batch as Allen's artifact counts them: the entries left after the fetch's
    merging of same-page entries (`fetch_fault_buffer_try_merge_entry`), per SM, averaged over the batches.

    The per-fault log behind Tables 3.1 and 4.1 (github.com/tallendev/uvm-eval, the `faults` driver's
    `service_fault_batch`) prints one line per entry of `ordered_fault_cache[0 .. num_coalesced_faults)`, and
    `tools/plotv2/Fault.py` (`count_fault_per_sm_per_batch`) counts those lines per (uTLB, client) pair, averaged
    over every pair seen in the run (80 on the Titan V: its maximum, 3.20, is a batch of 256 over 80).
    """
    return _per_sm_per_batch(batches, sms, lambda b: b["fetched"] - b["fetch_merged"])


def _per_sm_per_batch(batches: list[dict[str, Any]], sms: int, count: Callable[[dict[str, Any]], int]) -> float:
    """`count` of each batch, per SM, averaged over the batches (NaN without a batch)."""
    return sum(count(b) for b in batches) / len(batches) / sms if batches else math.nan


@experiment("allen-base-cost")
def base_cost(ctx: Context) -> dict[str, float]:
    """Fig. 3.4: kernel time of the regular kernel on managed memory, small data sizes (the UVM base cost)."""
    out: dict[str, float] = {}
    rows = []
    for kib in ctx.params["sizes_kib"]:
        pages = max(1, kib // 4)
        r = ctx.run(f"regular-{kib}KiB", {"workload.regular.threads": pages})
        us = r.metrics["time.kernel_ns"] / 1000.0
        out[f"kernel_us.{kib}KiB"] = us
        m = r.metrics
        # Fig. 3.4's breakdown: pre-processing (the fetch stage) against the batches' whole time.
        fetch_share = m["uvm.stage.fetch_ns"] / max(1.0, m["uvm.time_ns"])
        out[f"fetch_share.{kib}KiB"] = fetch_share
        rows.append((kib, pages, us, m["uvm.time_ns"] / 1000.0, m["uvm.batches"], fetch_share))
    header = ("kib", "pages", "kernel_us", "uvm_batches_us", "batches", "fetch_share")
    write_csv(ctx.out / "base_cost.csv", header, rows)
    return out


@experiment("allen-batch-size")
def batch_size(ctx: Context) -> dict[str, float]:
    """Fig. 4.5: kernel time of sgemm against the driver's batch size, at each matrix size of `sizes`."""
    rows = []
    out: dict[str, float] = {}
    kernel = ctx.params.get("kernel", "")
    sizes = ctx.params.get("sizes", [])
    ratios, changes = [], []
    # The checked kernel at each size; the figure's claims hold at every size it shows, so each check takes
    # the worst size (the largest 1024/256 ratio, the largest 1024 -> 6144 change).
    for n in sizes or [None]:
        extra = {} if n is None else {ctx.params["size_key"]: n}
        tag = "" if n is None else f"n{n}-"
        times: dict[int, float] = {}
        for b in ctx.params["batch_sizes"]:
            m = ctx.run(f"{tag}batch-{b}", {**extra, "uvm.batch_size": b}).metrics
            times[b] = m["time.kernel_ns"]
            unique = m["uvm.faults.unique"] / max(1, m["uvm.batches"])
            suffix = "" if n is None else f".n{n}"
            out[f"unique_per_batch.{b}{suffix}"] = unique
            rows.append(
                (kernel, n or "", b, m["time.kernel_ns"] / 1e6, m["uvm.batches"], unique, m["uvm.faults.duplicate"])
            )
        ratios.append(times[1024] / times[256])
        changes.append(abs(times[6144] / times[1024] - 1.0))
        if n is not None:
            out[f"time_ratio.1024_over_256.n{n}"], out[f"time_change.6144_vs_1024.n{n}"] = ratios[-1], changes[-1]
    out["time_ratio.1024_over_256"] = max(ratios)
    out["time_change.6144_vs_1024"] = max(changes)
    # Other kernels, for information: the same sweep with their own settings, metrics suffixed by the case name.
    for case in ctx.params.get("info_cases", []):
        name, extra = case["name"], case["set"]
        t: dict[int, float] = {}
        for b in ctx.params["batch_sizes"]:
            m = ctx.run(f"{name}-batch-{b}", {**extra, "uvm.batch_size": b}).metrics
            t[b] = m["time.kernel_ns"]
            out[f"unique_per_batch.{b}.{name}"] = m["uvm.faults.unique"] / max(1, m["uvm.batches"])
            unique = out[f"unique_per_batch.{b}.{name}"]
            n = next((v for k, v in extra.items() if k.endswith(".n")), "")  # the case's matrix order
            rows.append((name, n, b, m["time.kernel_ns"] / 1e6, m["uvm.batches"], unique, m["uvm.faults.duplicate"]))
        out[f"time_ratio.1024_over_256.{name}"] = t[1024] / t[256]
        out[f"time_change.6144_vs_1024.{name}"] = abs(t[6144] / t[1024] - 1.0)
    header_row = ("kernel", "n", "batch_size", "kernel_ms", "batches", "unique_per_batch", "duplicates")
    write_csv(ctx.out / "batch_size.csv", header_row, rows)
    # The information rows of sizes not run (the quick run takes one small size): no value.
    for c in ctx.spec.checks:
        if c.tolerance == "info":
            out.setdefault(c.metric, math.nan)
    return out


@experiment("allen-transfer-share")
def transfer_share(ctx: Context) -> dict[str, float]:
    """Fig. 4.2: the share of each sgemm batch spent in data transfer, as Allen's artifact timed it.

    His batch driver times block_copy_resident_pages_between: the driver's CPU pushing the copies (`push_ns`, the
    model's `uvm.copy_push_us` per block copied plus `uvm.copy_push_per_page_us` per page), not the copies' time on
    the link (`copy_ns`, kept as information). Both push costs are assumptions; `push_per_page_us_bound` gives the
    largest per-page cost with which the check would still hold (docs/validation.md, uvm-driver "Session 62").
    """
    r = ctx.run("sgemm", {ctx.params["n_key"]: ctx.params["n"]})
    batches = _batch_rows(r)
    sms = int(r.config["gpu"]["sms"])
    per_push = float(r.config["uvm"]["copy_push_us"]) * 1e3
    per_page = float(r.config["uvm"]["copy_push_per_page_us"]) * 1e3
    # Per batch: duration, push time, pages copied and pushes (one per block copied: what the push time holds
    # besides its pages).
    rows = [
        {
            "batch": b["batch"],
            "duration_ns": max(1e-9, b["end_ns"] - b["start_ns"]),
            "push_ns": b["push_ns"],
            "copy_ns": b["copy_ns"],
            "pages": b["bytes_h2d"] / 4096,
            "pushes": round((b["push_ns"] - per_page * b["bytes_h2d"] / 4096) / per_push) if per_push > 0 else 0,
            "fetched": b["fetched"],
            "va_blocks": b["va_blocks"],
        }
        for b in batches
    ]
    for row in rows:
        row["share"] = row["push_ns"] / row["duration_ns"]
        row["link_share"] = row["copy_ns"] / row["duration_ns"]
    columns = ("batch", "duration_ns", "push_ns", "share", "copy_ns", "link_share", "pages", "pushes", "fetched")
    write_csv(
        ctx.out / "transfer_share.csv",
        (*columns, "va_blocks"),
        [tuple(row[c] for c in (*columns, "va_blocks")) for row in rows],
    )
    if not batches:
        return {}

    def under(share: list[float]) -> float:
        return sum(s < 0.25 for s in share) / len(share)

    def shares_at(page_ns: float) -> list[float]:
        # Another per-page cost, first order: each batch's push time changes by its pages' difference, its
        # duration with it (the batches' make-up is taken as it was).
        out = []
        for row in rows:
            push = row["pushes"] * per_push + row["pages"] * page_ns
            out.append(push / max(1e-9, row["duration_ns"] - row["push_ns"] + push))
        return out

    shares = sorted(row["share"] for row in rows)
    link = sorted(row["link_share"] for row in rows)
    # The largest per-page push cost (in 0.01 µs steps, up to 1 µs) whose estimated fraction still meets the check.
    bound = max((k / 100 for k in range(0, 101) if under(shares_at(k * 10.0)) >= 0.9), default=math.nan)
    return {
        "batches_under_25pct_transfer": under(shares),
        "median_transfer_share": shares[len(shares) // 2],
        "push_per_page_us_bound": bound,
        "batches_under_25pct_link": under(link),
        "median_link_share": link[len(link) // 2],
        "faults_per_sm_per_batch": _coalesced_per_sm(batches, sms),
        "fetched_per_sm_per_batch": _per_sm_per_batch(batches, sms, lambda b: b["fetched"]),
        "va_blocks_per_batch": sum(b["va_blocks"] for b in batches) / len(batches),
    }


@experiment("allen-prefetch-reduction")
def prefetch_reduction(ctx: Context) -> dict[str, float]:
    """Table 5.1: fault reduction by the driver's density prefetcher, 1 - faults_with / faults_without."""
    p = ctx.params
    out: dict[str, float] = {}
    rows = []
    for case in p["cases"]:
        kind, size = case["name"], case["set"]
        m: dict[str, dict[str, float]] = {}
        for policy in ("none", "density"):
            r = ctx.run(f"{kind}-{policy}", {**size, "uvm.prefetch.policy": policy})
            m[policy] = r.metrics
        without, with_ = m["none"]["uvm.faults.fetched"], m["density"]["uvm.faults.fetched"]
        reduction = 100.0 * (1.0 - with_ / without) if without > 0 else math.nan
        out[f"fault_reduction_pct.{kind}"] = reduction
        out[f"faults_without.{kind}"] = without
        out[f"faults_with.{kind}"] = with_
        uniq = 100.0 * (1.0 - m["density"]["uvm.faults.unique"] / max(1.0, m["none"]["uvm.faults.unique"]))
        out[f"unique_fault_reduction_pct.{kind}"] = uniq
        # Table 4.1's batch density: what sets an in-order kernel's coverage.
        out[f"faults_per_va_block_per_batch.{kind}"] = without / max(1.0, m["none"]["uvm.va_blocks"])
        pre = m["density"]
        # Fig. 5.2: how many fewer batches the driver runs with prefetching.
        out[f"batch_reduction_pct.{kind}"] = 100.0 * (1.0 - pre["uvm.batches"] / max(1.0, m["none"]["uvm.batches"]))
        rows.append(
            (
                kind,
                without,
                with_,
                reduction,
                m["none"]["uvm.faults.unique"],
                pre["uvm.faults.unique"],
                uniq,
                pre["uvm.prefetch.pages"],
                pre["uvm.prefetch.used"],
                m["none"]["uvm.batches"],
                pre["uvm.batches"],
            )
        )
    write_csv(
        ctx.out / "coverage.csv",
        (
            "kind",
            "faults_without",
            "faults_with",
            "reduction_pct",
            "unique_without",
            "unique_with",
            "unique_reduction_pct",
            "prefetched_pages",
            "prefetch_used",
            "batches_without",
            "batches_with",
        ),
        rows,
    )
    return out


_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _bytes(value: str | int) -> int:
    """A config size (``"11776MiB"`` or a plain integer) in bytes."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B)\s*", value)
    if not m or m.group(2) not in _UNITS:
        raise ConfigError(f"bad size `{value}`: expected a number and B, KiB, MiB, GiB or TiB")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


@experiment("allen-oversub")
def oversub(ctx: Context) -> dict[str, float]:
    """Table 5.2 at Allen's sizes scaled by 1/scale per dimension: where eviction starts and how it grows."""
    p = ctx.params
    scale = int(p["scale"])
    preset = uvmsim.resolve(preset=ctx.spec.preset)
    memory = _bytes(preset["uvm"]["gpu_memory_bytes"]) // (scale * scale)
    out: dict[str, float] = {}
    rows = []
    onset = math.nan
    first_rate = math.nan
    for n, pub_faults, pub_evicted in zip(p["sizes"], p["published_faults"], p["published_evicted"], strict=True):
        n_sim = round(n / scale)
        r = ctx.run(f"sgemm-{n}", {p["n_key"]: n_sim, "uvm.gpu_memory_bytes": memory})
        m = r.metrics
        faults, evicted = m["uvm.faults.fetched"], m["uvm.pages_evicted"]
        per_fault = evicted / faults if faults else math.nan
        # Compute rate (Fig. 5.5): multiply-adds per simulated second, relative to the smallest size.
        rate = 2.0 * n_sim**3 / m["time.kernel_ns"]
        if math.isnan(first_rate):
            first_rate = rate
        if evicted > 0 and math.isnan(onset):
            onset = float(n)
        out[f"faults.{n}"] = faults
        out[f"pages_evicted.{n}"] = evicted
        out[f"evicted_per_fault.{n}"] = per_fault
        out[f"rate_ratio.{n}"] = rate / first_rate
        footprint = 3 * n_sim * n_sim * 4
        rows.append(
            (
                n,
                n_sim,
                footprint / memory,
                faults,
                evicted,
                per_fault,
                m["uvm.evictions"],
                m["time.kernel_ns"] / 1e6,
                rate / first_rate,
                pub_faults,
                pub_evicted,
                pub_evicted / pub_faults,
            )
        )
    out["onset_n"] = onset
    # How steeply eviction grows past the onset: pages evicted per fault at the largest size at most
    # ~1.44x the capacity (n = 38,444 at Allen's sizes) over that at the onset.
    out["evicted_per_fault_growth"] = math.nan
    if not math.isnan(onset):
        later = [n for n in p["sizes"] if onset < n <= 38444]
        if later:
            out["evicted_per_fault_growth"] = (
                out[f"evicted_per_fault.{later[-1]}"] / out[f"evicted_per_fault.{int(onset)}"]
            )
    write_csv(
        ctx.out / "oversub.csv",
        (
            "n",
            "n_simulated",
            "footprint_over_memory",
            "faults",
            "pages_evicted",
            "evicted_per_fault",
            "evictions",
            "kernel_ms",
            "rate_ratio",
            "published_faults",
            "published_pages_evicted",
            "published_evicted_per_fault",
        ),
        rows,
    )
    return out


UNMAP_CONFIGS: dict[str, dict[str, str]] = {
    "default": {},
    "sync-allocation": {"uvm.preunmap.granularity": "allocation", "uvm.preunmap.mode": "sync"},
    "async-allocation": {"uvm.preunmap.granularity": "allocation", "uvm.preunmap.mode": "async"},
    "async-space": {"uvm.preunmap.granularity": "space", "uvm.preunmap.mode": "async"},
}


@experiment("allen-async-unmap")
def async_unmap(ctx: Context) -> dict[str, float]:
    """Fig. 6.1: sgemm UVM time with preemptive (asynchronous) CPU unmapping, relative to on-demand unmapping."""
    p = ctx.params
    out: dict[str, float] = {}
    rows = []
    best_ratios = []
    for ratio in p["ratios"]:
        times: dict[str, float] = {}
        trackers: dict[str, float] = {}
        for name, sets in UNMAP_CONFIGS.items():
            r = ctx.run(f"sgemm-{ratio}-{name}", {"uvm.oversubscription": ratio, **sets})
            m = r.metrics
            t = m["uvm.time_ns"]
            times[name] = t
            batches = r.tables["batches"]
            unmap_share = float(batches["unmap_ns"].sum()) / t if t else math.nan
            # Fig. 6.3: the batches' wait on their tracker (the copies the CPU work no longer hides).
            trackers[name] = float(batches["tracker_ns"].sum())
            rows.append(
                (
                    ratio,
                    name,
                    t / 1e3,
                    t / times["default"],
                    unmap_share,
                    trackers[name] / 1e3,
                    float(batches["tracker_ns"].sum() + batches["transfer_ns"].sum()) / 1e3,
                    m["uvm.unmap.on_demand"],
                    m["uvm.unmap.sync"],
                    m["uvm.unmap.async"],
                    m["uvm.unmap.waits"],
                    m["uvm.batches"],
                )
            )
            out[f"uvm_time_ratio.{name}.{ratio}"] = t / times["default"]
            base = trackers["default"]
            out[f"tracker_ratio.{name}.{ratio}"] = trackers[name] / base if base else math.nan
        best = min(times["async-allocation"], times["async-space"]) / times["default"]
        best_ratios.append(best)
        out[f"reduction_pct.{ratio}"] = 100.0 * (1.0 - best)
    out["max_reduction_pct"] = 100.0 * (1.0 - min(best_ratios))
    out["worst_async_ratio"] = max(best_ratios)
    # Sensitivity (informational): data initialised by more host threads makes each block's unmap dearer.
    threads = p.get("host_threads_sensitivity")
    if threads:
        times = {}
        for name in ("default", "async-allocation", "async-space"):
            r = ctx.run(f"sgemm-threads{threads}-{name}", {"workload.host_threads": threads, **UNMAP_CONFIGS[name]})
            times[name] = r.metrics["uvm.time_ns"]
            batches = r.tables["batches"]
            rows.append(
                (
                    f"0 ({threads} host threads)",
                    name,
                    times[name] / 1e3,
                    times[name] / times["default"],
                    float(batches["unmap_ns"].sum()) / times[name],
                    float(batches["tracker_ns"].sum()) / 1e3,
                    float(batches["tracker_ns"].sum() + batches["transfer_ns"].sum()) / 1e3,
                    r.metrics["uvm.unmap.on_demand"],
                    r.metrics["uvm.unmap.sync"],
                    r.metrics["uvm.unmap.async"],
                    r.metrics["uvm.unmap.waits"],
                    r.metrics["uvm.batches"],
                )
            )
        best = min(times["async-allocation"], times["async-space"]) / times["default"]
        out[f"reduction_pct.host_threads_{threads}"] = 100.0 * (1.0 - best)
    write_csv(
        ctx.out / "unmap.csv",
        (
            "oversubscription",
            "config",
            "uvm_time_us",
            "ratio_to_default",
            "unmap_share",
            "tracker_us",
            "transfer_and_tracker_us",
            "unmaps_on_demand",
            "unmaps_sync",
            "unmaps_async",
            "unmap_waits",
            "batches",
        ),
        rows,
    )
    return out


def _fault_burst(ctx: Context, name: str, n: int, extra: Mapping[str, Any] | None = None) -> tuple[float, float]:
    """Mean APU fault latency (µs) and throughput (faults/ms) of ``n`` concurrent first-touch faults."""
    r = ctx.run(name, {"workload.fault_burst.faults": n, **(extra or {})})
    m = r.metrics
    return m["apu.fault_latency_ns.mean"] / 1e3, m["apu.faults"] / (m["time.kernel_ns"] / 1e6)


@experiment("apu-fault-latency")
def apu_fault_latency(ctx: Context) -> dict[str, float]:
    """Fig. 6: APU page-fault latency and throughput against the number of concurrent faults."""
    out: dict[str, float] = {}
    rows = []
    for n in ctx.params["concurrency"]:
        lat, tput = _fault_burst(ctx, f"faults-{n}", n)
        out[f"latency_us.{n}"], out[f"throughput_per_ms.{n}"] = lat, tput
        rows.append((n, lat, tput))
    write_csv(ctx.out / "fault_latency.csv", ("concurrent_faults", "mean_latency_us", "faults_per_ms"), rows)
    out["throughput_ratio.64_over_32"] = out["throughput_per_ms.64"] / out["throughput_per_ms.32"]
    return out


@experiment("apu-fault-cpu-freq")
def apu_fault_cpu_freq(ctx: Context) -> dict[str, float]:
    """Fig. 7: APU page-fault latency at a 1.7 GHz host clock over 3.7 GHz."""
    out: dict[str, float] = {}
    rows = []
    for n in ctx.params["concurrency"]:
        fast, _ = _fault_burst(ctx, f"faults-{n}-3.7GHz", n, {"iommu.ppr.host_ghz": 3.7})
        slow, _ = _fault_burst(ctx, f"faults-{n}-1.7GHz", n, {"iommu.ppr.host_ghz": 1.7})
        out[f"latency_ratio.{n}"] = slow / fast
        rows.append((n, fast, slow, slow / fast))
    write_csv(ctx.out / "cpu_freq.csv", ("concurrent_faults", "latency_us_3.7GHz", "latency_us_1.7GHz", "ratio"), rows)
    return out


@experiment("apu-shootdown")
def apu_shootdown(ctx: Context) -> dict[str, float]:
    """Table 4: mean GPU TLB shootdown latency and its phases, single-entry and flush-all."""
    out: dict[str, float] = {}
    rows = []
    phases = ("init", "iommu", "gpu", "final")
    for name, flush_all in (("single", False), ("all", True)):
        m = ctx.run(name, {"workload.shootdown.flush_all": flush_all}).metrics
        out[f"{name}.total_ns"] = m["iommu.shootdown.latency_ns.mean"]
        for p in phases:
            out[f"{name}.{p}_ns"] = m[f"iommu.shootdown.{p}_ns.mean"]
        rows.append((name, out[f"{name}.total_ns"], *(out[f"{name}.{p}_ns"] for p in phases)))
    out["single.gpu_over_iommu"] = out["single.gpu_ns"] / out["single.iommu_ns"]
    out["all_over_single"] = out["all.total_ns"] / out["single.total_ns"]
    write_csv(ctx.out / "shootdown.csv", ("kind", "total_ns", *(f"{p}_ns" for p in phases)), rows)
    return out


SUITE_DIR = Path(__file__).parent / "data" / "suites"
# Workloads in seed paged-memory's suite (§3.2: 16, of which 9 are named and modelled in data/suites/zheng.toml).
SEED_SUITE_SIZE = 16


def load_suite(ctx: Context) -> list[tuple[str, dict[str, Any]]]:
    """The workloads of the spec's ``suite`` (``data/suites/NAME.toml``): (name, overrides) each, at the
    quick sizes when ``suite_sizes = "quick"``; any other ``suite_sizes`` (e.g. "oversub") names a key a
    workload may give instead of its default ``set``."""
    raw = tomllib.loads((SUITE_DIR / f"{ctx.params['suite']}.toml").read_text(encoding="utf-8"))
    sizes = ctx.params.get("suite_sizes", "full")
    named = {k for w in raw["workloads"] for k in w} - {"name", "set", "quick"}
    if sizes not in {"full", "quick"} | named:
        choices = ", ".join(sorted({"full", "quick"} | named))
        suite = ctx.params["suite"]
        raise ConfigError(f"suite_sizes `{sizes}` is not a size of suite `{suite}`; expected one of: {choices}")
    key = "quick" if sizes == "quick" else "set"
    return [(w["name"], dict(w.get(sizes, w[key]))) for w in raw["workloads"]]


def _suite_metrics(ctx: Context, tag: str, extra: Mapping[str, Any]) -> dict[str, Mapping[str, float]]:
    """Each suite workload's run with ``extra`` set: its metrics."""
    return {name: ctx.run(f"{name}-{tag}", {**size, **extra}).metrics for name, size in load_suite(ctx)}


def _suite_slowdowns(ctx: Context, tag: str, extra: Mapping[str, Any]) -> dict[str, float]:
    """Each suite workload's managed runtime over its copy-then-execute baseline, with ``extra`` set."""
    return {name: m["baseline.slowdown_vs_copy"] for name, m in _suite_metrics(ctx, tag, extra).items()}


def _mean(xs: Mapping[str, float]) -> float:
    return sum(xs.values()) / len(xs)


def _geomean(xs: Mapping[str, float]) -> float:
    return math.exp(sum(math.log(v) for v in xs.values()) / len(xs))


def walker_utilization(m: Mapping[str, float]) -> tuple[float, float]:
    """(GMMU walkers' utilization averaged over the GPUs, the host MMU walkers') of a multi-GPU GMMU run: whether
    its walkers are contended at all, the condition the seed's Trans-FW and IDYLL gains rest on."""
    gpus = [v for k, v in m.items() if k.startswith("gpu") and k.endswith(".walker.utilization")]
    return (sum(gpus) / len(gpus) if gpus else 0.0), m.get("host_mmu.walker.utilization", 0.0)


def _write_slowdowns(ctx: Context, name: str, column: str, table: Mapping[Any, Mapping[str, float]]) -> None:
    """One CSV row per (setting, workload) with its slowdown."""
    rows = [(k, w, s) for k, per in table.items() for w, s in per.items()]
    write_csv(ctx.out / name, (column, "workload", "slowdown_vs_copy"), rows)


@experiment("zheng-blocking")
def zheng_blocking(ctx: Context) -> dict[str, float]:
    """Fig. 3: blocking far faults, mean and max slowdown over copy-then-execute at 20 and 5 µs."""
    out: dict[str, float] = {}
    table = {}
    for lat in ctx.params["latencies_us"]:
        tag = f"{lat:g}us"
        s = _suite_slowdowns(ctx, tag, {"uvm.fault_latency_us": lat})
        table[lat] = s
        out[f"mean_slowdown.{tag}"], out[f"max_slowdown.{tag}"] = _mean(s), max(s.values())
        out[f"geomean_slowdown.{tag}"] = _geomean(s)
    _write_slowdowns(ctx, "slowdowns.csv", "fault_latency_us", table)
    return out


@experiment("zheng-replayable-mshr")
def zheng_replayable_mshr(ctx: Context) -> dict[str, float]:
    """Fig. 5: replayable far faults, mean slowdown over copy-then-execute against far-fault MSHRs per CU."""
    out: dict[str, float] = {}
    table = {}
    for n in ctx.params["mshrs"]:
        s = _suite_slowdowns(ctx, f"mshr{n}", {"uvm.utlb_fault_limit": n})
        table[n] = s
        out[f"mean_slowdown.{n}"], out[f"geomean_slowdown.{n}"] = _mean(s), _geomean(s)
    out["mshr4_over_mshr16"] = out["mean_slowdown.4"] / out["mean_slowdown.16"]
    # The seed's means are over its 16 workloads, 7 of them unnamed and not modelled here. What those 7 would
    # have to average for the 16-workload mean to equal the published one, given the 9 modelled: a value
    # far below 1 (faster than copy-then-execute without prefetching) says the gap is in the model, not
    # in which workloads the mean is over.
    seen = len(table[ctx.params["mshrs"][0]])
    for n, s in table.items():
        published = next((c.published for c in ctx.spec.checks if c.metric == f"mean_slowdown.{n}"), None)
        if isinstance(published, int | float):
            others = SEED_SUITE_SIZE - seen
            out[f"unmodelled_mean_needed.{n}"] = (SEED_SUITE_SIZE * published - sum(s.values())) / others
    # §3.2, after the sweep: "still 2-7x worse than programmer directed transfers for half of our applications".
    n = ctx.params["mshrs"][-1]
    out[f"workloads_at_least_2x.{n}"] = float(sum(v >= 2.0 for v in table[n].values()))
    out[f"max_slowdown.{n}"] = max(table[n].values())
    _write_slowdowns(ctx, "slowdowns.csv", "mshrs_per_cu", table)
    return out


@experiment("zheng-pcie-util")
def zheng_pcie_util(ctx: Context) -> dict[str, float]:
    """Fig. 6: host-to-device link utilisation over the run, averaged over the suite."""
    util = {name: 100.0 * ctx.run(name, size).metrics["link.h2d.utilization"] for name, size in load_suite(ctx)}
    write_csv(ctx.out / "utilization.csv", ("workload", "h2d_utilization_pct"), sorted(util.items()))
    return {"mean_utilization_pct": _mean(util), **{f"utilization_pct.{k}": v for k, v in util.items()}}


@experiment("zheng-prefetch")
def zheng_prefetch(ctx: Context) -> dict[str, float]:
    """Fig. 7: geomean runtime over copy-then-execute per prefetch policy, with replayable far faults."""
    out: dict[str, float] = {}
    table = {}
    for policy in ctx.params["policies"]:
        s = _suite_slowdowns(ctx, policy, {"uvm.prefetch.policy": policy})
        table[policy] = s
        out[f"geomean_slowdown.{policy}"], out[f"mean_slowdown.{policy}"] = _geomean(s), _mean(s)
    _write_slowdowns(ctx, "slowdowns.csv", "policy", table)
    g = {p: out[f"geomean_slowdown.{p}"] for p in ("random", "sequential", "locality", "oracle")}
    # The seed's order, best first: oracle, locality, sequential, random (lower runtime is better).
    out["ranking_matches"] = float(g["oracle"] < g["locality"] < g["sequential"] < g["random"])
    out["locality_speedup_pct"] = 100.0 * (1.0 - g["locality"])
    out["policies_beating_legacy"] = float(sum(v < 1.0 for v in g.values()))
    out["locality_over_oracle_pct"] = 100.0 * (g["locality"] / g["oracle"] - 1.0)
    out["worst_best_gap_pct"] = 100.0 * (max(g.values()) / min(g.values()) - 1.0)
    return out


@experiment("zheng-prefetch-blocking")
def zheng_prefetch_blocking(ctx: Context) -> dict[str, float]:
    """§4.3: locality prefetching with blocking and with replayable far faults, geomean over copy-then-execute."""
    out: dict[str, float] = {}
    table = {}
    limits = ctx.params["fault_limits"]
    for mode in ctx.params["modes"]:
        m = _suite_metrics(ctx, mode, {"uvm.fault_mode": mode, "uvm.utlb_fault_limit": limits[mode]})
        s = {w: v["baseline.slowdown_vs_copy"] for w, v in m.items()}
        table[mode] = s
        out[f"geomean_slowdown.{mode}"], out[f"mean_slowdown.{mode}"] = _geomean(s), _mean(s)
        # Against perfect copy/compute overlap (§6: "within 15% of a perfect overlapping"), and how much that
        # overlap could save at all at these inputs (the copy-then-execute baseline is the same in every mode).
        out[f"geomean_over_ideal.{mode}"] = _geomean({w: v["baseline.slowdown_vs_ideal"] for w, v in m.items()})
        ideal = {w: v["baseline.ideal_overlap_ns"] / v["baseline.copy_then_execute_ns"] for w, v in m.items()}
        out.setdefault("geomean_ideal_over_copy", _geomean(ideal))
    _write_slowdowns(ctx, "slowdowns.csv", "fault_mode", table)
    out["blocking_slowdown_pct"] = 100.0 * (out["geomean_slowdown.blocking"] - 1.0)
    out["replayable_speedup_pct"] = 100.0 * (1.0 - out["geomean_slowdown.replayable"])
    out["blocking_over_replayable"] = out["geomean_slowdown.blocking"] / out["geomean_slowdown.replayable"]
    return out


@experiment("zheng-latency-sensitivity")
def zheng_latency_sensitivity(ctx: Context) -> dict[str, float]:
    """Fig. 8: runtime at the longer far-fault latency over the runtime at the base one, locality prefetching."""
    base_us, lat_us = ctx.params["base_latency_us"], ctx.params["latency_us"]
    # The transfer set is what the link moves in one interval (§4.1: 80 pages at 20 µs).
    base_set = ctx.params.get("base_set_pages", 80)
    scaled = round(base_set * lat_us / base_us)
    runs = {
        "base": (base_us, base_set),
        "scaled": (lat_us, scaled),
        "fixed_set": (lat_us, base_set),
    }
    times: dict[str, dict[str, float]] = {k: {} for k in runs}
    for name, size in load_suite(ctx):
        for k, (lat, pages) in runs.items():
            extra = {"uvm.fault_latency_us": lat, "uvm.prefetch.transfer_set_pages": pages}
            times[k][name] = ctx.run(f"{name}-{k}", {**size, **extra}).metrics["time.total_ns"]
    ratio = {k: {w: times[k][w] / times["base"][w] for w in times["base"]} for k in ("scaled", "fixed_set")}
    rows = [(w, times["base"][w], times["scaled"][w], times["fixed_set"][w]) for w in times["base"]]
    write_csv(ctx.out / "runtimes.csv", ("workload", "base_ns", "scaled_set_ns", "fixed_set_ns"), rows)
    return {
        "slowdown_pct": 100.0 * (_geomean(ratio["scaled"]) - 1.0),
        "slowdown_pct.fixed_set": 100.0 * (_geomean(ratio["fixed_set"]) - 1.0),
        "set_pages.scaled": float(scaled),
        **{f"ratio.{w}": v for w, v in ratio["scaled"].items()},
    }


@experiment("zheng-eviction")
def zheng_eviction(ctx: Context) -> dict[str, float]:
    """Fig. 9: 50% oversubscription, random vs LRU (4 KiB pages), on-demand only or continued prefetch once full."""
    out: dict[str, float] = {}
    table = {}
    for ev in ctx.params["evictions"]:
        for wf in ctx.params["when_full"]:
            tag = f"{ev}-{wf}"
            s = _suite_slowdowns(ctx, tag, {"uvm.eviction.policy": ev, "uvm.prefetch.when_full": wf})
            table[tag] = s
            out[f"mean_slowdown.{tag}"], out[f"geomean_slowdown.{tag}"] = _mean(s), _geomean(s)
            out.update({f"{w}.{tag}": v for w, v in s.items()})
    rnd, lru = table["random-stop"], table["lru-stop"]
    out["xsbench.random_over_lru"] = rnd["xsbench"] / lru["xsbench"]
    out["random_prefetch_gain"] = out["mean_slowdown.random-stop"] / out["mean_slowdown.random-locality"]
    out["lru_gain.stop"] = out["mean_slowdown.random-stop"] / out["mean_slowdown.lru-stop"]
    out["lru_gain.locality"] = out["mean_slowdown.random-locality"] / out["mean_slowdown.lru-locality"]
    out["apps_random_within_25pct_of_lru"] = float(sum(rnd[w] <= 1.25 * lru[w] for w in rnd))
    means = {tag: out[f"mean_slowdown.{tag}"] for tag in table}
    out["lru_locality_is_best"] = float(min(means, key=means.__getitem__) == "lru-locality")
    _write_slowdowns(ctx, "slowdowns.csv", "policy", table)
    return out


@experiment("zheng-oversub-sweep")
def zheng_oversub_sweep(ctx: Context) -> dict[str, float]:
    """Fig. 10: slowdown over copy-then-execute as the fraction of the footprint that fits falls 95% → 25%."""
    out: dict[str, float] = {}
    fit = _suite_slowdowns(ctx, "fit", {"uvm.oversubscription": 0.0})
    table: dict[Any, Mapping[str, float]] = {1.0: fit}
    out["mean_slowdown.fit"] = _mean(fit)
    for f in ctx.params["fractions"]:
        pct = round(100 * f)
        s = _suite_slowdowns(ctx, f"{pct}pct", {"uvm.oversubscription": 1.0 / f})
        table[f] = s
        out[f"mean_slowdown.{pct}"], out[f"max_slowdown.{pct}"] = _mean(s), max(s.values())
        out[f"geomean_slowdown.{pct}"] = _geomean(s)
        out.update({f"{w}.{pct}": v for w, v in s.items()})
        # Runtime over the same configuration when everything fits (copy baselines cancel).
        out[f"loss_vs_fit.{pct}"] = _mean({w: s[w] / fit[w] for w in s})
    if 0.5 in ctx.params["fractions"]:
        out["streaming_loss.50"] = _mean({w: table[0.5][w] / fit[w] for w in ctx.params["streaming"]})
    means = [out[f"mean_slowdown.{round(100 * f)}"] for f in sorted(ctx.params["fractions"], reverse=True)]
    out["mean_slowdown_monotone"] = float(all(b >= a for a, b in zip(means, means[1:], strict=False)))
    _write_slowdowns(ctx, "slowdowns.csv", "fraction_fits", table)
    for key in ("mean_slowdown.95", "mean_slowdown.25", "max_slowdown.25", "streaming_loss.50"):
        out.setdefault(key, math.nan)  # a fraction not run (the quick sizes skip 25%): no value
    return out


@experiment("li-least-tlb")
def li_least_tlb(ctx: Context) -> dict[str, float]:
    """Fig. 13: Least-TLB's speedup over the mostly-inclusive baseline per application, and the mean."""
    out: dict[str, float] = {}
    rows = []
    fp, absent = 0.0, 0.0
    for w in ctx.params["workloads"]:
        name, size = w["name"], dict(w["set"])
        base = ctx.run(f"{name}-base", {**size, "multi.least_tlb.enabled": False}).metrics
        least = ctx.run(f"{name}-least", {**size, "multi.least_tlb.enabled": True}).metrics
        # Fig. 13's second bar: the baseline with an infinite IOMMU TLB (only cold misses).
        ideal = ctx.run(f"{name}-ideal", {**size, "multi.oracle.infinite_iommu_tlb": True}).metrics
        speedup = base["time.kernel_ns"] / least["time.kernel_ns"]
        out[f"speedup.{name}"] = speedup
        out[f"ideal_speedup.{name}"] = base["time.kernel_ns"] / ideal["time.kernel_ns"]
        fp += least["multi.least_tlb.false_positives"]
        absent += least["multi.least_tlb.absent_tests"]
        rate = least["multi.least_tlb.false_positive_rate"]
        rows.append(
            (
                name,
                base["time.kernel_ns"],
                least["time.kernel_ns"],
                speedup,
                out[f"ideal_speedup.{name}"],
                base["iommu.tlb.hit_rate"],
                least["iommu.tlb.hit_rate"],
                base["iommu.walker.walks"],
                least["iommu.walker.walks"],
                least["multi.least_tlb.remote_hits"],
                rate,
            )
        )
    write_csv(
        ctx.out / "speedups.csv",
        (
            "app",
            "base_kernel_ns",
            "least_kernel_ns",
            "speedup",
            "ideal_speedup",
            "base_iommu_hit_rate",
            "least_iommu_hit_rate",
            "base_walks",
            "least_walks",
            "remote_hits",
            "false_positive_rate",
        ),
        rows,
    )
    speedups = {k: v for k, v in out.items() if k.startswith("speedup.")}
    out["mean_ideal_speedup"] = _mean({k: v for k, v in out.items() if k.startswith("ideal_speedup.")})
    out["mean_speedup"] = _mean(speedups)
    out["geomean_speedup"] = _geomean(speedups)
    out["apps_faster"] = float(sum(v > 1.0 for v in speedups.values()))
    out["false_positive_rate"] = fp / absent if absent else 0.0
    if ctx.params.get("mixes"):
        out.update(_least_tlb_mixes(ctx))
    return out


def weighted_speedup(shared_ipc: Mapping[str, float], alone_ipc: Mapping[str, float]) -> float:
    """Weighted speedup of a multi-application run (seed multi-gpu §3.1.1.2): the sum over its
    applications of IPC in the mix over IPC alone on the same system. Both maps are keyed by application."""
    if set(shared_ipc) != set(alone_ipc) or not shared_ipc:
        apps = f"{sorted(shared_ipc)} vs {sorted(alone_ipc)}"
        raise ValueError(f"weighted speedup needs the same applications in both runs: {apps}")
    if any(v <= 0 for v in alone_ipc.values()):
        raise ValueError(f"an application alone has no IPC: {dict(alone_ipc)}")
    return sum(shared_ipc[a] / alone_ipc[a] for a in shared_ipc)


def _least_tlb_mixes(ctx: Context) -> dict[str, float]:
    """Fig. 15: the Table 4 mixes, one application per GPU, baseline vs Least-TLB with spilling.
    IPC alone: each application alone at its GPU of the mix (the others idle), baseline TLBs."""
    common = dict(ctx.params.get("mix_set", {}))
    alone: dict[tuple[str, int], float] = {}
    rows = []
    out: dict[str, float] = {}
    gains = {}
    for mix in ctx.params["mixes"]:
        name, apps = mix["name"], list(mix["apps"])
        runs = {}
        schemes = {
            "base": {"multi.least_tlb.enabled": False},
            "least": {"multi.least_tlb.enabled": True, "multi.least_tlb.spill": True},
        }
        for scheme, extra in schemes.items():
            runs[scheme] = ctx.run(f"{name}-{scheme}", {**common, "multi.apps": apps, **extra}).metrics
        for g, kind in enumerate(apps):
            if (kind, g) not in alone:
                m = ctx.run(f"alone-{kind}-gpu{g}", {**common, "multi.apps": [kind], "multi.apps_first_gpu": g}).metrics
                alone[(kind, g)] = m[f"app{g}.ipc"]
        ref = {f"app{g}": alone[(k, g)] for g, k in enumerate(apps)}
        ws = {s: weighted_speedup({a: m[f"{a}.ipc"] for a in ref}, ref) for s, m in runs.items()}
        gains[name] = 100.0 * (ws["least"] / ws["base"] - 1.0)
        out[f"ws_improvement_pct.{name}"] = gains[name]
        for g, kind in enumerate(apps):
            b, lt = runs["base"], runs["least"]
            rows.append(
                (
                    name,
                    g,
                    kind,
                    alone[(kind, g)],
                    b[f"app{g}.ipc"],
                    lt[f"app{g}.ipc"],
                    lt[f"app{g}.ipc"] / b[f"app{g}.ipc"],
                    b[f"app{g}.iommu.tlb_hit_rate"],
                    lt[f"app{g}.iommu.tlb_hit_rate"],
                    lt[f"app{g}.iommu.remote_hit_rate"],
                    b[f"app{g}.l2tlb.hit_rate"],
                    lt[f"app{g}.l2tlb.hit_rate"],
                    ws["base"],
                    ws["least"],
                )
            )
    write_csv(
        ctx.out / "mixes.csv",
        (
            "mix",
            "gpu",
            "app",
            "alone_ipc",
            "base_ipc",
            "least_ipc",
            "normalized",
            "base_iommu_hit_rate",
            "least_iommu_hit_rate",
            "least_remote_hit_rate",
            "base_l2_hit_rate",
            "least_l2_hit_rate",
            "base_ws",
            "least_ws",
        ),
        rows,
    )
    out["mean_ws_improvement_pct"] = _mean(gains)
    out["max_ws_improvement_pct"] = max(gains.values())
    return out


@experiment("li-idyll")
def li_idyll(ctx: Context) -> dict[str, float]:
    """Fig. 54: IDYLL's directory, lazy invalidation and both vs the access-counter baseline, per application."""
    schemes = {
        "directory": {"multi.idyll.directory": True},
        "lazy": {"multi.idyll.lazy": True},
        "both": {"multi.idyll.directory": True, "multi.idyll.lazy": True},
        "zero_latency": {"multi.oracle.zero_latency_invalidation": True},
    }
    gain: dict[str, dict[str, float]] = {k: {} for k in schemes}
    rows = []
    unnecessary, sent = 0.0, 0.0
    util: dict[str, float] = {}
    for w in ctx.params["workloads"]:
        name, size = w["name"], dict(w["set"])
        base = ctx.run(f"{name}-base", size).metrics
        util[name], host_util = walker_utilization(base)
        row: list[float | str] = [name, base["time.kernel_ns"], base["multi.invalidations.sent"], util[name], host_util]
        for k, extra in schemes.items():
            m = ctx.run(f"{name}-{k}", {**size, **extra}).metrics
            gain[k][name] = 100.0 * (base["time.kernel_ns"] / m["time.kernel_ns"] - 1.0)
            row.append(gain[k][name])
            if k == "directory":
                unnecessary += m["multi.invalidations.unnecessary"]
                sent += m["multi.invalidations.sent"]
            if k == "both":
                row += [m["multi.invalidations.sent"], m["multi.idyll.irmb.hits"], m["multi.idyll.irmb.merges"]]
        rows.append(tuple(row))
    write_csv(
        ctx.out / "improvements.csv",
        (
            "app",
            "base_kernel_ns",
            "base_invalidations",
            "base_gmmu_walker_utilization",
            "base_host_walker_utilization",
            "directory_pct",
            "lazy_pct",
            "both_pct",
            "both_invalidations",
            "both_irmb_hits",
            "both_irmb_merges",
            "zero_latency_pct",
        ),
        rows,
    )
    out: dict[str, float] = {}
    for k, per_app in gain.items():
        out[f"mean_improvement_pct.{k}"] = _mean(per_app)
        out.update({f"improvement_pct.{k}.{a}": v for a, v in per_app.items()})
    d, lz, b = (out[f"mean_improvement_pct.{k}"] for k in ("directory", "lazy", "both"))
    out["ordering"] = float(d < lz < b)
    out["unnecessary_fraction.directory"] = unnecessary / sent if sent else 0.0
    out["base_gmmu_walker_utilization"] = _mean(util)
    out["base_gmmu_walker_utilization_max"] = max(util.values())
    return out


def mpki_class(mpki: float) -> str:
    """Seed multi-gpu §3.1.1.2: Low (MPKI < 0.1), Medium (0.1-1), High (> 1)."""
    return "L" if mpki < 0.1 else ("M" if mpki <= 1.0 else "H")


def translated_l2_misses(m: Mapping[str, float]) -> float:
    """L2 TLB misses of all GPUs that the IOMMU answered with a translation (ATS mode: every L2 TLB miss that
    is not held in the L2 TLB's MSHR is one ATS request). The rest are the far-fault path of a page still in
    host memory (the first miss, and duplicates that reached the IOMMU while it is serviced; the misses held
    behind the outstanding fault, `multi.far_faults.held`, count as duplicates but send no request), which the
    seed's system, data placed before the kernel, does not have."""
    faulted = m["multi.far_faults"] + m["multi.far_faults.duplicate"] - m.get("multi.far_faults.held", 0.0)
    if m["iommu.ats_requests"] < faulted:
        raise ValueError("more far faults than ATS requests: the run is not in iommu (ATS) mode")
    return m["iommu.ats_requests"] - faulted


@experiment("li-mpki")
def li_mpki(ctx: Context) -> dict[str, float]:
    """Table 3: L2-TLB misses per 1000 GCN3 instructions per application, classed L/M/H, on 4 GPUs.

    GCN3 instructions = the model's instructions at the large input x (MGPUSim's cu_inst_count / the model's
    instructions) at the traced input."""
    published = ctx.params["published"]
    counted = set(ctx.params["counted"])
    large = ctx.params.get("sizes", "large") == "large"
    out: dict[str, float] = {}
    rows = []
    matches = 0
    for w in ctx.params["workloads"]:
        name = w["name"]
        traced = ctx.run(f"{name}-traced", dict(w["traced"])).metrics
        gcn3_per_inst = float(w["gcn3_insts"]) / traced["multi.insts"]
        # At the traced input the GCN3 count is MGPUSim's own (compared with Table 7, below).
        out[f"traced_mpki.{name}"] = 1000.0 * translated_l2_misses(traced) / float(w["gcn3_insts"])
        m = ctx.run(name, dict(w["set"])).metrics if large else traced
        gcn3 = gcn3_per_inst * m["multi.insts"]
        raw = sum(m[f"gpu{g}.l2tlb.misses"] for g in range(int(m["multi.gpus"])))
        misses = translated_l2_misses(m)
        mpki = 1000.0 * misses / gcn3
        sim_cls, pub_cls = mpki_class(mpki), mpki_class(float(published[name]))
        if name in counted:
            matches += sim_cls == pub_cls
        out[f"mpki.{name}"] = mpki
        rows.append(
            (
                name,
                published[name],
                pub_cls,
                mpki,
                sim_cls,
                name in counted,
                misses,
                raw,
                1000.0 * raw / gcn3,
                m["multi.insts"],
                gcn3_per_inst,
                gcn3,
            )
        )
    write_csv(
        ctx.out / "mpki.csv",
        (
            "app",
            "published_mpki",
            "published_class",
            "mpki",
            "class",
            "counted",
            "l2_misses_translated",
            "l2_misses_raw",
            "raw_mpki",
            "model_insts",
            "gcn3_per_model_inst",
            "gcn3_insts",
        ),
        rows,
    )
    out["class_matches"] = float(matches)
    return out


@experiment("li-transfw")
def li_transfw(ctx: Context) -> dict[str, float]:
    """Fig. 32: Trans-FW (PRT, host forwarding, both) vs the GMMU baseline, per application, under the spec's
    migration policy (its common ``set``); with ``remote_mapping`` in the params, also Trans-FW against the baseline
    under access-counter migration with remote mapping (§4.3.2, Fig. 43), as information; with ``limit_study``,
    also the baseline with infinite page-walk caches, with infinite walker threads and with no data-migration
    latency (§4.1.2, Fig. 25's first three bars), as information; and with ``table6_pfpki`` (application ->
    the seed's Table 6 PFPKI), how far each baseline's far faults per kilo-instruction are from it
    (``pfpki_log10_error``: the mean over applications of |log10(simulated / published)|; per application in
    the CSV), as information.

    A run that reaches the spec's event budget (``sim.max_events`` in its ``set``) is listed in ``unfinished.csv``
    and counted in ``unfinished_runs``; its application is left out of that scheme's speedups and means (out of
    every scheme when its baseline is the run that did not finish)."""
    schemes: dict[str, dict[str, Any]] = {
        "prt": {"multi.transfw.prt": True},
        "forwarding": {"multi.transfw.forwarding": True},
        "transfw": {"multi.transfw.prt": True, "multi.transfw.forwarding": True},
        "large_prt": {"multi.transfw.prt": True, "multi.transfw.forwarding": True, "multi.transfw.prt_entries": 65536},
    }
    oracles: dict[str, dict[str, Any]] = {
        "infinite_pwc": {"multi.oracle.infinite_pwc": True},
        "infinite_walkers": {"multi.oracle.infinite_walkers": True},
        "no_migration": {"multi.oracle.no_migration_latency": True},
    }
    limit_study = bool(ctx.params.get("limit_study"))
    speed: dict[str, dict[str, float]] = {k: {} for k in [*schemes, *oracles]}
    rows = []
    unfinished: list[tuple[str, str]] = []

    def attempt(run: str, set: Mapping[str, Any]) -> dict[str, float] | None:
        try:
            return ctx.run(run, set).metrics
        except uvmsim.BudgetExceeded as e:
            unfinished.append((run, str(e)))
            return None

    nan = float("nan")
    details = (
        "multi.transfw.prt.lookups",
        "multi.transfw.prt.skipped_walks",
        "multi.transfw.prt.false_positives",
        "multi.transfw.prt.untrusted",
        "multi.transfw.fw.host_queue_mean",
        "multi.transfw.fw.forwarded",
        "multi.transfw.fw.remote_hits",
        "multi.transfw.fw.host_walks_removed",
    )
    fp, trusted = 0.0, 0.0
    util: dict[str, float] = {}
    pfpki: dict[str, float] = {}
    for w in ctx.params["workloads"]:
        name, size = w["name"], dict(w["set"])
        base = attempt(f"{name}-base", size)
        if base is None:
            rows.append((name, *[nan] * (5 + len(schemes) + len(details) + len(oracles))))
            continue
        util[name], host_util = walker_utilization(base)
        pfpki[name] = base["multi.far_faults_pki"]
        row: list[float | str] = [name, base["time.kernel_ns"], base["multi.far_faults"], pfpki[name]]
        row += [util[name], host_util]
        runs = {k: attempt(f"{name}-{k}", {**size, **extra}) for k, extra in schemes.items()}
        for k, r in runs.items():
            if r is not None:
                speed[k][name] = base["time.kernel_ns"] / r["time.kernel_ns"]
            row.append(speed[k].get(name, nan))
        m = runs["transfw"]  # its details
        row += [m[d] for d in details] if m is not None else [nan] * len(details)
        if ctx.params.get("remote_mapping"):
            rm = {"multi.migration": "access-counter"}
            rm_base = attempt(f"{name}-rm-base", {**size, **rm})
            rm_fw = attempt(f"{name}-rm-transfw", {**size, **rm, **schemes["transfw"]})
            if rm_base is not None and rm_fw is not None:
                speed.setdefault("remote_mapping", {})[name] = rm_base["time.kernel_ns"] / rm_fw["time.kernel_ns"]
        for k, extra in oracles.items() if limit_study else ():
            r = attempt(f"{name}-{k}", {**size, **extra})
            if r is not None:
                speed[k][name] = base["time.kernel_ns"] / r["time.kernel_ns"]
        row += [speed[k].get(name, nan) for k in oracles]
        if m is not None:
            fp += m["multi.transfw.prt.false_positives"]
            trusted += m["multi.transfw.prt.lookups"] - m["multi.transfw.prt.untrusted"]
        rows.append(tuple(row))
    write_csv(
        ctx.out / "speedups.csv",
        (
            "app",
            "base_kernel_ns",
            "base_far_faults",
            "base_pfpki",
            "base_gmmu_walker_utilization",
            "base_host_walker_utilization",
            "prt_speedup",
            "forwarding_speedup",
            "speedup",
            "large_prt_speedup",
            "prt_lookups",
            "skipped_walks",
            "prt_false_positives",
            "prt_untrusted",
            "host_queue_mean",
            "forwarded",
            "remote_hits",
            "host_walks_removed",
            "infinite_pwc_speedup",
            "infinite_walkers_speedup",
            "no_migration_speedup",
        ),
        rows,
    )
    write_csv(ctx.out / "unfinished.csv", ("run", "reason"), unfinished)
    # A speedup or mean with no finished runs behind it is NaN (a check on it fails, an info row shows nan).
    names = [w["name"] for w in ctx.params["workloads"]]
    out: dict[str, float] = {f"speedup.{a}": speed["transfw"].get(a, nan) for a in names}
    for k in ("prt", "forwarding", "large_prt", *(oracles if limit_study else ())):
        out.update({f"speedup.{k}.{a}": v for a, v in speed[k].items()})
        out[f"mean_speedup.{k}"] = _mean(speed[k]) if speed[k] else nan
    if ctx.params.get("remote_mapping"):
        rmap = speed.get("remote_mapping", {})
        out.update({f"speedup.remote_mapping.{a}": v for a, v in rmap.items()})
        out["mean_speedup.remote_mapping"] = _mean(rmap) if rmap else nan
    out["unfinished_runs"] = float(len(unfinished))
    fw = speed["transfw"]
    out["mean_speedup"] = _mean(fw) if fw else nan
    out["geomean_speedup"] = _geomean(fw) if fw else nan
    out["mt_highest"] = float(bool(fw) and max(fw, key=lambda a: fw[a]) == "MT")
    out["prt_false_positive_rate"] = fp / trusted if trusted else 0.0
    out["base_gmmu_walker_utilization"] = _mean(util) if util else nan
    out["base_gmmu_walker_utilization_max"] = max(util.values()) if util else nan
    table6 = ctx.params.get("table6_pfpki", {})
    errs = [abs(math.log10(v / table6[a])) for a, v in pfpki.items() if a in table6 and v > 0]
    if table6:
        out["pfpki_log10_error"] = sum(errs) / len(errs) if errs else nan
    return out


# --- beyond the seeds: presets of modern systems ------------------------------------------------------


@experiment("modern-presets")
def modern_presets(ctx: Context) -> dict[str, float]:
    """The same small managed-memory workloads on each preset of ``presets``: runtime over the explicit-copy
    baseline and the translation traffic the system's path creates (no published number to match)."""
    out: dict[str, float] = {}
    rows = []
    for preset in ctx.params["presets"]:
        own = ctx.params.get("preset_set", {}).get(preset, {})  # what applies to this preset only
        for wl in ctx.params["workloads"]:
            name = wl["name"]
            m = ctx.run(f"{preset}-{name}", {**own, **wl["set"], "uvm.baselines": True}, preset=preset).metrics
            # Faults that software services: the UVM driver's batches (discrete GPUs), or the page-request path
            # (IOMMU mode); ATS requests are translations the host's IOMMU answers.
            far = m.get("uvm.faults.fetched", 0.0) + m.get("apu.faults", 0.0)
            ats = m.get("iommu.ats_requests", 0.0)
            migrated = m.get("uvm.access_counters.pages", 0.0)
            remote = m.get("uvm.remote.bytes", 0.0)
            slowdown = m["baseline.slowdown_vs_copy"]
            out[f"slowdown_vs_copy.{preset}.{name}"] = slowdown
            out[f"far_faults.{preset}.{name}"] = far
            out[f"ats_requests.{preset}.{name}"] = ats
            out[f"counter_migrated_pages.{preset}.{name}"] = migrated
            rows.append(
                (
                    preset,
                    name,
                    m["time.kernel_ns"] / 1000.0,
                    m["baseline.copy_then_execute_ns"] / 1000.0,
                    slowdown,
                    far,
                    ats,
                    migrated,
                    remote,
                )
            )
    write_csv(
        ctx.out / "modern_presets.csv",
        (
            "preset",
            "workload",
            "kernel_us",
            "copy_then_execute_us",
            "slowdown_vs_copy",
            "far_faults",
            "ats_requests",
            "counter_migrated_pages",
            "remote_bytes",
        ),
        rows,
    )
    return out
