"""`uvmsim sweep`: spec parsing, the Parquet store, failures, resume, interruption, and the Ray engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

import uvmsim
from conftest import Cli, run_python
from uvmsim import sweep

# Wall-clock measurements, the only metrics allowed to differ between identical runs.
WALL_CLOCK = uvmsim.WALL_CLOCK_METRICS

BASE = """\
preset = "titan-v"
[set]
"workload.kind" = "regular"
workload.managed = true
"""
# The acceptance sweep: 3 x 4 x 4 = 48 small managed runs (each a few ms).
SPEC_48 = (
    BASE
    + """\
[grid]
"uvm.replay_policy" = ["batch", "batch-flush", "once"]
"uvm.batch_size" = [64, 128, 256, 512]
"workload.regular.threads" = [1024, 2048, 4096, 8192]
"""
)
# Long enough runs (0.1-0.3 s each, ~5 s in all on 2 workers) to interrupt a sweep in the middle.
SPEC_SLOW = (
    BASE
    + """\
uvm.replay_policy = "once"
[grid]
"uvm.batch_size" = [64, 128, 256, 512]
"workload.regular.threads" = [16384, 32768, 49152]
"sim.seed" = [1, 2, 3, 4]
"""
)
# One good run, one invalid value, one simulation that stalls.
SPEC_FAILING = (
    BASE
    + """\
workload.regular.threads = 1024
[[runs]]
uvm.batch_size = 64
[[runs]]
uvm.batch_size = 0
[[runs]]
"sim.stall_events" = 1
"""
)


def write_spec(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def stored(out: Path) -> dict[str, int]:
    """Run id -> mtime (ns) of every stored run file."""
    return {p.stem: p.stat().st_mtime_ns for p in (out / "runs").glob("*.parquet") if not p.name.startswith(".")}


def comparable(df: pd.DataFrame) -> pd.DataFrame:
    """The deterministic part of a sweep's results: every column except wall-clock ones, indexed by run id."""
    drop = [c for c in df.columns if c in WALL_CLOCK or c == "finished_unix_s"]
    return df.drop(columns=drop).set_index("run_id").sort_index()


# --- the spec -----------------------------------------------------------------------------------------------


def test_grid_is_the_cartesian_product_with_stable_ids(tmp_path: Path) -> None:
    spec = sweep.load_spec(write_spec(tmp_path, SPEC_48))
    assert spec.preset == "titan-v"
    assert spec.set == {"workload.kind": "regular", "workload.managed": True}
    assert spec.axes == ["uvm.replay_policy", "uvm.batch_size", "workload.regular.threads"]
    assert len(spec.runs) == 48
    assert spec.runs[0].overrides == {
        "uvm.replay_policy": "batch",
        "uvm.batch_size": 64,
        "workload.regular.threads": 1024,
    }
    assert spec.runs[-1].overrides == {
        "uvm.replay_policy": "once",
        "uvm.batch_size": 512,
        "workload.regular.threads": 8192,
    }
    assert len({r.id for r in spec.runs}) == 48
    # The id depends on the overrides only: the same in another load, whatever the key order.
    assert [r.id for r in sweep.load_spec(write_spec(tmp_path, SPEC_48, "again.toml")).runs] == [
        r.id for r in spec.runs
    ]
    assert sweep.run_id({"a.b": 1, "c.d": "x"}) == sweep.run_id({"c.d": "x", "a.b": 1})
    assert sweep.run_id({"a.b": 1}) != sweep.run_id({"a.b": 1.0}) != sweep.run_id({"a.b": True})


