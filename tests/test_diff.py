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
from uvmsim import diff, sweep


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
