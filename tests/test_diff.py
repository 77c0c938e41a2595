"""`uvmsim diff`: pairing runs of two result directories, the metrics and settings that differ, exit codes. Mostly
hand-made summaries (values chosen so that each rule shows); two tiny runs and a two-run sweep end to end."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import uvmsim
from conftest import Cli
from uvmsim import diff, report, sweep
from uvmsim import reproduce as rep
from uvmsim._core import ConfigError


def summary(d: Path, metrics: dict[str, Any], config: dict[str, Any] | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    doc = {"version": "0.1.0", "config": config or {"gpu": {"sms": 80}}, "metrics": metrics, "tables": {}}
    (d / "summary.json").write_text(json.dumps(doc))
    return d


def test_identical_runs_are_the_same_and_wall_clock_metrics_are_not_compared(tmp_path: Path) -> None:
    summary(tmp_path / "a", {"time.kernel_ns": 100.0, "sim.wall_s": 1.5, "sim.events_per_s": 9e6})
    summary(tmp_path / "b", {"time.kernel_ns": 100.0, "sim.wall_s": 2.5, "sim.events_per_s": 4e6})
    r = diff.compare(tmp_path / "a", tmp_path / "b")
    assert r.same and [x.key for x in r.runs] == ["."]
    assert r.runs[0].compared == 1  # time.kernel_ns alone: the two wall-clock metrics are left out


def test_a_changed_metric_is_listed_with_both_values_and_its_relative_change(tmp_path: Path) -> None:
    summary(tmp_path / "a", {"time.kernel_ns": 200.0, "uvm.batches": 4, "gpu0.l1tlb.hits": 10})
    summary(tmp_path / "b", {"time.kernel_ns": 210.0, "uvm.batches": 4, "gpu0.l1tlb.hits": 5})
    r = diff.compare(tmp_path / "a", tmp_path / "b")
    assert not r.same
    (run,) = r.differing
    # Largest relative change first: hits -50%, then the kernel +5%; batches are equal.
    assert [(m.name, m.old, m.new) for m in run.metrics] == [("gpu0.l1tlb.hits", 10, 5), ("time.kernel_ns", 200, 210)]
    assert [m.relative for m in run.metrics] == [-0.5, 0.05]
    assert (run.compared, run.config) == (3, [])


def test_the_tolerance_is_relative_to_the_larger_value(tmp_path: Path) -> None:
    # 200 -> 210: |10| against 0.049 x 210 = 10.29 is within (against the smaller value, 9.8, it would not be);
    # against 0.047 x 210 = 9.87 it is not.
    summary(tmp_path / "a", {"time.kernel_ns": 200.0})
    summary(tmp_path / "b", {"time.kernel_ns": 210.0})
    assert diff.compare(tmp_path / "a", tmp_path / "b", tolerance=0.049).same
    assert diff.compare(tmp_path / "b", tmp_path / "a", tolerance=0.049).same
    assert not diff.compare(tmp_path / "a", tmp_path / "b", tolerance=0.047).same
    with pytest.raises(ValueError, match="tolerance must be >= 0"):
        diff.compare(tmp_path / "a", tmp_path / "b", tolerance=-1)


def test_metrics_on_one_side_are_listed_apart_and_nan_equals_only_nan(tmp_path: Path) -> None:
    summary(tmp_path / "a", {"x": 1.0, "gone": 3.0, "n": math.nan, "m": math.nan})
    summary(tmp_path / "b", {"x": 1.0, "added": 2.0, "n": math.nan, "m": 7.0})
    (run,) = diff.compare(tmp_path / "a", tmp_path / "b").runs
    assert (run.removed, run.added, run.compared) == (["gone"], ["added"], 3)
    assert [m.name for m in run.metrics] == ["m"]  # NaN against 7 differs, NaN against NaN does not
    assert diff.render(diff.compare(tmp_path / "a", tmp_path / "b"))[-1] == "  m       nan    7  NaN on a side"
    # A metric on one side alone (one added to uvmsim since, or of a mode the other run lacks) is no difference.
    summary(tmp_path / "c", {"x": 1.0, "added": 2.0})
    r = diff.compare(tmp_path / "a", tmp_path / "c", metrics=["x", "added"])
    assert r.same and r.runs[0].added == ["added"]
    assert diff.render(r)[1] == f"metrics only in {tmp_path / 'c'}: added"


def test_globs_choose_the_metrics_compared(tmp_path: Path) -> None:
    summary(tmp_path / "a", {"gpu0.l1tlb.hits": 1, "gpu0.l2tlb.hits": 1, "time.kernel_ns": 5})
    summary(tmp_path / "b", {"gpu0.l1tlb.hits": 1, "gpu0.l2tlb.hits": 2, "time.kernel_ns": 6})
    assert diff.compare(tmp_path / "a", tmp_path / "b", metrics=["gpu0.l1tlb.*"]).same
    r = diff.compare(tmp_path / "a", tmp_path / "b", metrics=["gpu0.l*tlb.*"])
    assert [m.name for m in r.differing[0].metrics] == ["gpu0.l2tlb.hits"] and r.runs[0].compared == 2
    r = diff.compare(tmp_path / "a", tmp_path / "b", metrics=["gpu0.l1tlb.*", "time.*"])  # any glob
    assert [m.name for m in r.differing[0].metrics] == ["time.kernel_ns"] and r.runs[0].compared == 2


def test_a_metric_glob_that_matches_no_metric_is_bad_input_not_a_match(cli: Cli, tmp_path: Path) -> None:
    # A misspelt --metric compared nothing and reported the runs the same (exit 0) however much they differed.
    summary(tmp_path / "a", {"gpu0.l1tlb.hit_rate": 0.9, "sim.wall_s": 1.0})
    summary(tmp_path / "b", {"gpu0.l1tlb.hit_rate": 0.5, "sim.wall_s": 2.0})
    with pytest.raises(ConfigError, match=r"--metric `gpu0.l1tlb.hitrate` matches no metric"):
        diff.compare(tmp_path / "a", tmp_path / "b", metrics=["gpu0.l1tlb.hit_rate", "gpu0.l1tlb.hitrate"])
    with pytest.raises(ConfigError, match=r"wall-clock metrics are never compared"):
        diff.compare(tmp_path / "a", tmp_path / "b", metrics=["sim.wall_s"])
    p = cli("diff", str(tmp_path / "a"), str(tmp_path / "b"), "--metric", "gpu0.l1tlb.hitrate")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("uvmsim: error: --metric `gpu0.l1tlb.hitrate` matches no metric")
    assert p.stderr.count("\n") == 1
    assert cli("diff", str(tmp_path / "a"), str(tmp_path / "b"), "--metric", "gpu0.*").returncode == 1


def test_settings_that_differ_are_listed_by_dotted_key_but_alone_do_not_make_a_difference(tmp_path: Path) -> None:
    summary(tmp_path / "a", {"x": 1}, {"gpu": {"sms": 80, "l1tlb": {"entries": 32}}, "sim": {"seed": 1}})
    summary(tmp_path / "b", {"x": 1}, {"gpu": {"sms": 80, "l1tlb": {"entries": 16}}, "uvm": {"batch_size": 256}})
    r = diff.compare(tmp_path / "a", tmp_path / "b")
    assert r.runs[0].config == [("gpu.l1tlb.entries", 32, 16), ("sim.seed", 1, None), ("uvm.batch_size", None, 256)]
    assert r.same  # the same metrics: e.g. a key the run's mode does not read
    assert diff.render(r) == [
        "1 run in both: 1 with the same metrics, 0 with different ones",
        "settings that differ in every run:",
        "  set gpu.l1tlb.entries: 32 -> 16",
        "  set sim.seed: 1 -> -",
        "  set uvm.batch_size: - -> 256",
    ]


def test_settings_every_run_shares_are_said_once(tmp_path: Path) -> None:
    # A default changed between two commits shows in every run: once at the top, not under each run.
    for side, x in (("old", 1), ("new", 2)):
        for run, k in (("r1", 8), ("r2", 16)):
            config = {"gpu": {"sms": k}, "uvm": {"batch_size": 256 if side == "old" else 512}}
            summary(tmp_path / side / run, {"x": x if run == "r2" else 1}, config)
    # r3 also has a setting of its own changed, with the same metrics: counted, not listed.
    for side, sms in (("old", 4), ("new", 2)):
        summary(
            tmp_path / side / "r3",
            {"x": 1},
            {"gpu": {"sms": sms}, "uvm": {"batch_size": 256 if side == "old" else 512}},
        )
    r = diff.compare(tmp_path / "old", tmp_path / "new")
    assert r.common_settings == [("uvm.batch_size", 256, 512)]
    assert diff.render(r) == [
        "3 runs in both: 2 with the same metrics, 1 with different ones (1 of the same with different settings)",
        "settings that differ in every run alike:",
        "  set uvm.batch_size: 256 -> 512",
        "",
        "r2: 1 of 1 metrics differ",
        "  metric  old  new  change",
        "  x         1    2  +100%",
    ]


def test_runs_below_two_directories_pair_by_their_path(tmp_path: Path) -> None:
    # reproduce --all's layout: ID/runs/NAME/summary.json.
    for side, k in (("old", 1), ("new", 2)):
        summary(tmp_path / side / "exp-a" / "runs" / "r1", {"x": 1})
        summary(tmp_path / side / "exp-a" / "runs" / "r2", {"x": k})
    for side in ("old", "new"):
        summary(tmp_path / side / "exp-d" / "runs" / "r1", {"x": 1})
    summary(tmp_path / "old" / "exp-b" / "runs" / "r1", {"x": 1})
    summary(tmp_path / "new" / "exp-c" / "runs" / "r1", {"x": 1})
    (tmp_path / "old" / "exp-a" / "comparison.csv").write_text("metric\n")  # other files are not runs
    r = diff.compare(tmp_path / "old", tmp_path / "new")
    assert [x.key for x in r.runs] == ["exp-a/runs/r1", "exp-a/runs/r2", "exp-d/runs/r1"]
    assert [x.key for x in r.differing] == ["exp-a/runs/r2"]
    assert "runs that differ, by directory: exp-a 1/2" in diff.render(r)
    assert (r.only_old, r.only_new) == (["exp-b/runs/r1"], ["exp-c/runs/r1"])
    # A run directory and its summary.json are the same run; one experiment against another pairs its runs.
    assert diff.compare(tmp_path / "old/exp-a/runs/r1", tmp_path / "new/exp-a/runs/r1/summary.json").same
    assert [x.key for x in diff.compare(tmp_path / "old/exp-a", tmp_path / "new/exp-a").runs] == ["runs/r1", "runs/r2"]


def test_the_cli_prints_the_runs_that_differ_and_exits_1(cli: Cli, tmp_path: Path) -> None:
    summary(tmp_path / "a" / "e" / "runs" / "r1", {"time.kernel_ns": 1000, "uvm.batches": 8, "sim.wall_s": 1})
    summary(tmp_path / "b" / "e" / "runs" / "r1", {"time.kernel_ns": 1500, "uvm.batches": 8, "sim.wall_s": 2})
    summary(tmp_path / "b" / "e" / "runs" / "r2", {"time.kernel_ns": 1})
    p = cli("diff", "a", "b")
    assert p.returncode == 1, p.stderr
    assert p.stdout.splitlines() == [
        "1 run in both: 0 with the same metrics, 1 with different ones",
        "1 only in b: e/runs/r2",
        "",
        "e/runs/r1: 1 of 2 metrics differ",
        "  metric            old    new  change",
        "  time.kernel_ns  1,000  1,500  +50%",
    ]
    assert cli("diff", "a", "a").returncode == 0
    assert cli("diff", "a", "b", "--tolerance", "0.5", "--metric", "time.*").returncode == 1  # r2 is in b alone
    data = json.loads(cli("diff", "a", "b", "--json").stdout)
    assert (data["same"], data["paired"], data["differing"], data["only_new"]) == (False, 1, 1, ["e/runs/r2"])
    assert data["runs"][0]["metrics"] == [{"name": "time.kernel_ns", "old": 1000, "new": 1500, "relative": 0.5}]


def test_rows_bounds_the_metrics_shown_per_run(cli: Cli, tmp_path: Path) -> None:
    summary(tmp_path / "a", {f"m{i}": 1 for i in range(5)})
    summary(tmp_path / "b", {f"m{i}": 1 + i for i in range(5)})
    out = cli("diff", "a", "b", "--rows", "2").stdout.splitlines()
    assert out[-3:] == ["  m4        1    5  +400%", "  m3        1    4  +300%", "  ... 2 more (--rows 0 shows all)"]
    assert len([x for x in cli("diff", "a", "b", "--rows", "0").stdout.splitlines() if re.match(r"  m\d ", x)]) == 4


@pytest.mark.parametrize(
    ("make", "words"),
    [
        pytest.param(lambda d: None, r"`old` does not exist", id="missing"),
        pytest.param(lambda d: d.mkdir(), r"`old` holds no results: no summary.json below it", id="empty-dir"),
        pytest.param(lambda d: (d.mkdir(), (d / "summary.json").write_text("{")), r"not a run summary", id="damaged"),
        pytest.param(
            lambda d: (d.mkdir(), (d / "summary.json").write_text("[]")),
            r"an array, not a JSON object",
            id="not-an-object",
        ),
        pytest.param(
            lambda d: (d.mkdir(), (d / "summary.json").write_bytes(b"\xff\xfe")), r"can't decode byte", id="not-utf8"
        ),
        pytest.param(lambda d: d.write_text("x"), r"is not a result", id="a-file"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(cli: Cli, tmp_path: Path, make: Any, words: str) -> None:
    make(tmp_path / "old")
    summary(tmp_path / "new", {"x": 1})
    p = cli("diff", "old", "new")
    assert p.returncode == 2, p.stdout
    assert p.stderr.startswith("uvmsim: error: ") and len(p.stderr.splitlines()) == 1
    assert re.search(words, p.stderr), p.stderr


def test_real_runs_differing_in_one_setting(tmp_path: Path) -> None:
    # A stride run on the Kaveri APU, then with a 20-cycle L1 TLB lookup: a longer kernel, the same instructions.
    sets = {"workload.kind": "stride", "workload.stride.accesses": 500}
    uvmsim.run(preset="kaveri-apu", set=sets, out=tmp_path / "a")
    uvmsim.run(preset="kaveri-apu", set=sets, out=tmp_path / "again")
    uvmsim.run(preset="kaveri-apu", set={**sets, "gpu.l1tlb.latency_cycles": 20}, out=tmp_path / "b")
    assert diff.compare(tmp_path / "a", tmp_path / "again").same  # deterministic: every metric but wall-clock time
    (run,) = diff.compare(tmp_path / "a", tmp_path / "b").differing
    assert run.config == [("gpu.l1tlb.latency_cycles", 1, 20)]
    kernel = next(m for m in run.metrics if m.name == "time.kernel_ns")
    assert kernel.new is not None and kernel.old is not None and kernel.new > kernel.old
    assert "gpu0.warp_mem_insts" not in {m.name for m in run.metrics}


def test_a_run_failed_for_its_config_differs_by_status_not_by_every_setting_and_metric(tmp_path: Path) -> None:
    # The same run id ok in one sweep and failed in the other for an invalid config (stored with no config and no
    # metrics): it listed every one of ~450 settings as "x -> -" and ~215 metrics as on one side only.
    for name, ways in (("a", 8), ("b", 16)):
        spec = {
            "preset": "kaveri-apu",
            "set": {"workload.stride.accesses": 50, "gpu.l1tlb.ways": ways},
            "grid": {"gpu.l1tlb.entries": [8, 16]},
        }
        sweep.run_sweep(spec, tmp_path / name, jobs=1)
    r = diff.compare(tmp_path / "a", tmp_path / "b")
    (run,) = r.differing
    assert run.key == sweep.run_id({"gpu.l1tlb.entries": 8}) and run.status == ("ok", "failed")
    assert (run.config, run.removed, run.added, run.metrics) == ([], [], [], [])
    text = diff.render(r)
    assert not any(line.startswith("metrics only in") for line in text)
    assert text[-1] == f"{run.key}: 0 of 0 metrics differ; status ok -> failed"
    assert "  set gpu.l1tlb.ways: 8 -> 16" in text  # the setting the two sweeps' ok runs differ in


def test_a_sweep_pairs_its_runs_by_id(tmp_path: Path) -> None:
    spec = sweep.parse_spec(
        {
            "preset": "titan-v",
            "set": {"workload.kind": "regular", "workload.regular.threads": 1024},
            "grid": {"gpu.sms": [4, 8]},
        },
        "<test>",
    )
    sweep.run_sweep(spec, tmp_path / "s", jobs=1)
    shutil.copytree(tmp_path / "s", tmp_path / "t")
    r = diff.compare(tmp_path / "s", tmp_path / "t")
    assert r.same and sorted(x.key for x in r.runs) == sorted(sweep.run_id({"gpu.sms": n}) for n in (4, 8))
    # A sweep's row holds every metric a run directory's summary does: all are compared.
    uvmsim.run(preset="titan-v", set={**spec.set, "gpu.sms": 4}, out=tmp_path / "one")
    assert r.runs[0].compared == diff.compare(tmp_path / "one", tmp_path / "one").runs[0].compared
    # One run's kernel time changed in its stored row: that run alone differs, by that metric alone.
    rid = sweep.run_id({"gpu.sms": 8})
    f = tmp_path / "t" / "runs" / f"{rid}.parquet"
    df = pq.read_table(f).to_pandas()
    df["time.kernel_ns"] *= 2
    pq.write_table(pa.Table.from_pandas(df), f)
    r = diff.compare(tmp_path / "s", tmp_path / "t")
    assert [x.key for x in r.differing] == [rid]
    assert [(m.name, m.relative) for m in r.differing[0].metrics] == [("time.kernel_ns", 1.0)]
    # Stored as failed (a failed run's metrics are NaN): it differs by its status.
    df["status"] = "failed"
    for c in ("time.kernel_ns", "sim.events"):
        df[c] = math.nan
    pq.write_table(pa.Table.from_pandas(df), f)
    (run,) = diff.compare(tmp_path / "s", tmp_path / "t", metrics=["gpu0.warp_mem_insts"]).differing
    assert (run.status, run.metrics) == (("ok", "failed"), [])
    f.unlink()
    r = diff.compare(tmp_path / "s", tmp_path / "t")
    assert r.only_old == [rid] and not r.differing


def test_a_nan_tolerance_is_bad_input(cli: Cli, tmp_path: Path) -> None:
    summary(tmp_path / "a", {"x": 1})
    p = cli("diff", "a", "a", "--tolerance", "nan")
    assert (
        p.returncode == 2
        and p.stderr == "uvmsim: error: Invalid value for '--tolerance': must be a number >= 0, not nan\n"
    )


# --- checked values and fingerprints --------------------------------------------------------------------------


def result(d: Path, status: str, rows: dict[str, tuple[float, bool | None]]) -> Path:
    """An experiment's result.json in ``d``, written as uvmsim reproduce writes it (report.Outcome)."""
    d.mkdir(parents=True, exist_ok=True)
    made = [rep.Row(m, 0.0, v, "", "info" if p is None else "exact", p, "") for m, (v, p) in rows.items()]
    (d / "result.json").write_text(json.dumps(report.Outcome(d.name, status, 1.0, True, rows=made).to_json()))
    return d


