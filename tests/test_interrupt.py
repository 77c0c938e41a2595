"""Ctrl-C stops a simulation or a trace recording promptly (the Rust core checks an interrupt
flag the binding sets when the interpreter sees SIGINT), and leaves no partial output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="sends SIGINT")

# Work that takes minutes uninterrupted on this project's 2-core machines.
LONG_RUN = ["--preset", "titan-v", "--set", "workload.kind=stream", "--set", "workload.stream.elements=4294967296"]


def _interrupt_when(cmd: list[str], ready: str, cwd: Path) -> tuple[int, float, str]:
    """Start `cmd`, send SIGINT once its stderr shows `ready`; return (exit code, seconds from
    the signal to the exit, stderr)."""
    p = subprocess.Popen(cmd, cwd=cwd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert p.stderr is not None
    seen = []
    deadline = time.monotonic() + 120
    for line in p.stderr:
        seen.append(line)
        if ready in line or time.monotonic() > deadline:
            break
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    rest = p.communicate(timeout=60)[1]
    return p.returncode, time.monotonic() - sent, "".join(seen) + rest


def test_ctrl_c_stops_a_run(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "uvmsim", "run", *LONG_RUN, "--set", "sim.progress_every_s=0.2", "-o", "out"]
    rc, took, err = _interrupt_when(cmd, "events/s", tmp_path)
    assert "events/s" in err, err  # the signal came while simulating
    assert rc == 130, err
    assert took < 20, f"{took:.1f} s from SIGINT to exit"
    assert not (tmp_path / "out").exists()


def test_ctrl_c_stops_a_recording_and_leaves_no_file(tmp_path: Path) -> None:
    # No progress line while recording: interrupt after the interpreter and the recording have started.
    cmd = [sys.executable, "-m", "uvmsim", "trace", "record", *LONG_RUN, "big.uvmt"]
    p = subprocess.Popen(cmd, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    part = tmp_path / "big.uvmt.part"
    deadline = time.monotonic() + 120
    while not part.exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    assert part.exists(), "the recording started"
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 130, err
    assert time.monotonic() - sent < 20
    assert not part.exists() and not (tmp_path / "big.uvmt").exists()


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
