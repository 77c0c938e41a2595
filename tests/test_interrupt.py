"""Ctrl-C stops a simulation, a trace recording, a trace conversion or summary promptly (the Rust
core checks an interrupt flag the binding sets when the interpreter sees SIGINT), and leaves no
partial output. The CLI handles SIGTERM the same way, with exit code 143 instead of 130, and an
interrupted experiment keeps its finished runs."""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="sends SIGINT and SIGTERM")

# Work that takes minutes uninterrupted on this project's 2-core machines.
LONG_RUN = ["--preset", "titan-v", "--set", "workload.kind=stream", "--set", "workload.stream.elements=4294967296"]


def _interrupt_when(cmd: list[str], ready: str, cwd: Path, signum: int = signal.SIGINT) -> tuple[int, float, str]:
    """Start `cmd`, send `signum` once its stderr shows `ready`; return (exit code, seconds from
    the signal to the exit, stderr)."""
    p = subprocess.Popen(cmd, cwd=cwd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert p.stderr is not None
    seen = []
    deadline = time.monotonic() + 120
    for line in p.stderr:
        seen.append(line)
        if ready in line or time.monotonic() > deadline:
            break
    rest, took = _stop(p, signum)
    return p.returncode, took, "".join(seen) + rest


def _stop(p: subprocess.Popen[str], signum: int) -> tuple[str, float]:
    """Send `signum` to `p`; return (its stderr, seconds from the signal to its exit). Killed if still running
    60 s later (a test failure, not a process left to run for minutes)."""
    sent = time.monotonic()
    p.send_signal(signum)
    try:
        err = p.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"still running 60 s after {signal.Signals(signum).name}")
    return err, time.monotonic() - sent


def _message(signum: int) -> str:
    return "interrupted" if signum == signal.SIGINT else f"interrupted by {signal.Signals(signum).name}"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_ctrl_c_or_sigterm_stops_a_run(tmp_path: Path, signum: int) -> None:
    cmd = [sys.executable, "-m", "uvmsim", "run", *LONG_RUN, "--set", "sim.progress_every_s=0.2", "-o", "out"]
    rc, took, err = _interrupt_when(cmd, "events/s", tmp_path, signum)
    assert "events/s" in err, err  # the signal came while simulating
    assert rc == 128 + signum, err
    assert err.rstrip().endswith(f"uvmsim: error: {_message(signum)}"), err
    assert took < 20, f"{took:.1f} s from the signal to exit"
    assert not (tmp_path / "out").exists()  # before SIGTERM was handled, it killed the run and left an empty OUT


def test_ctrl_c_stops_a_recording_and_leaves_no_file(tmp_path: Path) -> None:
    # No progress line while recording: interrupt after the interpreter and the recording have started.
    cmd = [sys.executable, "-m", "uvmsim", "trace", "record", *LONG_RUN, "big.uvmt"]
    p = subprocess.Popen(cmd, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    # The temporary file beside OUT, as `trace convert` writes it: `.big.uvmt.uvmsim-PID-N.tmp`.
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".big.uvmt.uvmsim-*.tmp")) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    assert list(tmp_path.glob(".big.uvmt.uvmsim-*.tmp")), "the recording started"
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 130, err
    assert time.monotonic() - sent < 20
    assert not list(tmp_path.iterdir()), "no temporary file and no OUT left behind"


def test_ctrl_c_interrupts_the_python_api(tmp_path: Path) -> None:
    code = (
        "import uvmsim\n"
        "uvmsim.run(preset='titan-v', set={'workload.kind': 'stream', 'workload.stream.elements': 4294967296,"
        " 'sim.progress_every_s': 0.2})\n"
    )
    rc, took, err = _interrupt_when([sys.executable, "-c", code], "events/s", tmp_path)
    assert "KeyboardInterrupt" in err, err
    assert rc in (-signal.SIGINT, 128 + signal.SIGINT, 1), rc
    assert took < 20, f"{took:.1f} s from SIGINT to exit"