def experiment_dirs(root: Path, kernel: float = 1000.0, value: float = 2.5, passed: bool | None = True) -> Path:
    """Two experiments as reproduce --all stores them: e1 with two runs and two checked rows, e2 with one run."""
    summary(root / "e1" / "runs" / "r1", {"time.kernel_ns": kernel, "uvm.batches": 8, "sim.wall_s": 1.0})
    summary(root / "e1" / "runs" / "r2", {"time.kernel_ns": 3.0, "uvm.faults": 1e-3 / 3})
    summary(root / "e2" / "runs" / "r1", {"time.kernel_ns": 7.0})
    result(root / "e1", "PASS" if passed is not False else "FAIL", {"speedup": (value, passed), "ratio": (1 / 3, None)})
    result(root / "e2", "INFO", {"x": (1.0, None)})
    return root


def test_checked_values_of_two_directories_are_compared(tmp_path: Path) -> None:
    experiment_dirs(tmp_path / "a")
    experiment_dirs(tmp_path / "b", value=2.0, passed=False)
    r = diff.compare(tmp_path / "a", tmp_path / "b")
    assert not r.same and not r.differing  # the runs are the same: the analysis moved
    (e,) = r.experiments_differing
    assert (e.key, e.status) == ("e1", ("PASS", "FAIL"))
    assert e.checks == [diff.CheckChange("speedup", diff.Check(2.5, True), diff.Check(2.0, False))]
    # Within a 25% tolerance the value is the same, but the verdict is not: still a change of the row.
    (e,) = diff.compare(tmp_path / "a", tmp_path / "b", tolerance=0.25).experiments_differing
    assert [c.metric for c in e.checks] == ["speedup"]
    text = diff.render(r)
    assert text[-3:] == [
        "experiments whose checked values differ: 1 of 2",
        "  e1: status PASS -> FAIL",
        "    speedup: 2.5 (pass) -> 2 (fail)",
    ]
    # A row on one side only is a difference; an experiment on one side only too.
    result(tmp_path / "b" / "e2", "INFO", {"x": (1.0, None), "y": (3.0, None)})
    shutil.rmtree(tmp_path / "b" / "e1")
    r = diff.compare(tmp_path / "a", tmp_path / "b")
    got = {e.key: (e.status, [(c.metric, c.old, c.new) for c in e.checks]) for e in r.experiments_differing}
    assert got == {
        "e1": (("PASS", "-"), [("speedup", diff.Check(2.5, True), None), ("ratio", diff.Check(1 / 3, None), None)]),
        "e2": (("INFO", "INFO"), [("y", None, diff.Check(3.0, None))]),
    }


