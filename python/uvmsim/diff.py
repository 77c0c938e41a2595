"""``uvmsim diff``: which runs of two result directories differ, in which metrics and settings.

A result directory is a run's (``summary.json``), a sweep's (``runs/*.parquet``), an experiment's
(``uvmsim reproduce``: ``runs/NAME/summary.json``) or any directory holding such runs below it
(``reproduce --all``'s). Runs are paired by their path below the two directories (a sweep's by run id),
so the same experiment or sweep run at two commits, or with one setting changed, lines up run by run.
Wall-clock metrics (``sim.wall_s`` and kin) differ between any two runs and are never compared.

Experiments' checked values (``result.json``: each row's simulated value and whether it passed) are compared
too, so a move that changes a validation row shows as such.

Typical uses: after a change of the model, which experiments' runs moved (``uvmsim reproduce --all --quick``
at both commits, then ``uvmsim diff``), so that their rows in docs/validation.md are re-run; and what a
setting changes in a run (two ``uvmsim run -o`` directories).

A *fingerprint* (``uvmsim fingerprint DIR``) stands in for a result directory on either side: a digest of each
run's metrics (rounded to ``DIGITS`` significant digits) and the experiments' checked values, small enough to
commit. Against one, ``diff`` says which runs and checked values moved but not by how much (a digest holds no
values). tests/data/reproduce-quick.json is the fingerprint of ``reproduce --all --quick`` at the commit that last
wrote it; a test compares a fresh quick reproduction with it, so a commit that moves a validation experiment must
say so by rewriting the file.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uvmsim._core import ConfigError
from uvmsim._files import MissingInputError, reading_input

SUMMARY_FILE = "summary.json"
FINGERPRINT_FORMAT = "uvmsim-fingerprint"
FINGERPRINT_VERSION = 1
# Significant digits a fingerprint keeps of each value: far more than any check reads, few enough that a last-bit
# difference (a libm on another CPU) does not change a digest unless it straddles a rounding boundary.
DIGITS = 9


class MetricsOfFingerprintError(ValueError):
    """``compare`` was asked for some metrics only, and a side is a fingerprint (it has digests, not metrics)."""


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
    digests: tuple[str, str] | None = None  # against a fingerprint: the two digests (metrics and config unknown)
    config_known: bool = True  # False: a side stored no config (a sweep run failed for an invalid one)

    @property
    def differs(self) -> bool:
        """A metric of both runs or the status differs (metrics of one side only do not count: a metric added
        to uvmsim, or one of a mode the other run does not use); against a fingerprint, the digests differ."""
        if self.digests is not None:
            return self.digests[0] != self.digests[1]
        return bool(self.metrics) or self.status[0] != self.status[1]


@dataclass(frozen=True)
class Check:
    """One row of an experiment's comparison: its simulated value and whether it passed (None: info only)."""

    value: float
    passed: bool | None


@dataclass(frozen=True)
class Experiment:
    """An experiment's outcome as ``result.json`` stores it: PASS, FAIL, INFO or ERROR, and its rows by metric."""

    status: str
    checks: Mapping[str, Check]


@dataclass(frozen=True)
class CheckChange:
    metric: str
    old: Check | None  # None: the row is on the new side only
    new: Check | None


@dataclass(frozen=True)
class ExperimentDiff:
    key: str  # the experiment's directory below OLD and NEW
    status: tuple[str, str]  # "-" for a side without the experiment
    checks: list[CheckChange]  # rows whose value or verdict differs, or on one side only; in the new side's order

    @property
    def differs(self) -> bool:
        return bool(self.checks) or self.status[0] != self.status[1]


@dataclass(frozen=True)
class Fingerprint:
    """Digests of runs' metrics and experiments' checked values (see the module's doc)."""

    digits: int
    metrics: tuple[str, ...]  # the metric names a digest covers (those of a run outside it are left out)
    runs: Mapping[str, str]  # run key (as ``collect``) -> digest
    experiments: Mapping[str, Experiment]


