"""The example scripts under examples/ run as their docstrings say."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import uvmsim
import uvmsim.plot
from test_docs import parse_command
from uvmsim import _core, sweep

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


def test_managed_remedies_on_an_apu_shows_page_requests_and_a_prefetch_that_moves_nothing() -> None:
    # mi300a-apu: the page-request path's requests, mapped pages and time replace the driver's batches, faults and
    # batch time, and a prefetch to a GPU that shares the host's memory changes nothing (iommu.shared_memory): the
    # same row.
    sets = ("workload.blas_gemm.n=256",)
    p = _remedies("--preset", "mi300a-apu", *(a for s in sets for a in ("--set", s)))
    assert p.returncode == 0, p.stderr
    head, *lines = p.stdout.splitlines()
    assert re.split(r"\s{2,}", head) == ["variant", "time ms", "x copy", "requests", "mapped", "MiB in", "PPR ms"]
    rows = {c[0]: c[1:] for c in (re.split(r"\s{2,}", r) for r in lines[:7])}
    as_is = rows["managed, as is"]
    assert int(as_is[2].replace(",", "")) > 0 and int(as_is[3].replace(",", "")) > 0, p.stdout
    # The page-request path was busy for part of the run, not none of it and not more than all of it.
    assert 0 < float(as_is[5]) < float(as_is[0]), p.stdout
    assert rows["cudaMemPrefetchAsync before the kernel"] == as_is, p.stdout


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


# --- examples/sweeps -------------------------------------------------------------------------------------------

SWEEPS = ROOT / "examples" / "sweeps"


def _example_commands(spec: Path) -> list[list[str]]:
    """The `uvmsim ...` commands of a spec's header comment (`#   uvmsim sweep ...`), without their comments."""
    lines = [ln[1:].split("  # ")[0].strip() for ln in spec.read_text().splitlines() if ln.startswith("#   uvmsim ")]
    return [shlex.split(ln)[1:] for ln in lines]


@pytest.mark.parametrize("name", sorted(p.name for p in SWEEPS.glob("*.toml")))
def test_an_example_sweep_is_what_its_header_says(name: str) -> None:
    # Each example's header gives its run count and the commands to run and plot it; a renamed key, a value
    # the config refuses or a plot axis that is not one of the spec's must fail here, not for the user.
    spec_path = SWEEPS / name
    spec = sweep.load_spec(spec_path)
    count = re.search(r"= ([\d,]+) runs", spec_path.read_text())
    assert count is not None and int(count.group(1).replace(",", "")) == len(spec.runs), name
    for r in spec.runs:
        _core.resolve(spec.sources(), spec.base_overrides() + uvmsim.overrides(r.overrides))
    cmds = _example_commands(spec_path)
    assert cmds and cmds[0][:2] == ["sweep", f"examples/sweeps/{name}"], cmds
    for args in cmds:
        cmd, ctx = parse_command(args)
        if cmd == "plot":
            kind = ctx.params["kind"]
            assert kind in uvmsim.plot.KINDS, args
            axis = ctx.params.get("axis")
            assert axis is None or axis in spec.axes, args


def _runs(spec: sweep.SweepSpec, **where: object) -> dict[str, float | int]:
    """Simulate the one run of ``spec`` whose overrides include ``where`` (keys with `__` for `.`), as the
    sweep would, and return its metrics."""
    want = {k.replace("__", "."): v for k, v in where.items()}
    (run,) = [r for r in spec.runs if all(r.overrides.get(k) == v for k, v in want.items())]
    row = sweep.execute(spec.sources(), spec.base_overrides(), run)
    assert row["status"] == "ok", row["error"]
    return row


def test_tlb_reach_example_shows_large_pages_beating_a_larger_l2_tlb() -> None:
    # docs/experiments.md: unsorted keys, 4 KiB pages, 512 entries against 2 MiB pages; and 32,768 entries.
    spec = sweep.load_spec(SWEEPS / "tlb-reach.toml")
    small = _runs(spec, gpu__l2tlb__entries=512, translation__page_size="4KiB", workload__gather__sorted=False)
    big_tlb = _runs(spec, gpu__l2tlb__entries=32768, translation__page_size="4KiB", workload__gather__sorted=False)
    huge = _runs(spec, gpu__l2tlb__entries=512, translation__page_size="2MiB", workload__gather__sorted=False)
    assert small["time.kernel_ns"] > 2 * big_tlb["time.kernel_ns"] > 4 * huge["time.kernel_ns"]
    # 2 MiB pages: the 256 MiB table is 128 pages, so the L2 TLB misses little more than once per page.
    assert huge["gpu0.l2tlb.misses"] < 2 * 128 < small["gpu0.l2tlb.misses"] / 1000


def test_oversubscription_example_shows_the_cliff_below_the_footprint() -> None:
    spec = sweep.load_spec(SWEEPS / "oversubscription.toml")
    fits = _runs(spec, uvm__gpu_memory_bytes="48MiB", uvm__prefetch__policy="density")
    short = _runs(spec, uvm__gpu_memory_bytes="40MiB", uvm__prefetch__policy="density")
    assert fits["uvm.evictions"] == 0 < short["uvm.evictions"]
    # Every launch reads the evicted blocks again: 4 launches x 48 MiB cross the link, not 48 MiB once.
    assert fits["uvm.bytes_h2d"] == 48 << 20 and short["uvm.bytes_h2d"] == 4 * (48 << 20)
    assert short["time.kernel_ns"] > 3 * fits["time.kernel_ns"]


def test_multi_gpu_placement_example_ranks_pagerank_policies() -> None:
    spec = sweep.load_spec(SWEEPS / "multi-gpu-placement.toml")
    t = {
        m: _runs(spec, workload__kind="pagerank", multi__migration=m)
        for m in ("on-touch", "first-touch", "read-replication")
    }
    assert (
        t["read-replication"]["time.kernel_ns"] < t["on-touch"]["time.kernel_ns"] < t["first-touch"]["time.kernel_ns"]
    )
    assert t["first-touch"]["multi.migrations.p2p"] == 0 < t["first-touch"]["multi.remote_accesses"]
    assert t["on-touch"]["multi.remote_accesses"] == 0 < t["on-touch"]["multi.migrations.p2p"]


def test_apu_walkers_example_shows_walker_queueing_and_the_pwc() -> None:
    spec = sweep.load_spec(SWEEPS / "apu-walkers.toml")
    one = _runs(spec, iommu__walker__threads=1, iommu__walker__pwc_entries=0)
    one_pwc = _runs(spec, iommu__walker__threads=1, iommu__walker__pwc_entries=32)
    many = _runs(spec, iommu__walker__threads=64, iommu__walker__pwc_entries=0)
    assert one["iommu.walker.utilization"] > 0.99 > 0.6 > many["iommu.walker.utilization"]
    assert one["time.kernel_ns"] > 20 * many["time.kernel_ns"]
    # The page-walk cache serves upper levels: fewer PTE reads per walk, so one walker finishes sooner.
    assert one["iommu.walker.pte_reads_per_walk"] == 4 > 2 > one_pwc["iommu.walker.pte_reads_per_walk"]
    assert one_pwc["time.kernel_ns"] < 0.6 * one["time.kernel_ns"]