def test_a_fingerprint_digests_each_run_and_keeps_the_checked_values(tmp_path: Path) -> None:
    a = experiment_dirs(tmp_path / "a")
    fp = diff.fingerprint(a)
    # Every metric of the runs but the wall-clock ones; one digest per run, each a function of its own metrics.
    assert fp.metrics == ("time.kernel_ns", "uvm.batches", "uvm.faults")
    assert sorted(fp.runs) == ["e1/runs/r1", "e1/runs/r2", "e2/runs/r1"] and len(set(fp.runs.values())) == 3
    assert fp.experiments["e1"] == diff.Experiment(
        "PASS", {"speedup": diff.Check(2.5, True), "ratio": diff.Check(1 / 3, None)}
    )
    # Written and read back: the same fingerprint, values kept to DIGITS significant digits.
    (tmp_path / "fp.json").write_text(json.dumps(diff.fingerprint_json(fp)))
    back = diff.read_fingerprint(tmp_path / "fp.json")
    assert back is not None and (back.digits, back.metrics, back.runs) == (fp.digits, fp.metrics, fp.runs)
    assert back.experiments["e1"].checks["ratio"] == diff.Check(0.333333333, None)
    assert back.experiments["e2"] == fp.experiments["e2"]
    assert diff.compare(tmp_path / "fp.json", a).same  # 1/3 against its 9 digits: the same value
    assert diff.rounded(1e-3 / 3) == "3.33333333e-04" and diff.rounded(8.0) == "8" and diff.rounded(-math.inf) == "-inf"
    assert diff.read_fingerprint(tmp_path / "a" / "e1" / "runs" / "r1" / "summary.json") is None  # not a fingerprint
    # The digest covers the status (a failed sweep run) as well as the metrics.
    ok, failed = diff.Run({"x": 1.0}, {}, "ok"), diff.Run({"x": 1.0}, {}, "failed")
    assert (
        diff.digest(ok, ["x"]) != diff.digest(failed, ["x"]) != diff.digest(diff.Run({"x": 2.0}, {}, "failed"), ["x"])
    )


