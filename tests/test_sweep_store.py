"""The sweep's ids, spec edges, per-run rows, atomic store, resume and load order, each pinned by a hand-checked
value: the tests a hand mutation audit of sweep.py found missing (docs/testing.md). Tiny runs, about ten seconds."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import uvmsim
from conftest import run_python
from uvmsim import sweep

# A small managed run (1024 threads of `regular`: a few ms).
BASE = {"preset": "titan-v", "set": {"workload.kind": "regular", "workload.regular.threads": 1024}}


def spec_of(**tables: Any) -> sweep.SweepSpec:
    return sweep.parse_spec({**BASE, **tables}, "<test>")


def test_run_ids_are_pinned() -> None:
    # The id is the first 16 hex digits of SHA-256 of the overrides as compact, key-sorted JSON with UTF-8 text:
    # `{"gpu.sms":4,"uvm.batch_size":64}` -> 8f02d97889a6e738 (`printf %s TEXT | sha256sum`, 33 bytes). A stored
    # sweep is resumed by these ids: another length, separator or escaping would run every stored run again.
    assert sweep.run_id({"uvm.batch_size": 64, "gpu.sms": 4}) == "8f02d97889a6e738"
    # `{"workload.trace.path":"tracé.csv"}`, é as its two UTF-8 bytes, not `\u00e9`.
    assert sweep.run_id({"workload.trace.path": "tracé.csv"}) == "d8757b1fc1d6c9a8"


@pytest.mark.parametrize(
    ("tables", "words"),
    [
        pytest.param({"grid": {}}, "[grid] has no axes", id="empty-grid-table"),
        pytest.param({"runs": []}, "`runs` must be a non-empty list", id="empty-runs-list"),
    ],
)
def test_a_spec_of_no_runs_is_refused(tables: dict[str, Any], words: str) -> None:
    # An empty [grid] would be the product of no axes, one run of the base alone; `runs = []` a sweep of nothing.
    with pytest.raises(uvmsim.ConfigError, match=r"^<test>: .*" + words.replace("[", r"\[").replace("]", r"\]")):
        spec_of(**tables)


def test_a_run_row_has_the_runs_override_over_the_base_and_its_version_and_time() -> None:
    # [set] says 4 SMs, the run 8: the run's override is laid over the base, so the run has 8.
    spec = sweep.parse_spec({**BASE, "set": {**BASE["set"], "gpu.sms": 4}, "grid": {"gpu.sms": [8]}}, "<test>")
    before = time.time()
    row = sweep.execute(spec.sources(), spec.base_overrides(), spec.runs[0])
    after = time.time()
    assert row["status"] == "ok" and row["set.gpu.sms"] == 8
    assert json.loads(row["config"])["gpu"]["sms"] == 8
    assert row["version"] == uvmsim.__version__
    assert before <= row["finished_unix_s"] <= after


def test_a_dead_workers_row_has_the_columns_of_a_failed_run() -> None:
    # A run whose worker died is stored like a run that failed: its overrides (which `--resume` and the failure
    # line name), no metric, no config.
    spec = spec_of(grid={"uvm.batch_size": [0]})  # 0 is out of range: a failed run with no config
    failed = sweep.execute(spec.sources(), spec.base_overrides(), spec.runs[0])
    dead = sweep._failed_row(spec.runs[0], "worker process died: killed")
    expected = ["run_id", "status", "error", "set.uvm.batch_size", "version", "finished_unix_s", "config"]
    assert sorted(failed) == sorted(dead) == sorted(expected)
    assert (dead["status"], dead["set.uvm.batch_size"], dead["config"]) == ("failed", 0, None)
    assert sweep.describe_overrides(dead) == "uvm.batch_size=0"
    # The core's "--set: " prefix is cut whole: the run's overrides are not --set options.
    assert failed["error"].startswith("key `uvm.batch_size`: must be between 1 and uvm.fault_buffer_entries (4096)")


def test_an_invalid_base_names_the_spec_and_its_set_table() -> None:
    spec = sweep.parse_spec({"preset": "titan-v", "set": {"translation.levels": 3}, "grid": {"gpu.sms": [1]}}, "<t>")
    with pytest.raises(uvmsim.ConfigError) as e:
        sweep._base_config(spec)
    # "sweep spec" for a spec that is no file; "[set] " in place of the core's "--set: ".
    assert (
        str(e.value)
        == "sweep spec: the base config is invalid: [set] key `translation.levels`: must be one of 4, 5, got 3"
    )


def test_a_run_write_that_fails_midway_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A disk that fills up in the middle of a run's file: a half file named `<id>.parquet` would be taken for a
    # stored run (and `load_sweep` would fail on it); the atomic write leaves nothing.
    def half_then_full(table: Any, where: Any) -> None:
        f = open(where, "wb") if isinstance(where, str | os.PathLike) else where  # noqa: SIM115
        f.write(b"PAR1\x00\x00")
        f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq, "write_table", half_then_full)
    row = {"run_id": "0123456789abcdef", "status": "ok", "error": None}
    (tmp_path / "runs").mkdir()
    with pytest.raises(OSError, match="0123456789abcdef.parquet: cannot write: No space left on device"):
        sweep.write_row(tmp_path, row)
    assert list((tmp_path / "runs").iterdir()) == []


def test_resume_runs_a_damaged_run_file_again_and_sweeps_away_temporaries(tmp_path: Path) -> None:
    spec = spec_of(grid={"gpu.sms": [4, 8]})
    out = tmp_path / "s"
    # The temporary of a write that a killed sweep never finished: not a stored run (no --resume needed), and
    # removed by the next sweep.
    (out / "runs").mkdir(parents=True)
    (out / "runs" / ".1fb6ff4179b2c8d7.parquet.a1b2c3.tmp").write_bytes(b"PAR1")
    summary = sweep.run_sweep(spec, out, jobs=1)
    assert (summary.ok, summary.skipped, summary.ran) == (2, 0, 2)
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(f"{r.id}.parquet" for r in spec.runs)
    # A run file cut short (a disk error, a copy): `--resume` runs it again rather than skip it or stop.
    damaged = sweep.run_path(out, spec.runs[1].id)
    damaged.write_bytes(damaged.read_bytes()[:100])
    summary = sweep.run_sweep(spec, out, resume=True, jobs=1)
    assert (summary.ok, summary.skipped) == (1, 1)
    assert sweep._status(damaged) == "ok"


def test_load_sweep_orders_columns_by_axis_and_rows_by_record(tmp_path: Path) -> None:
    # A [[runs]] list: the axes are uvm.batch_size, gpu.sms in the order the runs name them. The files load in id
    # order, gpu.sms's run (1fb6ff41...) before uvm.batch_size's (ee9e3c9e...), so the columns follow the
    # record's axes, not the order in which the files bring them.
    spec = spec_of(runs=[{"uvm.batch_size": 64}, {"gpu.sms": 4}])
    assert [r.id for r in spec.runs] == ["ee9e3c9e1f03d203", "1fb6ff4179b2c8d7"]
    out = tmp_path / "s"
    assert sweep.run_sweep(spec, out, jobs=1).ok == 2
    assert sweep.sweep_axes(out) == ["uvm.batch_size", "gpu.sms"]
    df = sweep.load_sweep(out)
    assert list(df.columns[:5]) == ["run_id", "status", "error", "set.uvm.batch_size", "set.gpu.sms"]
    assert list(df["run_id"]) == ["ee9e3c9e1f03d203", "1fb6ff4179b2c8d7"]  # the record's order, not the ids'
    # A later spec of the same base with one of the runs: it comes first, the one it no longer lists after it.
    assert sweep.run_sweep(spec_of(runs=[{"gpu.sms": 4}]), out, resume=True).skipped == 1
    assert list(sweep.load_sweep(out)["run_id"]) == ["1fb6ff4179b2c8d7", "ee9e3c9e1f03d203"]
    # A dot file is never a result (macOS leaves `._NAME` beside files copied to some disks).
    (out / "runs" / "._ee9e3c9e1f03d203.parquet").write_bytes(b"\x00\x05\x16\x07")
    assert len(sweep.load_sweep(out)) == 2


def test_load_sweep_of_no_runs_has_the_fixed_columns(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    df = sweep.load_sweep(tmp_path)
    assert list(df.columns) == ["run_id", "status", "error", "version", "finished_unix_s", "config"] and df.empty


def test_an_unreadable_run_file_is_an_input_error_not_a_damaged_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root (as these tests may run) reads a file whatever its mode: the read is made to fail instead.
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "0123456789abcdef.parquet").write_bytes(b"PAR1")

    def denied(path: Any, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    monkeypatch.setattr(pq, "read_table", denied)
    with pytest.raises(uvmsim.InputError, match=r"\(`.*0123456789abcdef.parquet`\) cannot be read: Permission denied"):
        sweep.load_sweep(tmp_path)


def test_first_difference_names_a_new_key_and_clips_at_100_characters() -> None:
    # A key only in the new base is a difference too (`null` there).
    assert sweep._first_difference({"a": 1}, {"a": 1, "b": 2}) == "`b`: null there, 2 now"
    # json.dumps of 98 x's is 100 characters, shown whole; of 99, 101, cut to 99 and an ellipsis.
    whole, cut = "x" * 98, "x" * 99
    assert sweep._first_difference({"k": whole}, {"k": 1}) == f'`k`: "{whole}" there, 1 now'
    assert sweep._first_difference({"k": cut}, {"k": 1}) == f'`k`: "{cut[:98]}… there, 1 now'


def test_a_summary_ran_its_ok_and_its_failed_runs() -> None:
    # 3 runs: 1 skipped (stored before), 1 ok, 1 failed; this sweep ran 2.
    summary = sweep.SweepSummary(total=3, skipped=1, ok=1, failed=[{"run_id": "0123456789abcdef"}])
    assert summary.ran == 2


def test_on_result_sees_each_row_once_it_is_stored(tmp_path: Path) -> None:
    out = tmp_path / "s"
    seen: list[bool] = []

    def on_result(row: dict[str, Any]) -> None:  # the row's file is there when the callback hears of it
        seen.append(sweep.run_path(out, row["run_id"]).is_file())

    sweep.run_sweep(spec_of(grid={"gpu.sms": [4]}), out, jobs=1, on_result=on_result)
    assert seen == [True]


def test_run_sweep_refuses_no_workers_and_an_address_without_ray(tmp_path: Path) -> None:
    # The CLI's --jobs has its own range check and --address its own message; the API checks both itself.
    spec = spec_of(grid={"gpu.sms": [4]})
    with pytest.raises(uvmsim.ConfigError, match=r"^jobs must be at least 1, got 0$"):
        sweep.run_sweep(spec, tmp_path / "s", jobs=0)
    with pytest.raises(uvmsim.ConfigError, match=r"^--address is for --engine ray$"):
        sweep.run_sweep(spec, tmp_path / "s", address="127.0.0.1:6379")
    assert not (tmp_path / "s").exists()


def test_an_interrupted_run_sweep_has_stopped_its_workers_when_it_raises(tmp_path: Path) -> None:
    # A caller that keeps the exception (a notebook keeps the last traceback) keeps run_sweep's frame, and with
    # it the engine's generator: unless the sweep closes it, the pool's workers go on running the other runs.
    import multiprocessing

    before = set(multiprocessing.active_children())

    def stop(row: dict[str, Any]) -> None:
        raise KeyboardInterrupt  # as Ctrl-C would, once the first run is stored

    with pytest.raises(sweep.SweepInterrupted) as e:
        sweep.run_sweep(spec_of(grid={"gpu.sms": [1, 2, 3, 4]}), tmp_path / "s", jobs=2, on_result=stop)
    assert e.value.stored == 1
    assert set(multiprocessing.active_children()) <= before


def test_jobs_is_the_pools_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # On a machine of 2 or more CPUs, jobs=1 must still mean one worker.
    sizes: list[int] = []
    pool = sweep.cf.ProcessPoolExecutor

    def recording(**kwargs: Any) -> Any:
        sizes.append(kwargs["max_workers"])
        return pool(**kwargs)

    monkeypatch.setattr(sweep.cf, "ProcessPoolExecutor", recording)
    sweep.run_sweep(spec_of(grid={"gpu.sms": [4]}), tmp_path / "s", jobs=1)
    assert sizes == [1]


@pytest.mark.parametrize(
    ("how", "sms"),
    [
        # `python -c` has no __main__ file: spawned workers import nothing of it, so they start; only a program
        # read from stdin (test_sweep.py) runs its runs one at a time, with a warning.
        ("-c", [4, 8]),
        # The warning says the runs go one at a time instead of in parallel; one run never went in parallel.
        ("-", [4]),
    ],
    ids=["python-c-in-workers", "one-run-from-stdin-no-warning"],
)
def test_sweep_programs_without_a_main_file_run_silently(tmp_path: Path, how: str, sms: list[int]) -> None:
    program = (
        "import uvmsim.sweep as S\n"
        "s = S.run_sweep({'preset': 'titan-v', 'set': {'workload.kind': 'regular', 'workload.regular.threads': 1024},"
        f" 'grid': {{'gpu.sms': {sms}}}}}, 'out', jobs=2)\n"
        "print(s.ok, len(s.failed))\n"
    )
    p = run_python(tmp_path, program, stdin=how == "-")
    assert p.returncode == 0 and p.stdout.split() == [str(len(sms)), "0"] and p.stderr == "", (p.stdout, p.stderr)


def test_sigterm_stops_run_sweep_as_an_interrupt(tmp_path: Path) -> None:
    # The CLI turns SIGTERM into an interrupt for every command; a program calling run_sweep has only the sweep's
    # own handler: a SweepInterrupted naming SIGTERM (15) and the runs stored, not death by the signal.
    import signal

    from test_sweep import SPEC_SLOW, stored

    (tmp_path / "spec.toml").write_text(SPEC_SLOW)
    program = (
        "import sys, uvmsim.sweep as S\n"
        "try:\n"
        "    S.run_sweep('spec.toml', 'out', jobs=2)\n"
        "except S.SweepInterrupted as e:\n"
        "    print(e.signum, e.stored)\n"
        "    sys.exit(3)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", program], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(stored(tmp_path / "out")) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "no run finished in time"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 3, proc.returncode
    signum, n = map(int, stdout.split())
    assert signum == signal.SIGTERM and n == len(stored(tmp_path / "out")) >= 2