def test_numpy_values_are_plain_values_with_the_same_ids() -> None:
    import numpy as np

    plain = {"preset": "titan-v", "set": {"gpu.sms": 4}, "grid": {"gpu.core_mhz": [1000.0, 1200.0], "sim.seed": [1]}}
    numpy = {
        "preset": "titan-v",
        "set": {"gpu.sms": np.int64(4)},
        "grid": {"gpu.core_mhz": np.linspace(1000.0, 1200.0, 2), "sim.seed": [np.int64(1)]},
    }
    a, b = sweep.parse_spec(plain, "plain"), sweep.parse_spec(numpy, "numpy")
    assert [(r.id, r.overrides) for r in b.runs] == [(r.id, r.overrides) for r in a.runs]
    assert all(type(v) in (int, float) for r in b.runs for v in r.overrides.values())
    assert type(b.set["gpu.sms"]) is int


def test_example_spec_is_the_48_run_grid() -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "sweeps" / "replay-policy.toml"
    expected = sweep.parse_spec(tomllib.loads(SPEC_48), "SPEC_48")
    assert [r.overrides for r in sweep.load_spec(example).runs] == [r.overrides for r in expected.runs]


def test_runs_list_accepts_nested_and_dotted_keys(tmp_path: Path) -> None:
    text = 'preset = "titan-v"\n[[runs]]\nuvm.batch_size = 64\n[[runs]]\n"uvm.batch_size" = 128\ngpu.sms = 4\n'
    spec = sweep.load_spec(write_spec(tmp_path, text))
    assert [r.overrides for r in spec.runs] == [{"uvm.batch_size": 64}, {"uvm.batch_size": 128, "gpu.sms": 4}]
    assert spec.axes == ["uvm.batch_size", "gpu.sms"]


def test_config_file_is_relative_to_the_spec(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "base.toml").write_text("[gpu]\nsms = 3\n")
    spec = sweep.load_spec(write_spec(tmp_path / "sub", 'config = "base.toml"\n[grid]\n"gpu.core_mhz" = [500.0]\n'))
    assert spec.config == tmp_path / "sub" / "base.toml"
    assert uvmsim.resolve(spec.config)["gpu"]["sms"] == 3


