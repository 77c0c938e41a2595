"""Shared helpers: run the real command line in a subprocess (as a user would)."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

# The Ctrl-C tests send SIGINT to the runs they start. A shell starting pytest in the background
# without job control (`cmd &` in a script) makes it ignore SIGINT, and an ignored signal stays
# ignored in every child, so a Python child never installs its KeyboardInterrupt handler: those
# tests then fail however uvmsim behaves. A handler here is reset to the default at each exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(name: str) -> ModuleType:
    """scripts/NAME.py as a module: the scripts are not a package, and a test runs from outside their folder."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_python(cwd: Path, program: str, *, stdin: bool) -> subprocess.CompletedProcess[str]:
    """`program` run by a fresh interpreter in `cwd`, read from stdin (`python -`) or given as `python -c`:
    the two ways a program has no __main__ file, which spawned sweep workers would re-run."""
    argv, given = ([sys.executable, "-"], program) if stdin else ([sys.executable, "-c", program], None)
    return subprocess.run(argv, input=given, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


# Every workload kind, in the order `uvmsim workloads` lists them (the registry's order).
WORKLOADS = [
    "stride",
    "concurrency",
    "regular",
    "random",
    "stream",
    "gather",
    "vecadd-probe",
    "trace",
    "warp-trace",
    "accelsim",
    "pointer-chase",
    "strided",
    "tiled-gemm",
    "blas-gemm",
    "parboil-sgemm",
    "stencil2d",
    "stencil3d",
    "parboil-stencil",
    "hotspot",
    "pathfinder",
    "nw",
    "srad",
    "backprop",
    "spmv",
    "btree",
    "xsbench",
    "fault-burst",
    "minife",
    "comd",
    "miniamr",
    "bfs",
    "sad",
    "shootdown",
    "fir",
    "kmeans",
    "pagerank",
    "aes",
    "matrix-transpose",
    "bitonic-sort",
    "fft",
    "simple-convolution",
    "im2col",
    "conv2d",
    "ping-pong",
    "cufft",
    "tealeaf",
    "hpgmg",
    "cusparse",
]

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``cli("run", "--preset", ...)`` runs ``python -m uvmsim ...`` in ``tmp_path`` and captures its output."""

    def invoke(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
        return subprocess.run(
            [sys.executable, "-m", "uvmsim", *args],
            cwd=cwd or tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    return invoke