@dataclass
class Report:
    old: Path
    new: Path
    runs: list[RunDiff] = field(default_factory=list)  # every paired run, in the old side's order
    only_old: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)
    experiments: list[ExperimentDiff] = field(default_factory=list)  # every experiment of either side
    fingerprint: bool = False  # a side is a fingerprint: runs compare by digest

    @property
    def experiments_differing(self) -> list[ExperimentDiff]:
        return [e for e in self.experiments if e.differs]

    @property
    def differing(self) -> list[RunDiff]:
        """Paired runs whose compared metrics or status differ."""
        return [r for r in self.runs if r.differs]

    @property
    def common_settings(self) -> list[tuple[str, Any, Any]]:
        """The setting changes every paired run shares (a default changed, an option added): said once."""
        known = [r for r in self.runs if r.config_known]
        if not known:
            return []
        rest = [{(k, json.dumps(a), json.dumps(b)) for k, a, b in r.config} for r in known[1:]]
        return [c for c in known[0].config if all((c[0], json.dumps(c[1]), json.dumps(c[2])) in x for x in rest)]

    @property
    def same(self) -> bool:
        """No run on one side only, and no paired run with a different metric or status."""
        return not (self.only_old or self.only_new or self.differing or self.experiments_differing)

    def as_json(self) -> dict[str, Any]:
        def num(v: float) -> float | str:
            return v if math.isfinite(v) else str(v)  # JSON has no NaN or infinity

        def check(c: Check | None) -> dict[str, Any] | None:
            return None if c is None else {"value": num(c.value), "passed": c.passed}

        return {
            "old": os.fspath(self.old),
            "new": os.fspath(self.new),
            "same": self.same,
            "fingerprint": self.fingerprint,
            "paired": len(self.runs),
            "differing": len(self.differing),
            "only_old": self.only_old,
            "only_new": self.only_new,
            "experiments": [
                {
                    "experiment": e.key,
                    "status": list(e.status),
                    "checks": [{"metric": c.metric, "old": check(c.old), "new": check(c.new)} for c in e.checks],
                }
                for e in self.experiments_differing
            ],
            "runs": [
                {
                    "run": r.key,
                    "status": list(r.status),
                    "digests": None if r.digests is None else list(r.digests),
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
                f"`{p}` is not a result: give a run, sweep or experiment directory, a summary.json or a fingerprint"
                " (uvmsim fingerprint)"
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


def input_files(path: str | os.PathLike[str]) -> list[tuple[str, Path]]:
    """The files ``collect``, ``collect_experiments`` and ``fingerprint`` read at ``path``, and a run's tables (``plot``
    reads them), as ``(what, file)``: an output that is one of them (``fingerprint DIR -o DIR/summary.json``, ``plot
    KIND DIR -o DIR/summary.json --format svg``) would destroy the results it reads."""
    from uvmsim import sweep as sweep_mod
    from uvmsim.report import RESULT_FILE

    p = Path(path)
    if not p.is_dir():
        return [("the result", p)]
    files = [("a run summary", f) for f in p.rglob(SUMMARY_FILE)]
    files += [("an experiment result", f) for f in p.rglob(RESULT_FILE)]
    files += [("a sweep run", f) for f in (p / sweep_mod.RUNS_DIR).glob("*.parquet")]
    files += [("a table of the run", f) for f in p.glob("*.parquet")]  # plot reads them
    return [*files, ("the sweep record", p / sweep_mod.SWEEP_FILE)]


def collect_experiments(path: str | os.PathLike[str]) -> dict[str, Experiment]:
    """The experiments' outcomes stored at ``path`` (every ``result.json`` at or below it), keyed by their
    directory below ``path`` (``.`` for ``path`` itself); {} for a file or a directory with none."""
    p = Path(path)
    if not p.is_dir():
        return {}
    from uvmsim.report import RESULT_FILE, Outcome  # here: report imports reproduce (~60 ms), plain runs need neither

    found: dict[str, Experiment] = {}
    for f in sorted(x for x in p.rglob(RESULT_FILE) if x.is_file()):
        with reading_input(f, "experiment result"):
            raw = f.read_bytes()
        try:  # read as uvmsim reproduce wrote it (report.Outcome), so the two cannot drift apart
            outcome = Outcome.from_json(json.loads(raw.decode("utf-8")))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            why = f"no `{e.args[0]}`" if isinstance(e, KeyError) else str(e)
            raise ConfigError(f"{f}: not an experiment result (uvmsim reproduce's result.json): {why}") from None
        status, checks = outcome.status, {r.metric: Check(r.simulated, r.passed) for r in outcome.rows}
        found[f.parent.relative_to(p).as_posix()] = Experiment(status, checks)
    return found


def rounded(v: float, digits: int = DIGITS) -> str:
    """``v`` as a fingerprint keeps it: to ``digits`` significant digits, and an integer (a count, or a value that
    rounds to one) exactly."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v != int(v):
        v = float(f"{v:.{digits - 1}e}")
    # An integral value exactly (a count), so that 1000 and 1000.000000001 print alike.
    return str(int(v)) if v == int(v) and abs(v) < 2**53 else f"{v:.{digits - 1}e}"


def digest(run: Run, names: Iterable[str], digits: int = DIGITS) -> str:
    """A run's digest: its status and its metrics among ``names``, each rounded (``rounded``); 16 hex digits."""
    h = hashlib.sha256(f"status={run.status}\n".encode())
    for n in sorted(set(names) & run.metrics.keys()):
        h.update(f"{n}={rounded(run.metrics[n], digits)}\n".encode())
    return h.hexdigest()[:16]


def fingerprint(path: str | os.PathLike[str], *, like: Fingerprint | None = None, digits: int = DIGITS) -> Fingerprint:
    """The fingerprint of the runs and experiments stored at ``path``. Its digests cover every metric of the runs
    but the wall-clock ones; ``like``: cover the metrics another fingerprint covers, at its digits, so the two
    compare (a metric added to uvmsim since then is left out, not a difference)."""
    from uvmsim import WALL_CLOCK_METRICS

    runs = collect(path)
    if like is not None:
        names, digits = like.metrics, like.digits
    else:
        names = tuple(sorted({n for r in runs.values() for n in r.metrics} - WALL_CLOCK_METRICS))
    return Fingerprint(digits, names, {k: digest(r, names, digits) for k, r in runs.items()}, collect_experiments(path))


def fingerprint_json(fp: Fingerprint) -> dict[str, Any]:
    """``fp`` as the JSON a fingerprint file holds (``read_fingerprint`` reads it back)."""

    def value(v: float) -> float | str:
        r = rounded(v, fp.digits)
        return float(r) if math.isfinite(v) else r

    return {
        "format": FINGERPRINT_FORMAT,
        "version": FINGERPRINT_VERSION,
        "digits": fp.digits,
        "experiments": {
            k: {
                "status": e.status,
                "checks": {m: {"value": value(c.value), "passed": c.passed} for m, c in e.checks.items()},
            }
            for k, e in fp.experiments.items()
        },
        "runs": dict(fp.runs),
        "metrics": list(fp.metrics),
    }


def read_fingerprint(path: str | os.PathLike[str]) -> Fingerprint | None:
    """The fingerprint stored in file ``path``; None if ``path`` is not a file or holds no fingerprint.

    Raises:
        InputError: the file cannot be read.
        ConfigError: the file says it is a fingerprint but is damaged or of another version.
    """
    p = Path(path)
    if not p.is_file() or p.name == SUMMARY_FILE:
        return None
    with reading_input(p, "fingerprint"):
        raw = p.read_bytes()
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("format") != FINGERPRINT_FORMAT:
        return None
    if doc.get("version") != FINGERPRINT_VERSION:
        raise ConfigError(
            f"{p}: fingerprint version {doc.get('version')!r}; this uvmsim reads version {FINGERPRINT_VERSION}"
            " (write it again with uvmsim fingerprint)"
        )

    def damaged(why: str) -> ConfigError:
        return ConfigError(f"{p}: damaged fingerprint: {why} (write it again with uvmsim fingerprint)")

    digits = doc.get("digits")
    if not isinstance(digits, int) or isinstance(digits, bool) or not 1 <= digits <= 17:
        raise damaged(f"`digits` must be an integer from 1 to 17, not {digits!r}")
    names, runs, exps = doc.get("metrics"), doc.get("runs"), doc.get("experiments")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise damaged("`metrics` must be a list of metric names")
    if not isinstance(runs, dict) or not all(isinstance(v, str) for v in runs.values()):
        raise damaged("`runs` must be a table of run -> digest")
    if not isinstance(exps, dict):
        raise damaged("`experiments` must be a table of experiment -> outcome")
    experiments = {}
    for k, e in exps.items():
        checks = e.get("checks") if isinstance(e, dict) else None
        if not isinstance(e, dict) or not isinstance(e.get("status"), str) or not isinstance(checks, dict):
            raise damaged(f"experiment `{k}` must be a table with a `status` and a table of `checks`")
        rows = {}
        for m, c in checks.items():
            v = c.get("value") if isinstance(c, dict) else None
            ok = isinstance(v, int | float) and not isinstance(v, bool) or v in ("nan", "inf", "-inf")
            passed = c.get("passed") if isinstance(c, dict) else 0
            if not ok or not (passed is None or isinstance(passed, bool)):
                raise damaged(f"check `{m}` of `{k}` must be a table with a numeric `value` and `passed`")
            rows[m] = Check(float(c["value"]), passed)
        experiments[k] = Experiment(e["status"], rows)
    return Fingerprint(digits, tuple(names), runs, experiments)


def _same_check(a: Check, b: Check, tolerance: float, digits: int | None) -> bool:
    if a.passed != b.passed:
        return False
    if digits is not None and rounded(a.value, digits) == rounded(b.value, digits):
        return True
    return not _differs(a.value, b.value, tolerance)


def compare_experiments(
    old: Mapping[str, Experiment], new: Mapping[str, Experiment], tolerance: float = 0.0, digits: int | None = None
) -> list[ExperimentDiff]:
    """Every experiment of either side, with the rows whose value or verdict differs (values compared as
    ``compare`` compares metrics, or equal when they round alike to ``digits``, as against a fingerprint)."""
    out = []
    for key in [*old, *(k for k in new if k not in old)]:
        a, b = old.get(key), new.get(key)
        ca = a.checks if a else {}
        cb = b.checks if b else {}
        changes = [
            CheckChange(m, ca.get(m), cb.get(m))
            for m in [*cb, *(m for m in ca if m not in cb)]
            if m not in ca or m not in cb or not _same_check(ca[m], cb[m], tolerance, digits)
        ]
        out.append(ExperimentDiff(key, (a.status if a else "-", b.status if b else "-"), changes))
    return out


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
    # A failed run has no metrics: its status says so, its metrics are not "on one side only".
    both_ok = old.status == new.status == "ok"
    removed = [n for n in names if n not in new.metrics] if both_ok else []
    added = [n for n in names if n not in old.metrics] if both_ok else []
    both = [n for n in names if n in old.metrics and n in new.metrics]
    changes = [MetricChange(n, old.metrics[n], new.metrics[n]) for n in both]
    changes = [c for c in changes if _differs(c.old, c.new, tolerance)]
    changes.sort(key=lambda c: (-abs(c.relative) if not math.isnan(c.relative) else -math.inf, c.name))  # NaN first
    missing = object()
    # A sweep run failed for an invalid config stores none (null): unknown, not every setting removed.
    known = bool(old.config and new.config)
    config = [
        (k, old.config.get(k), new.config.get(k))
        for k in sorted(set(old.config) | set(new.config))
        if known and old.config.get(k, missing) != new.config.get(k, missing)
    ]
    return RunDiff(key, changes, len(both), config, (old.status, new.status), removed, added, config_known=known)


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
        ConfigError: a result file or fingerprint is damaged, two fingerprints digest different metrics, or a
            glob of ``metrics`` matches no metric of the runs (a misspelt name would compare nothing).
        MetricsOfFingerprintError: ``metrics`` given with a fingerprint on a side.
        ValueError: ``tolerance`` is negative or not a number.
    """
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, not {tolerance}")
    from uvmsim import WALL_CLOCK_METRICS

    fa, fb = read_fingerprint(old), read_fingerprint(new)
    if fa is not None or fb is not None:
        if metrics:
            raise MetricsOfFingerprintError("--metric needs runs on both sides: a fingerprint holds one digest per run")
        fa = fa or fingerprint(old, like=fb)
        fb = fb or fingerprint(new, like=fa)
        return compare_fingerprints(Path(old), Path(new), fa, fb, tolerance)
    a, b = collect(old), collect(new)
    _check_metric_globs(metrics, [*a.values(), *b.values()], WALL_CLOCK_METRICS)
    report = Report(Path(old), Path(new))
    report.experiments = compare_experiments(collect_experiments(old), collect_experiments(new), tolerance)
    for key, run in a.items():
        if key in b:
            report.runs.append(compare_runs(key, run, b[key], tolerance, metrics, WALL_CLOCK_METRICS))
        else:
            report.only_old.append(key)
    report.only_new = [k for k in b if k not in a]
    return report


def _check_metric_globs(patterns: Sequence[str], runs: Sequence[Run], wall_clock: Iterable[str]) -> None:
    """Refuse (``ConfigError``) a ``--metric`` glob that matches no compared metric of any run: a misspelt name
    would otherwise compare nothing and report every run the same."""
    names = {n for r in runs for n in r.metrics} - set(wall_clock)
    for pat in patterns:
        if not any(fnmatch.fnmatchcase(n, pat) for n in names):
            why = (
                " (wall-clock metrics are never compared)"
                if any(fnmatch.fnmatchcase(n, pat) for n in wall_clock)
                else ""
            )
            raise ConfigError(
                f"--metric `{pat}` matches no metric of the runs compared{why}; docs/metrics.md lists them"
            )


def compare_fingerprints(old: Path, new: Path, fa: Fingerprint, fb: Fingerprint, tolerance: float = 0.0) -> Report:
    """``compare`` of two fingerprints (``old`` and ``new`` name them in the report): runs by digest, checked values
    to the digits kept.

    Raises:
        ConfigError: the two digest different metrics or digits (their digests do not compare).
    """
    if (fa.metrics, fa.digits) != (fb.metrics, fb.digits):
        raise ConfigError(
            f"the fingerprints {old} and {new} digest different metrics or digits, so their digests do not compare;"
            " compare a fingerprint with a result directory instead"
        )
    report = Report(old, new, fingerprint=True)
    for key, d in fa.runs.items():
        if key in fb.runs:
            report.runs.append(RunDiff(key, [], len(fa.metrics), [], ("-", "-"), digests=(d, fb.runs[key])))
        else:
            report.only_old.append(key)
    report.only_new = [k for k in fb.runs if k not in fa.runs]
    report.experiments = compare_experiments(fa.experiments, fb.experiments, tolerance, fa.digits)
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


def _fmt_check(c: Check | None) -> str:
    if c is None:
        return "-"
    verdict = {True: "pass", False: "fail", None: "info"}.get(c.passed, str(c.passed))
    return f"{_fmt(c.value)} ({verdict})"


def _fmt_setting(v: Any) -> str:
    return "-" if v is None else json.dumps(v, ensure_ascii=False)


def _names(counts: Mapping[str, int], runs: int, most: int = 20) -> str:
    """Names with how many of ``runs`` runs they are in, when not all."""
    shown = [n if c == runs else f"{n} ({c} of {runs})" for n, c in sorted(counts.items())[:most]]
    return ", ".join(shown) + (f", ... ({len(counts) - most} more)" if len(counts) > most else "")


def render(report: Report, rows: int = 10) -> list[str]:
    """The report as text lines: the tally, the runs on one side only, the metrics on one side only, the
    experiments whose checked values differ (``rows`` rows each) and the setting changes every run shares (each
    said once), then each differing run with its other settings that differ and its ``rows`` largest metric
    changes (0: all); against a fingerprint, the differing runs by directory instead."""
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
    exps = report.experiments_differing
    if exps:
        lines.append("")
        lines.append(f"experiments whose checked values differ: {len(exps)} of {len(report.experiments)}")
        for e in exps:
            head = f"  {e.key}"
            if e.status[0] != e.status[1]:
                head += f": status {e.status[0]} -> {e.status[1]}"
            lines.append(head)
            checks = e.checks if rows == 0 else e.checks[:rows]
            for c in checks:
                lines.append(f"    {c.metric}: {_fmt_check(c.old)} -> {_fmt_check(c.new)}")
            if len(checks) < len(e.checks):
                lines.append(f"    ... {len(e.checks) - len(checks)} more (--rows 0 shows all)")
    if report.fingerprint:
        if diff:
            lines.append("")
            lines.append(
                "runs whose digests differ (a fingerprint holds no values: compare two result directories to see"
                " which metrics moved):"
            )
            by_dir: dict[str, list[str]] = {}
            for r in diff:
                head, _, rest = r.key.partition("/")
                by_dir.setdefault(head if rest else "", []).append(rest or head)  # a sweep's ids, a run's ".": as such
            for d, keys in by_dir.items():
                listed = f"{', '.join(keys[:20])}{', ...' if len(keys) > 20 else ''}"
                lines.append(f"  {d}: {listed}" if d else f"  {listed}")
        return lines
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