def test_a_sigterm_handler_that_raises_interrupts_the_python_api(tmp_path: Path) -> None:
    # The binding polls for signals, so a program's own SIGTERM handler runs mid-simulation and its exception
    # stops the run (Python's default SIGTERM action would end the process without it); nothing is written.
    code = (
        "import signal, sys, uvmsim\n"
        "def stop(signum, frame):\n"
        "    raise SystemExit(143)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "uvmsim.run(preset='titan-v', set={'workload.kind': 'stream', 'workload.stream.elements': 4294967296,"
        " 'sim.progress_every_s': 0.2}, out='out')\n"
    )
    rc, took, err = _interrupt_when([sys.executable, "-c", code], "events/s", tmp_path, signal.SIGTERM)
    assert rc == 143, err
    assert took < 20, f"{took:.1f} s from SIGTERM to exit"
    assert not (tmp_path / "out").exists()


def _big_csv_gz(path: Path) -> None:
    """A CSV trace of 2^29 records (minutes to read) in a 26 MB file, written in milliseconds: gzip members, each
    64 Ki copies of one record, one after another (a reader decompresses them as one stream)."""
    member = gzip.compress(b"0,1,0,0,R,0x1000,64\n" * (1 << 16), compresslevel=9)
    with path.open("wb") as f:
        f.write(gzip.compress(b"time_ns,gpu,cu,wavefront,kind,vaddr,size\n"))
        f.write(member * (1 << 13))


def _wait_for(cond: Any, p: subprocess.Popen[str], what: str) -> None:
    """Wait until `cond()` while `p` runs (it is killed if the wait fails)."""
    deadline = time.monotonic() + 120
    while not cond():
        if p.poll() is not None:
            pytest.fail(f"{what}: the command ended first: {p.communicate()[1]}")
        if time.monotonic() > deadline:
            p.kill()
            p.communicate()
            pytest.fail(f"{what}: not within 120 s")
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_ctrl_c_or_sigterm_stops_a_trace_conversion_and_leaves_no_file(tmp_path: Path, signum: int) -> None:
    _big_csv_gz(tmp_path / "big.csv.gz")
    cmd = [sys.executable, "-m", "uvmsim", "trace", "convert", "big.csv.gz", "big.uvmt"]
    p = subprocess.Popen(cmd, cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    # The converter writes to a temporary file beside OUT and renames it at the end.
    _wait_for(lambda: list(tmp_path.glob(".big.uvmt.*.tmp")), p, "the conversion started")
    err, took = _stop(p, signum)
    assert p.returncode == 128 + signum, err
    assert err.rstrip().endswith(f"uvmsim: error: {_message(signum)}"), err
    assert took < 20, f"{took:.1f} s from the signal to exit"
    assert sorted(f.name for f in tmp_path.iterdir()) == ["big.csv.gz"]  # no OUT, no temporary file


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds the trace among the open files in /proc")
def test_ctrl_c_stops_trace_info(tmp_path: Path) -> None:
    trace = tmp_path / "big.csv.gz"
    _big_csv_gz(trace)
    p = subprocess.Popen(
        [sys.executable, "-m", "uvmsim", "trace", "info", trace.name],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )

    def reading() -> bool:  # the Rust reader has the trace open
        with contextlib.suppress(OSError):
            return any(os.readlink(fd) == str(trace) for fd in Path(f"/proc/{p.pid}/fd").iterdir())
        return False

    _wait_for(reading, p, "the trace is being read")
    err, took = _stop(p, signal.SIGINT)
    assert p.returncode == 130, err
    assert err.rstrip().endswith("uvmsim: error: interrupted"), err
    assert took < 20, f"{took:.1f} s from SIGINT to exit"


# 27 runs of 0.1-0.2 s each (~5 s in all on one process).
EXPERIMENT = "zheng-oversub-sweep"


@pytest.mark.parametrize("jobs", [1, 2])
def test_sigterm_stops_an_experiment_and_keeps_its_finished_runs(tmp_path: Path, jobs: int) -> None:
    cmd = [sys.executable, "-m", "uvmsim", "reproduce", EXPERIMENT, "--quick", "-o", "out", "-j", str(jobs)]
    p = subprocess.Popen(cmd, cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    runs = tmp_path / "out" / "runs"
    _wait_for(lambda: len(list(runs.glob("*/summary.json"))) >= 3, p, "three runs finished")
    err, took = _stop(p, signal.SIGTERM)
    assert took < 20, f"{took:.1f} s from SIGTERM to exit"
    assert p.returncode == 143, err
    # One line naming the signal and the command that goes on from the finished runs (after the progress lines
    # of the runs that finished).
    lines = [line for line in err.splitlines() if not line.startswith("  run ")]
    assert len(lines) == 1 and f"reproduce {EXPERIMENT} interrupted by SIGTERM; " in err, err
    resume = re.search(r"run `([^`]*)` to continue it", err)
    assert resume is not None, err
    args = shlex.split(resume.group(1))
    assert args[:2] == ["uvmsim", "reproduce"] and "--resume" in args, args
    finished = {f.parent.name: f.stat().st_mtime_ns for f in runs.glob("*/summary.json")}
    assert 3 <= len(finished) < 27, finished
    if jobs == 1:  # in this process, the run in progress is stopped before it writes anything
        assert sorted(d.name for d in runs.iterdir()) == sorted(finished)
        assert not [f for f in (tmp_path / "out").rglob("*") if f.name.endswith(".tmp")]
    # The printed command finishes the experiment without running the kept runs again.
    done = subprocess.run(
        [sys.executable, "-m", "uvmsim", *args[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert all((runs / n / "summary.json").stat().st_mtime_ns == t for n, t in finished.items())


# --- _signals without a long run: which signal stopped it, and what a deferred block delivers --------------


def test_signal_of_follows_the_chain_to_the_interrupt() -> None:
    from click import Abort

    from uvmsim._signals import signal_of

    abort = Abort()
    abort.__cause__ = KeyboardInterrupt(signal.SIGTERM)  # click's form of a SIGTERM in a command
    assert signal_of(abort) == signal.SIGTERM
    assert signal_of(KeyboardInterrupt()) == signal.SIGINT
    assert signal_of(KeyboardInterrupt("not a number")) == signal.SIGINT
    a, b = ValueError("a"), ValueError("b")
    a.__context__, b.__context__ = b, a  # a cycle ends the walk: Ctrl-C's number, not a hang
    assert signal_of(a) == signal.SIGINT


def test_stop_signals_deferred_delivers_the_first_held_signal_only() -> None:
    from uvmsim._signals import stop_signals_deferred

    got: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: got.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with stop_signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            assert got == []
        assert got == [signal.SIGTERM]  # one stop is enough
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def test_a_held_signal_with_the_default_action_still_ends_the_process(tmp_path: Path) -> None:
    code = (
        "import os, signal, time\n"
        "from uvmsim._signals import stop_signals_deferred\n"
        "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
        "with stop_signals_deferred():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(0.05)\n"
        "    print('finished', flush=True)\n"
        "print('after', flush=True)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (-signal.SIGTERM, "finished\n"), p.stderr