BAD_SPECS = [
    pytest.param('preset = "titan-v"\ngrdi = 1\n', ["unknown key `grdi`", "did you mean `grid`"], id="unknown-key"),
    pytest.param(
        'preset = "titan-v"\n[grid]\n"uvm.batch_sise" = [1]\n',
        ["[grid]", "uvm.batch_sise", "did you mean `uvm.batch_size`"],
        id="unknown-axis",
    ),
    pytest.param(
        'preset = "titan-v"\n[set]\ngpu.smss = 1\n[grid]\n"gpu.sms" = [1]\n', ["[set]", "gpu.smss"], id="unknown-set"
    ),
    pytest.param(
        'preset = "titan-v"\n[[runs]]\ngpu.sms = 1\n[[runs]]\ngpu.smz = 2\n',
        ["[[runs]] #2", "gpu.smz", "gpu.sms"],
        id="unknown-run-key",
    ),
    pytest.param('preset = "titan-v"\n[grid]\n"gpu.sms" = 4\n', ["gpu.sms", "non-empty list"], id="axis-not-a-list"),
    pytest.param('preset = "titan-v"\n[grid]\n"gpu.sms" = []\n', ["gpu.sms", "non-empty list"], id="empty-axis"),
    pytest.param('preset = "titan-v"\n[grid]\n"gpu.sms" = [4, 4]\n', ["gpu.sms", "value 4 twice"], id="duplicate"),
    pytest.param(
        'preset = "titan-v"\n[grid]\n"gpu.sms" = [4]\n[[runs]]\n"gpu.sms" = 2\n', ["either a [grid]"], id="both"
    ),
    pytest.param('preset = "titan-v"\n', ["either a [grid]"], id="neither"),
    pytest.param(
        'preset = "titan-v"\n[[runs]]\n"gpu.sms" = 2\n[[runs]]\ngpu.sms = 2\n', ["#2 repeats run #1"], id="repeated"
    ),
    # A quoted and an unquoted form of one key: both name the key, and one value used to be lost silently.
    pytest.param(
        'preset = "titan-v"\n[grid]\n"uvm.batch_size" = [64, 128]\nuvm.batch_size = [64]\n',
        ["spec.toml: [grid]: key `uvm.batch_size` given twice", '`"uvm.batch_size"`', "and as `uvm.batch_size`"],
        id="axis-quoted-and-not",
    ),
    pytest.param(
        'preset = "titan-v"\n[set]\nuvm.batch_size = 64\n"uvm.batch_size" = 128\n[grid]\n"gpu.sms" = [1]\n',
        ["spec.toml: [set]: key `uvm.batch_size` given twice", 'as `uvm.batch_size` and as `"uvm.batch_size"`'],
        id="set-quoted-and-not",
    ),
    pytest.param(
        'preset = "titan-v"\n[[runs]]\n"uvm.batch_size" = 64\n[runs.uvm]\nbatch_size = 128\n',
        ["[[runs]] #1: key `uvm.batch_size` given twice"],
        id="run-quoted-and-not",
    ),
    pytest.param('preset = "titan-v"\n[grid\n', ["spec.toml", "not valid TOML"], id="not-toml"),
    pytest.param(
        'preset = "titan-v"\n[grid]\n"gpu.sms" = [[1, 2]]\n', ["gpu.sms", "number, a boolean or a string"], id="list"
    ),
    pytest.param(
        'preset = "titan-v"\n[set]\n"translation.levels" = 3\n[grid]\n"gpu.sms" = [1]\n',
        ["base config is invalid", "translation.levels", "4, 5"],
        id="bad-base-value",
    ),
    pytest.param('preset = "titan"\n[grid]\n"gpu.sms" = [1]\n', ["unknown preset `titan`"], id="unknown-preset"),
    # Two values of the base that conflict: the core names their source `--set`; here it is the spec's [set].
    pytest.param(
        'preset = "titan-v"\n[set]\n"gpu.l1tlb.entries" = 8\n[grid]\n"gpu.sms" = [1]\n',
        ["base config is invalid", "in conflict with `gpu.l1tlb.entries` from [set])"],
        id="base-conflict",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD_SPECS)
def test_bad_spec_is_one_line_and_exit_2(cli: Cli, tmp_path: Path, text: str, expected: list[str]) -> None:
    write_spec(tmp_path, text)
    p = cli("sweep", "spec.toml", "-o", "out")
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("uvmsim: error: "), p.stderr
    for word in expected:
        assert word in lines[0], lines[0]
    assert not (tmp_path / "out").exists()  # nothing made for a sweep that never started


def test_missing_spec_and_bad_options_exit_2(cli: Cli, tmp_path: Path) -> None:
    p = cli("sweep", "absent.toml", "-o", "out")
    assert p.returncode == 2 and "absent.toml" in p.stderr and "does not exist" in p.stderr
    write_spec(tmp_path, SPEC_48)
    for args, word in ((["--jobs", "0"], "--jobs"), (["--address", "x"], "--engine ray"), (["--engine", "x"], "x")):
        p = cli("sweep", "spec.toml", "-o", "out", *args)
        assert p.returncode == 2 and word in p.stderr and "Traceback" not in p.stderr, p.stderr


# --- running, the store, failures, resume ------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_48(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The 48-run acceptance sweep on the local engine, through the command line."""
    d = tmp_path_factory.mktemp("local48")
    write_spec(d, SPEC_48)
    p = subprocess.run(
        [sys.executable, "-m", "uvmsim", "sweep", "spec.toml", "-o", "out", "--jobs", "2"],
        cwd=d,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return d / "out", p


def test_local_sweep_stores_one_file_per_run(local_48: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, p = local_48
    assert p.returncode == 0, p.stderr
    assert "48 ok, 0 failed, 0 skipped" in p.stdout
    assert "48 runs, 0 already done, 48 to run" in p.stderr
    spec = sweep.load_spec(out.parent / "spec.toml")
    assert sorted(stored(out)) == sorted(r.id for r in spec.runs)
    assert not [f for f in (out / "runs").iterdir() if f.name.startswith(".")]  # no temporary left
    one = pq.read_table(out / "runs" / f"{spec.runs[5].id}.parquet").to_pandas()
    assert len(one) == 1
    assert one.at[0, "set.uvm.batch_size"] == 128 and one.at[0, "set.workload.regular.threads"] == 2048
    df = sweep.load_sweep(out)
    assert list(df["run_id"]) == [r.id for r in spec.runs]  # in spec order
    assert list(df.columns[:6]) == [
        "run_id",
        "status",
        "error",
        "set.uvm.replay_policy",
        "set.uvm.batch_size",
        "set.workload.regular.threads",
    ]
    assert (df["status"] == "ok").all() and df["error"].isna().all()
    assert df["uvm.faults.unique"].tolist() == df["set.workload.regular.threads"].tolist()  # one page per thread
    config = json.loads(df.at[0, "config"])
    assert config["uvm"]["replay_policy"] == "batch" and config["gpu"]["sms"] == 80  # the preset's, resolved
    # Each run's metrics are those of the same run done alone.
    alone = uvmsim.run(preset="titan-v", set={**spec.set, **spec.runs[5].overrides}).metrics
    assert {k: v for k, v in alone.items() if k not in WALL_CLOCK} == {
        k: df.at[5, k] for k in alone if k not in WALL_CLOCK
    }


def test_ray_engine_gives_the_same_metrics(
    local_48: tuple[Path, subprocess.CompletedProcess[str]], cli: Cli, tmp_path: Path
) -> None:
    pytest.importorskip("ray", reason="the Ray engine needs the `ray` extra: pip install '.[ray]'")
    out, p = local_48
    assert p.returncode == 0, p.stderr
    write_spec(tmp_path, SPEC_48)
    # No --address: the command starts a local Ray instance with 2 CPUs and stops it at the end.
    r = cli("sweep", "spec.toml", "-o", "ray-out", "--engine", "ray", "--jobs", "2", timeout=240)
    assert r.returncode == 0, r.stderr
    assert "48 ok, 0 failed" in r.stdout
    local, ray = comparable(sweep.load_sweep(out)), comparable(sweep.load_sweep(tmp_path / "ray-out"))
    assert len(ray) == 48
    pd.testing.assert_frame_equal(local, ray)


def test_failed_runs_are_recorded_and_resume_redoes_only_them(cli: Cli, tmp_path: Path) -> None:
    write_spec(tmp_path, SPEC_FAILING)
    p = cli("sweep", "spec.toml", "-o", "out", "--jobs", "2")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "1 ok, 2 failed" in p.stdout
    assert "(uvm.batch_size=0): key `uvm.batch_size`: must be between 1" in p.stdout
    assert "(sim.stall_events=1): simulation failed: simulated time stopped advancing" in p.stdout, p.stdout
    assert "Traceback" not in p.stderr
    df = sweep.load_sweep(tmp_path / "out").set_index("set.uvm.batch_size", drop=False)
    assert list(df["status"]) == ["ok", "failed", "failed"]
    bad_value = df[df["set.uvm.batch_size"] == 0].iloc[0]
    assert bad_value["config"] is None and pd.isna(bad_value["time.total_ns"])
    stalled = df[df["set.sim.stall_events"] == 1].iloc[0]
    assert json.loads(stalled["config"])["sim"]["stall_events"] == 1  # a config that failed to simulate is kept

    before = stored(tmp_path / "out")
    time.sleep(0.01)  # so that a rewritten file would get a later mtime
    r = cli("sweep", "spec.toml", "-o", "out", "--resume")
    assert r.returncode == 1, r.stderr
    assert "0 ok, 2 failed, 1 skipped" in r.stdout
    after = stored(tmp_path / "out")
    ok_id = df[df["status"] == "ok"].iloc[0]["run_id"]
    assert after[ok_id] == before[ok_id]  # the finished run was not redone
    assert all(after[i] != before[i] for i in before if i != ok_id)  # the failed ones were


def test_a_run_in_conflict_with_the_preset_names_its_sweep_source_not_set(tmp_path: Path) -> None:
    # The core blames `--set` for the value in conflict; in a sweep no --set was given.
    spec = sweep.load_spec(write_spec(tmp_path, 'preset = "titan-v"\n[grid]\n"gpu.l1tlb.entries" = [8]\n'))
    row = sweep.execute(spec.sources(), spec.base_overrides(), spec.runs[0])
    assert row["status"] == "failed" and "--set" not in row["error"], row["error"]
    assert row["error"].endswith("(in conflict with `gpu.l1tlb.entries` from the spec's [set] or this run)")


def test_existing_sweep_needs_resume_and_the_same_base(cli: Cli, tmp_path: Path) -> None:
    small = BASE + '[grid]\n"workload.regular.threads" = [1024, 2048]\n'
    write_spec(tmp_path, small)
    assert cli("sweep", "spec.toml", "-o", "out").returncode == 0
    p = cli("sweep", "spec.toml", "-o", "out")
    assert p.returncode == 2 and "already holds a sweep (2 runs); pass --resume" in p.stderr
    write_spec(tmp_path, small.replace('preset = "titan-v"', 'preset = "gtx480-zheng"'), "other.toml")
    p = cli("sweep", "other.toml", "-o", "out", "--resume")
    assert p.returncode == 2 and "another base config" in p.stderr, p.stderr
    # A damaged record names what differs in one line, not the whole config.
    record = json.loads((tmp_path / "out" / "sweep.json").read_text(encoding="utf-8"))
    good = dict(record)
    (tmp_path / "out" / "sweep.json").write_text(json.dumps(record | {"base_config": "damaged"}), encoding="utf-8")
    p = cli("sweep", "spec.toml", "-o", "out", "--resume")
    assert p.returncode == 2 and '(`base_config`: "damaged" there, {"' in p.stderr, p.stderr
    assert len(p.stderr) < 400 and "…" in p.stderr, p.stderr
    (tmp_path / "out" / "sweep.json").write_text(json.dumps(good), encoding="utf-8")
    # Adding a value to an axis and resuming runs only the new run.
    before = stored(tmp_path / "out")
    write_spec(tmp_path, small.replace("[1024, 2048]", "[1024, 2048, 4096]"))
    p = cli("sweep", "spec.toml", "-o", "out", "--resume")
    assert p.returncode == 0 and "1 ok, 0 failed, 2 skipped" in p.stdout, p.stdout
    after = stored(tmp_path / "out")
    assert len(after) == 3 and all(after[i] == before[i] for i in before)


def test_python_api(tmp_path: Path) -> None:
    spec = sweep.parse_spec(
        {"preset": "titan-v", "set": {"workload": {"kind": "regular", "managed": True}}, "grid": {"gpu.sms": [4, 8]}},
        "<test>",
    )
    seen: list[str] = []
    summary = uvmsim.sweep.run_sweep(spec, tmp_path / "s", jobs=1, on_result=lambda row: seen.append(row["run_id"]))
    assert (summary.total, summary.ok, summary.failed, summary.skipped) == (2, 2, [], 0)
    assert sorted(seen) == sorted(r.id for r in spec.runs)
    assert list(uvmsim.sweep.load_sweep(tmp_path / "s")["set.gpu.sms"]) == [4, 8]
    assert uvmsim.sweep.run_sweep(spec, tmp_path / "s", resume=True).skipped == 2
    assert uvmsim.sweep(spec, tmp_path / "s", resume=True).skipped == 2  # DESIGN.md's `uvmsim.sweep(...)`
    with pytest.raises(FileNotFoundError, match="not a sweep directory"):
        uvmsim.sweep.load_sweep(tmp_path)


def test_run_sweep_takes_a_spec_dict(tmp_path: Path) -> None:
    # docs/experiments.md's `run_sweep(spec_or_path, ...)`: a plain dict used to fail with a raw os.fspath TypeError.
    spec = {"preset": "titan-v", "set": {"workload.kind": "regular"}, "grid": {"gpu.sms": [4, 8]}}
    summary = uvmsim.sweep.run_sweep(spec, tmp_path / "s", jobs=1)
    assert (summary.total, summary.ok) == (2, 2)
    assert list(uvmsim.sweep.load_sweep(tmp_path / "s")["set.gpu.sms"]) == [4, 8]
    with pytest.raises(uvmsim.ConfigError, match=r"^<dict spec>: \[grid\]: unknown config key `gpu.smz`"):
        uvmsim.sweep.run_sweep({"preset": "titan-v", "grid": {"gpu.smz": [4]}}, tmp_path / "t")
    with pytest.raises(TypeError, match="spec must be a SweepSpec, the path of a spec file or a spec dict, not list"):
        uvmsim.sweep.run_sweep([("gpu.sms", [4])], tmp_path / "t")  # type: ignore[arg-type]
    assert not (tmp_path / "t").exists()


def test_a_sweep_from_stdin_runs_in_this_process(tmp_path: Path) -> None:
    # Spawned workers re-run __main__ from its file: a program read from stdin has none, and every run used to
    # be stored as failed ("worker process died"). It now runs them one at a time, with one line saying so.
    program = (
        "import uvmsim.sweep as S\n"
        "spec = S.parse_spec({'preset': 'titan-v', 'set': {'workload.kind': 'stream', 'workload.stream.elements': "
        "65536}, 'grid': {'gpu.sms': [4, 8]}}, 'inline')\n"
        "s = S.run_sweep(spec, 'out', jobs=2)\n"
        "print(s.ok, len(s.failed))\n"
    )
    p = run_python(tmp_path, program, stdin=True)
    assert p.returncode == 0 and p.stdout.split() == ["2", "0"], (p.stdout, p.stderr)
    assert len(p.stderr.splitlines()) == 1 and "one at a time" in p.stderr and "<stdin>" in p.stderr, p.stderr
    assert set(sweep.load_sweep(tmp_path / "out")["status"]) == {"ok"}


def test_a_program_calling_run_sweep_unguarded_is_told_why_its_runs_failed(tmp_path: Path) -> None:
    # Spawned workers run the program's file again: a top-level run_sweep call ran a second sweep into the same
    # directory in each worker, which died on the sweep's lock ("in use by another sweep"). The workers now stop
    # with the reason, and each failed run names it.
    program = (
        "import uvmsim.sweep as S\n"
        "s = S.run_sweep({'preset': 'titan-v', 'set': {'workload.kind': 'stream', 'workload.stream.elements': "
        "65536}, 'grid': {'gpu.sms': [4, 8]}}, 'out', jobs=2)\n"
        "print(s.ok, len(s.failed))\n"
    )
    (tmp_path / "prog.py").write_text(program, encoding="utf-8")
    p = subprocess.run(
        [sys.executable, "prog.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert p.returncode == 0 and p.stdout.split() == ["0", "2"], (p.stdout, p.stderr)
    guard = 'must call it under `if __name__ == "__main__":`'
    assert "RuntimeError: sweep worker processes import the program" in p.stderr and guard in p.stderr, p.stderr
    assert "in use by another sweep" not in p.stderr, p.stderr
    errors = sweep.load_sweep(tmp_path / "out")["error"]
    assert all(e.startswith("worker process died") and guard in e for e in errors), list(errors)


# --- interruption -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_killed_sweep_loses_no_run_and_resume_repeats_none(tmp_path: Path, signum: signal.Signals) -> None:
    write_spec(tmp_path, SPEC_SLOW)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "uvmsim", "sweep", "spec.toml", "-o", "out", "--jobs", "2", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(stored(out)) < 4:
            assert proc.poll() is None, "the sweep ended before it could be interrupted"
            assert time.monotonic() < deadline, "no run finished in time"
            time.sleep(0.02)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if signum == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:  # a clean stop: one line, the conventional exit code, the workers stopped with it
        assert proc.returncode == 128 + signum, stderr
        assert stderr.startswith("uvmsim: error: sweep interrupted by") and "--resume" in stderr, stderr
        assert len(stderr.splitlines()) == 1, stderr
    before = stored(out)
    assert 4 <= len(before) < 48, "the sweep was not stopped in the middle"
    for rid in before:  # every stored file is whole: written atomically
        assert pq.read_table(out / "runs" / f"{rid}.parquet").column("status")[0].as_py() == "ok"
    first = sweep.load_sweep(out)
    finished = dict(zip(first["run_id"], first["finished_unix_s"], strict=True))

    p = subprocess.run([*cmd[:-1], "--resume"], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    assert f"{48 - len(before)} ok, 0 failed, {len(before)} skipped" in p.stdout
    after = stored(out)
    assert sorted(after) == sorted(r.id for r in sweep.load_spec(tmp_path / "spec.toml").runs)  # none lost
    assert all(after[rid] == before[rid] for rid in before)  # none repeated: files untouched
    df = sweep.load_sweep(out)
    assert (df["status"] == "ok").all() and len(df) == 48
    assert all(df.set_index("run_id").at[rid, "finished_unix_s"] == t for rid, t in finished.items())
    assert not [f for f in (out / "runs").iterdir() if f.name.endswith(".tmp")]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_no_worker_outlives_an_interrupted_sweep(tmp_path: Path, signum: signal.Signals) -> None:
    write_spec(tmp_path, SPEC_SLOW)
    cmd = [sys.executable, "-m", "uvmsim", "sweep", "spec.toml", "-o", "out", "--jobs", "2", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "out" / "runs").is_dir():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        children = _children(proc.pid)
        assert children, "the sweep started no worker"
        proc.send_signal(signum)
        proc.communicate(timeout=60)  # returns once every process holding the sweep's stdout/stderr has ended
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in children if _alive(pid)]


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (the pool's workers and multiprocessing's resource tracker)."""
    out, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        path = Path(f"/proc/{parent}/task/{parent}/children")
        kids = [int(k) for k in path.read_text().split()] if path.exists() else []
        out.extend(kids)
        frontier.extend(kids)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


def test_lock_refuses_a_second_sweep_on_the_same_directory(tmp_path: Path) -> None:
    spec = sweep.parse_spec({"preset": "titan-v", "grid": {"gpu.sms": [4]}}, "<test>")
    with sweep._locked(tmp_path / "s"), pytest.raises(uvmsim.ConfigError, match="in use by another sweep"):
        sweep.run_sweep(spec, tmp_path / "s")


def test_run_sweep_refuses_an_out_that_would_replace_its_spec(tmp_path: Path) -> None:
    # The CLI refused it; run_sweep replaced the spec with the sweep's record, sweep.json.
    (tmp_path / "d").mkdir()
    spec = write_spec(tmp_path / "d", BASE + '[grid]\n"gpu.sms" = [4]\n', "sweep.json")
    with pytest.raises(uvmsim.ConfigError, match=r"would replace the sweep spec .*: this sweep writes"):
        sweep.run_sweep(spec, tmp_path / "d")
    with pytest.raises(uvmsim.ConfigError, match="is the sweep spec of this sweep"):
        sweep.run_sweep(spec, spec)
    assert spec.read_text().startswith(BASE) and sorted(p.name for p in (tmp_path / "d").iterdir()) == ["sweep.json"]


class _Panic(BaseException):
    """As pyo3's PanicException, which a panic of the core raises: a BaseException, not an Exception."""


def test_a_run_that_panics_is_a_failed_row_not_the_end_of_the_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    # `except Exception` let a panic through: the whole sweep (and, in the CLI, a traceback) ended on one run.
    def panics(sources: Any, overrides: Any) -> str:
        raise _Panic("index out of bounds")

    monkeypatch.setattr(sweep._core, "run", panics)
    spec = sweep.parse_spec({"preset": "titan-v", "grid": {"gpu.sms": [4]}}, "<test>")
    row = sweep.execute(spec.sources(), spec.base_overrides(), spec.runs[0])
    assert row["status"] == "failed" and row["error"] == "internal error: _Panic: index out of bounds", row
    assert json.loads(row["config"])["gpu"]["sms"] == 4

    def interrupted(sources: Any, overrides: Any) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep._core, "run", interrupted)  # Ctrl-C still stops the sweep
    with pytest.raises(KeyboardInterrupt):
        sweep.execute(spec.sources(), spec.base_overrides(), spec.runs[0])


def test_a_damaged_sweep_record_or_a_stray_directory_does_not_break_resume_or_load(tmp_path: Path) -> None:
    spec = {"preset": "titan-v", "set": {"workload.kind": "regular"}, "grid": {"gpu.sms": [4, 8]}}
    out = tmp_path / "s"
    assert sweep.run_sweep(spec, out, jobs=1).ok == 2
    (out / "sweep.json").write_text('{"runs": 7, "axes": {"a": 1}}')  # JSON, but not a sweep's record
    (out / "runs" / "stray.parquet").mkdir()  # read as an empty dataset: a KeyError of pandas
    df = sweep.load_sweep(out)
    assert sorted(df["set.gpu.sms"]) == [4, 8] and set(df["status"]) == {"ok"}
    (out / "sweep.json").write_text("[1, 2]")  # AttributeError on --resume
    summary = sweep.run_sweep(spec, out, resume=True, jobs=1)
    assert (summary.skipped, summary.ok) == (2, 0)


# 12 runs that fail at once (uvm.batch_size = 0), submitted first, then 48 slow ones.
SPEC_FAILING_THEN_SLOW = SPEC_SLOW.replace('"uvm.batch_size" = [64,', '"uvm.batch_size" = [0, 64,')


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_interrupted_sweep_says_which_of_its_stored_runs_failed(tmp_path: Path, jobs: int) -> None:
    # The runs that had failed before the signal were stored but not named: only a --resume (which runs them
    # again) listed them.
    write_spec(tmp_path, SPEC_FAILING_THEN_SLOW)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "uvmsim", "sweep", "spec.toml", "-o", "out", "--jobs", str(jobs), "--quiet"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(stored(out)) < 14:
            assert proc.poll() is None, "the sweep ended before it could be interrupted"
            assert time.monotonic() < deadline, "no run finished in time"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    n = len(stored(out))
    assert 14 <= n < 60, n
    assert (
        stderr == f"uvmsim: error: sweep interrupted by SIGINT after storing {n} runs (12 failed); run it again "
        "with --resume to finish it\n"
    ), stderr
    failed = stdout.splitlines()
    assert len(failed) == 12 and all(line.startswith("failed ") and "(uvm.batch_size=0," in line for line in failed)
    df = sweep.load_sweep(out)
    assert (df["status"] == "failed").sum() == 12 and len(df) == n


def test_stop_signals_wait_for_a_deferred_step_to_finish() -> None:
    # The sweep stores and counts each run inside stop_signals_deferred: a Ctrl-C that lands between the two
    # comes after both, so the interrupt message names every stored run.
    from uvmsim._signals import stop_signals_deferred

    done = []
    with pytest.raises(KeyboardInterrupt):
        with stop_signals_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # a handler that ran now would raise here
            done.append("stored")
            done.append("counted")
        done.append("after")  # never reached: the held signal is delivered as the block ends
    assert done == ["stored", "counted"]