@pytest.mark.parametrize(
    ("change", "moved"),
    [
        pytest.param({"time.kernel_ns": 1000.5}, True, id="a-metric-moved"),
        pytest.param({"time.kernel_ns": 1000.0 * (1 + 1e-12)}, False, id="below-the-digits-kept"),
        pytest.param({"sim.wall_s": 9.0}, False, id="wall-clock"),
        pytest.param({"uvm.new_metric": 5}, False, id="a-metric-the-fingerprint-does-not-cover"),
        pytest.param({"uvm.faults": 1.0}, True, id="a-covered-metric-gained"),
        pytest.param({"uvm.batches": None}, True, id="a-metric-lost"),
    ],
)
def test_a_run_moves_against_a_fingerprint_when_a_covered_metric_does(
    tmp_path: Path, change: dict[str, Any], moved: bool
) -> None:
    experiment_dirs(tmp_path / "a")
    (tmp_path / "fp.json").write_text(json.dumps(diff.fingerprint_json(diff.fingerprint(tmp_path / "a"))))
    b = experiment_dirs(tmp_path / "b")
    metrics = {"time.kernel_ns": 1000.0, "uvm.batches": 8, "sim.wall_s": 1.0, **change}
    summary(b / "e1" / "runs" / "r1", {k: v for k, v in metrics.items() if v is not None})
    r = diff.compare(tmp_path / "fp.json", b)
    assert r.fingerprint and len(r.runs) == 3
    assert [x.key for x in r.differing] == (["e1/runs/r1"] if moved else [])
    assert r.same is not moved
    assert diff.compare(b, tmp_path / "fp.json").same is not moved  # either side


