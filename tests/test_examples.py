"""The example scripts under examples/ run as their docstrings say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REMEDIES = ROOT / "examples" / "managed_remedies.py"


def _remedies(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REMEDIES), *args], capture_output=True, text=True, timeout=600)


def test_managed_remedies_simulates_every_variant() -> None:
    p = _remedies("--set", "workload.blas_gemm.n=256")
    assert p.returncode == 0, p.stderr
    head, *rows = p.stdout.splitlines()
    assert head.split()[0] == "variant" and len(rows) == 7
    cells = {r[:40].strip(): r[40:].split() for r in rows}
    faults = {name: int(c[3].replace(",", "")) for name, c in cells.items()}
    # cudaMemPrefetchAsync moves everything before the kernel: no far fault is left.
    assert faults["cudaMemPrefetchAsync before the kernel"] == 0
    # The preset's density prefetcher removes faults that demand paging takes.
    assert faults["driver: no prefetching"] > faults["managed, as is"] > 0
    # Data first touched on the GPU is zero-filled there: nothing crosses the link.
    assert float(cells["data initialised on the GPU"][4]) == 0.0


def test_managed_remedies_reports_bad_input_with_exit_code_2() -> None:
    p = _remedies("--set", "workload.blas_gemm.nn=256")
    assert p.returncode == 2 and "workload.blas_gemm.nn" in p.stderr, p.stderr
