"""The example scripts under examples/ run as their docstrings say."""

from __future__ import annotations

import re
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


def test_managed_remedies_marks_the_variants_an_iommu_system_does_not_run() -> None:
    # gh200-c2c: faults go to the page-request path, so the hint and driver-prefetch rows do not apply (the hints
    # would replace the preset's accessed-by with one nothing reads, and uvmsim refuses the prefetcher there).
    sets = ("workload.kind=stream", "workload.stream.elements=65536", "workload.stream.threads=8192")
    p = _remedies("--preset", "gh200-c2c", *(a for s in sets for a in ("--set", s)))
    assert p.returncode == 0, p.stderr
    head, *lines = p.stdout.splitlines()
    rows = {c[0]: c[1:] for c in (re.split(r"\s{2,}", r) for r in lines[:7])}
    na = [name for name, cells in rows.items() if cells == ["n/a"] * 6]
    assert na == [
        "cudaMemAdvise SetReadMostly (not accessed-by) [1]",
        "cudaMemAdvise SetPreferredLocation(CPU) (not accessed-by) [1]",
        "driver: prefetch threshold 1 [1]",
        "driver: no prefetching [1]",
    ], p.stdout
    assert lines[7:] == ['[1] translation.mode = "iommu": ' + lines[7].split(": ", 1)[1]], p.stdout
    # The rows that apply ran: the copy baseline and the time are there.
    ran = [name for name in rows if name not in na]
    assert ran == ["managed, as is", "cudaMemPrefetchAsync before the kernel", "data initialised on the GPU"]
    assert all(float(rows[name][0]) > 0 for name in ran)


def test_managed_remedies_refuses_a_multi_gpu_preset() -> None:
    p = _remedies("--preset", "li-4gpu-gmmu", "--set", "workload.blas_gemm.n=256")
    assert p.returncode == 2 and "multi-GPU model" in p.stderr, p.stderr


def test_the_remedies_table_in_docs_is_what_the_script_prints() -> None:
    # docs/experiments.md shows a run of the script and reads its numbers in prose; a model change that moves
    # them must refresh both (the table had gone stale for a week before this test).
    doc = (ROOT / "docs" / "experiments.md").read_text()
    m = re.search(r"^\$ python examples/managed_remedies\.py\n(.*?)^```", doc, re.M | re.S)
    assert m is not None, "docs/experiments.md no longer shows a run of examples/managed_remedies.py"
    p = _remedies()
    assert p.returncode == 0, p.stderr
    assert p.stdout == m.group(1), (
        "docs/experiments.md's managed_remedies table differs from what the script prints now: paste the output "
        "of `python examples/managed_remedies.py` there, and re-check the numbers the reading under it cites\n"
        + p.stdout
    )