def test_a_fingerprint_lists_a_sweeps_and_a_runs_moved_keys_once(tmp_path: Path) -> None:
    # Keys without a directory (a sweep's run ids, a run directory's ".") were listed as "ID: ID" and ".: .".
    summary(tmp_path / "a", {"time.kernel_ns": 1.0})
    summary(tmp_path / "b", {"time.kernel_ns": 2.0})
    (tmp_path / "fp.json").write_text(json.dumps(diff.fingerprint_json(diff.fingerprint(tmp_path / "a"))))
    assert diff.render(diff.compare(tmp_path / "fp.json", tmp_path / "b"))[-1] == "  ."
    fa = diff.Fingerprint(9, ("m",), {"0123456789abcdef": "x", "fedcba9876543210": "y"}, {})
    fb = diff.Fingerprint(9, ("m",), {"0123456789abcdef": "z", "fedcba9876543210": "y"}, {})
    assert diff.render(diff.compare_fingerprints(tmp_path, tmp_path, fa, fb))[-1] == "  0123456789abcdef"


def test_a_fingerprint_is_not_written_over_the_results_it_digests(cli: Cli, tmp_path: Path) -> None:
    # `fingerprint run -o run/summary.json` replaced the run's summary with the fingerprint (exit 0): the run was lost.
    summary(tmp_path / "run", {"time.kernel_ns": 1.0})
    sweep.run_sweep(
        {"preset": "kaveri-apu", "set": {"workload.stride.accesses": 50}, "grid": {"sim.seed": [1]}}, tmp_path / "s"
    )
    (parquet,) = (tmp_path / "s" / "runs").glob("*.parquet")
    (tmp_path / "link.json").symlink_to(tmp_path / "run" / "summary.json")
    for d, out, what in (
        ("run", "run/summary.json", "a run summary"),
        ("run", "link.json", "a run summary"),
        ("run/summary.json", "run/summary.json", "the result"),
        ("s", "s/sweep.json", "the sweep record"),
        ("s", f"s/runs/{parquet.name}", "a sweep run"),
    ):
        before = {
            f: f.read_bytes() for f in (tmp_path / "run" / "summary.json", tmp_path / "s" / "sweep.json", parquet)
        }
        p = cli("fingerprint", d, "-o", out)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, (d, out, p.stderr)
        assert f"`{out}` is {what}" in p.stderr and "would destroy its input" in p.stderr
        assert {f: f.read_bytes() for f in before} == before
    assert cli("fingerprint", "run", "-o", "run/fp.json").returncode == 0  # beside the results: fine
    assert cli("diff", "run/fp.json", "run").returncode == 0


def test_the_cli_writes_a_fingerprint_and_diffs_against_it(cli: Cli, tmp_path: Path) -> None:
    experiment_dirs(tmp_path / "a")
    experiment_dirs(tmp_path / "b", kernel=1200.0, value=2.0, passed=False)
    p = cli("fingerprint", "a", "-o", "fp.json")
    assert p.returncode == 0 and p.stdout == "fingerprint of 3 runs and 2 experiments written to fp.json\n"
    assert cli("fingerprint", "a").stdout == (tmp_path / "fp.json").read_text()  # printed or written, the same bytes
    assert cli("diff", "fp.json", "a").returncode == 0
    assert cli("diff", "fp.json", "fp.json").returncode == 0
    p = cli("diff", "fp.json", "b")
    assert p.returncode == 1, p.stderr
    assert p.stdout.splitlines() == [
        "3 runs in both: 2 with the same metrics, 1 with different ones",
        "runs that differ, by directory: e1 1/2",
        "",
        "experiments whose checked values differ: 1 of 2",
        "  e1: status PASS -> FAIL",
        "    speedup: 2.5 (pass) -> 2 (fail)",
        "",
        "runs whose digests differ (a fingerprint holds no values: compare two result directories to see which"
        " metrics moved):",
        "  e1: runs/r1",
    ]
    data = json.loads(cli("diff", "fp.json", "b", "--json").stdout)
    assert (data["fingerprint"], data["differing"]) == (True, 1)
    assert data["experiments"][0]["checks"] == [
        {"metric": "speedup", "old": {"value": 2.5, "passed": True}, "new": {"value": 2.0, "passed": False}}
    ]


def _fingerprint_doc(tmp_path: Path) -> dict[str, Any]:
    return diff.fingerprint_json(diff.fingerprint(experiment_dirs(tmp_path / "src")))


@pytest.mark.parametrize(
    ("edit", "args", "words"),
    [
        pytest.param(
            lambda d: d | {"version": 2}, (), r"fingerprint version 2; this uvmsim reads version 1", id="version"
        ),
        pytest.param(
            lambda d: d | {"digits": 40},
            (),
            r"damaged fingerprint: `digits` must be an integer from 1 to 17, not 40",
            id="digits",
        ),
        pytest.param(lambda d: d | {"runs": [1]}, (), r"damaged fingerprint: `runs` must be a table", id="runs-a-list"),
        pytest.param(
            lambda d: d | {"experiments": {"e1": {"status": "PASS", "checks": {"m": {"value": "x", "passed": 1}}}}},
            (),
            r"damaged fingerprint: check `m` of `e1` must be a table with a numeric `value`",
            id="a-check-damaged",
        ),
        pytest.param(
            lambda d: {k: v for k, v in d.items() if k != "experiments"},
            (),
            r"damaged fingerprint: `experiments` must be a table",
            id="part-lost",
        ),
        pytest.param(lambda d: d, ("--metric", "time.*"), r"--metric.*needs runs on both sides", id="metric-glob"),
        pytest.param(
            lambda d: d | {"metrics": ["time.kernel_ns"]}, ("new.json",), r"digest different metrics", id="two-unlike"
        ),
    ],
)
def test_a_bad_fingerprint_is_one_line_and_exit_code_2(
    cli: Cli, tmp_path: Path, edit: Any, args: tuple[str, ...], words: str
) -> None:
    doc = _fingerprint_doc(tmp_path)
    (tmp_path / "old.json").write_text(json.dumps(edit(doc)))
    (tmp_path / "new.json").write_text(json.dumps(doc))
    new, *rest = args if args and not args[0].startswith("-") else ("src", *args)
    p = cli("diff", "old.json", new, *rest)
    assert p.returncode == 2, p.stdout
    assert p.stderr.startswith("uvmsim: error: ") and len(p.stderr.splitlines()) == 1
    assert re.search(words, p.stderr), p.stderr
    assert ("'--metric'" in p.stderr) == ("--metric" in rest)  # only that case is the option's fault
    # Any other JSON file is not a result at all.
    (tmp_path / "other.json").write_text(json.dumps({"format": "something-else"}))
    assert re.search(r"is not a result: .* or a fingerprint", cli("diff", "other.json", "src").stderr)


def test_a_damaged_result_json_is_bad_input(cli: Cli, tmp_path: Path) -> None:
    experiment_dirs(tmp_path / "a")
    (tmp_path / "a" / "e2" / "result.json").write_text('{"rows": []}')
    p = cli("diff", "a", "a")
    assert p.returncode == 2 and "e2/result.json: not an experiment result" in p.stderr, p.stderr
    assert cli("fingerprint", "a").returncode == 2
