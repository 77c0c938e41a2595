"""Simulator throughput on fixed workloads (``uvmsim bench``).

Each workload stresses one path: TLB hits on a streaming kernel, page walks
on a divergent gather, IOMMU round trips on a dependent stride chain, far
faults through the UVM driver and through the APU's page-request path,
eviction under oversubscription, the zheng suite's longest kernel model (its stencil, on the
polled handler), page migration between four GPUs (rates
summed over the GPUs), data-dependent table lookups (the coalescer), memory use on a 100 GiB footprint, and replay of a
recorded binary warp trace (the streaming trace reader in front of the same
GPU model).
Throughput is simulated work per wall-clock second as the simulator measures
it (``sim.wall_s`` covers the simulation only, not config parsing).
"""

from __future__ import annotations

import re
import resource
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import uvmsim


@dataclass(frozen=True)
class Workload:
    name: str
    preset: str
    set: dict[str, Any]
    quick_set: dict[str, Any]
    # Record the workload to a binary trace first (not timed), then replay it (workload.kind = "warp-trace").
    record: bool = False


# A float STREAM triad on 2 MiB pages: 99% L1 TLB hits.
_STREAM_F32 = {
    "workload.kind": "stream",
    "workload.stream.elements": 1 << 24,
    "workload.stream.element_bytes": 4,
    "translation.page_size": "2MiB",
}

WORKLOADS: tuple[Workload, ...] = (
    # TLB-hit-heavy, on the paged-memory seed's GPU and on a Titan V; the data side
    # is modelled in full (L1, L2, DRAM bandwidth) and is most of the cost, more so
    # with larger caches.
    Workload("stream-tlb-hits", "gtx480-zheng", _STREAM_F32, {"workload.stream.elements": 1 << 20}),
    Workload("stream-tlb-hits-titan-v", "titan-v", _STREAM_F32, {"workload.stream.elements": 1 << 20}),
    # Translation-heavy: unsorted binary-search gathers on 4 KiB pages; every
    # 64-lane probe needs up to 64 translations through the IOMMU.
    Workload(
        "gather-walks",
        "kaveri-apu",
        {
            "workload.kind": "gather",
            "workload.gather.sorted": False,
            "translation.page_size": "4KiB",
            # Explicit, so a change of the generator's defaults cannot change the benchmark.
            "workload.gather.table_entries": 1 << 24,
            "workload.gather.entry_bytes": 16,
            "workload.gather.lookups": 1 << 18,
            "workload.gather.threads": 1 << 14,
        },
        {"workload.gather.lookups": 1 << 15, "workload.gather.threads": 1 << 12},
    ),
    # Latency-bound: dependent IOMMU round trips, one event per warp stall.
    Workload(
        "stride-iommu",
        "kaveri-apu",
        {
            "workload.kind": "stride",
            "workload.stride.work_items": 64,
            "workload.stride.accesses": 10000,
            "workload.stride.stride_bytes": 4096,
        },
        {"workload.stride.accesses": 1000},
    ),
    # Fault-heavy: every page of managed memory faulted in through the UVM driver.
    Workload(
        "faults-regular",
        "titan-v",
        {"workload.kind": "regular", "workload.managed": True, "workload.regular.threads": 1 << 16},
        {"workload.regular.threads": 1 << 12},
    ),
    # Fault-heavy with duplicates: a library-style sgemm on managed memory (allen-transfer-share's and
    # allen-batch-size's kernel, at 1/16 of their smallest n): µTLBs re-raising faults across batches,
    # flushes and replays, and the retried translations behind them.
    Workload(
        "faults-sgemm",
        "titan-v",
        {"workload.kind": "blas-gemm", "workload.managed": True, "workload.blas_gemm.n": 1024},
        {"workload.blas_gemm.n": 256},
    ),
    # Fault-heavy, one event per fault: 512,000 concurrent first-touch faults through the APU's
    # page-request path (svm-apu's fault burst), each completion waking the warps that wait for it.
    Workload(
        "faults-apu",
        "kaveri-apu",
        {
            "workload.kind": "fault-burst",
            "workload.managed": True,
            "workload.fault_burst.faults": 512_000,
            "workload.threads_per_cta": 64,
        },
        {"workload.fault_burst.faults": 4096},
    ),
    # Fault-heavy under oversubscription: Zheng's polled far faults (replayable, 16 per CU) on a
    # 3-sweep stencil whose footprint is 4/3 of GPU memory, 4 KiB LRU eviction and locality prefetch:
    # sleeping warps, evictions and the element-wise generator (the zheng-oversub-sweep path).
    Workload(
        "oversub-stencil",
        "gtx480-zheng",
        {
            "workload.kind": "stencil3d",
            "workload.managed": True,
            "workload.stencil3d.nx": 256,
            "workload.stencil3d.ny": 256,
            "workload.stencil3d.nz": 32,
            "workload.stencil3d.iterations": 3,
            "workload.stencil3d.threads": 65536,
            "uvm.fault_mode": "replayable",
            "uvm.utlb_fault_limit": 16,
            "uvm.eviction.granularity": "page",
            "uvm.eviction.policy": "lru",
            "uvm.prefetch.policy": "locality",
            "uvm.oversubscription": 4 / 3,
        },
        {"workload.stencil3d.nx": 64, "workload.stencil3d.ny": 64, "workload.stencil3d.nz": 8},
    ),
    # The zheng suite's stencil (Parboil's block2D_hybrid_coarsen_x at its default dataset, 2 of the
    # suite's 100 sweeps) on the zheng experiments' settings: polled replayable faults, 16 per CU,
    # locality prefetch. At 100 sweeps it is the longest run of every zheng experiment.
    Workload(
        "zheng-stencil",
        "gtx480-zheng",
        {
            "workload.kind": "parboil-stencil",
            "workload.managed": True,
            "workload.parboil_stencil.nx": 512,
            "workload.parboil_stencil.ny": 512,
            "workload.parboil_stencil.nz": 64,
            "workload.parboil_stencil.iterations": 2,
            "uvm.fault_mode": "replayable",
            "uvm.utlb_fault_limit": 16,
            "uvm.prefetch.policy": "locality",
            "uvm.prefetch.window_pages": 128,
        },
        {"workload.parboil_stencil.nx": 64, "workload.parboil_stencil.ny": 64, "workload.parboil_stencil.nz": 8},
    ),
    # Fault-heavy under deep oversubscription on the polled handler: nw (n = 1024, an 8 MiB
    # footprint) in 4 MiB of GPU memory, 2 MiB chunk eviction; thousands of faults wait in the buffer
    # and on the link at once (a stress run found this path quadratic in them, session 41). The stress
    # run's settings: every µTLB miss writes its own fault (no µTLB merging), so the buffer is long.
    Workload(
        "oversub-polled-nw",
        "titan-v",
        {
            "workload.kind": "nw",
            "workload.nw.n": 1024,
            "workload.managed": True,
            "uvm.cost_model": "polled",
            "uvm.utlb_merge_faults": False,
            "uvm.gpu_memory_bytes": "4MiB",
        },
        {"workload.nw.n": 256},
    ),
    # Fault-heavy under oversubscription on the NVIDIA driver path: a 4 GiB managed stream on a
    # Titan V whose GPU memory holds 1/8 of it, so every batch evicts 2 MiB chunks (issue 4's 100 GiB
    # memory run, at 1/25 the size): batches, evictions, shootdowns and the warps that sleep across them.
    Workload(
        "oversub-stream-driver",
        "titan-v",
        {
            "workload.kind": "regular",
            "workload.managed": True,
            "workload.regular.threads": 1 << 20,
            "workload.threads_per_cta": 1024,
            "uvm.oversubscription": 8,
        },
        {"workload.regular.threads": 1 << 15},
    ),
    # Trace replay: the float STREAM triad recorded to a .uvmt, replayed through the GPU model
    # (docs/performance.md has the command for a 1-billion-access trace).
    Workload("warp-trace-replay", "titan-v", _STREAM_F32, {"workload.stream.elements": 1 << 20}, record=True),
    # The same replay on stream-tlb-hits' preset: what replay costs over generating that stream.
    Workload(
        "warp-trace-replay-tlb-hits", "gtx480-zheng", _STREAM_F32, {"workload.stream.elements": 1 << 20}, record=True
    ),
    # Multi-GPU: on-touch PageRank on four GMMU GPUs (li-transfw's baseline policy): far faults
    # answered page by page, page-to-page migrations, broadcast invalidations walked by every GPU,
    # and warps woken per page; the rates count the warp memory instructions of all four GPUs.
    Workload(
        "multi-gpu-pagerank",
        "li-4gpu-gmmu",
        {"workload.kind": "pagerank", "workload.pagerank.nodes": 16384, "multi.migration": "on-touch"},
        {"workload.pagerank.nodes": 2048},
    ),
    # Table lookups: AES's data-dependent S-box reads (64 lanes on 2-4 lines of a 256-byte table) on
    # four ATS GPUs, li-least-tlb's application at 1/8 of its size: the coalescer's explicit lanes.
    Workload(
        "multi-gpu-aes-lookups",
        "li-4gpu-ats",
        {"workload.kind": "aes", "workload.aes.length": 4 << 20, "multi.oracle.no_migration_latency": True},
        {"workload.aes.length": 256 << 10},
    ),
    # Footprint: lookups spread over a 100 GiB table; memory must not grow with it.
    Workload(
        "footprint-100gib",
        "titan-v",
        {
            "workload.kind": "gather",
            "workload.gather.table_entries": 100 << 26,
            "workload.gather.entry_bytes": 16,
            "workload.gather.lookups": 1 << 18,
            "workload.gather.threads": 1 << 14,
            "translation.page_size": "2MiB",
        },
        {"workload.gather.lookups": 1 << 14, "workload.gather.threads": 1 << 12},
    ),
)


@dataclass(frozen=True)
class BenchRow:
    name: str
    warp_mem_insts: int
    events: int
    #: The median of the runs' simulation times (one run unless ``repeat``); the rates are over it.
    wall_s: float
    warp_mem_insts_per_s: float
    events_per_s: float
    translations_per_s: float
    peak_rss_kib: int
    #: Every run's ``sim.wall_s``, in the order they ran (the spread on a shared machine).
    wall_s_runs: tuple[float, ...] = ()


def peak_rss_kib() -> int:
    """Peak resident set size of this process so far, in KiB."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss // 1024 if sys.platform == "darwin" else rss  # macOS reports bytes, Linux KiB


def _all_gpus(m: dict[str, Any], name: str) -> int:
    """Metric `gpuN.name` summed over the GPUs of the run (one unless a multi-GPU preset)."""
    pattern = re.compile(rf"gpu\d+\.{re.escape(name)}")
    return sum(int(v) for k, v in m.items() if pattern.fullmatch(k))


def run_one(w: Workload, quick: bool, repeat: int = 1) -> BenchRow:
    """Run ``w`` ``repeat`` times (the trace, for a replay, recorded once) and report the median run."""
    sets = {**w.set, **(w.quick_set if quick else {})}
    with tempfile.TemporaryDirectory(prefix="uvmsim-bench-") as d:
        if w.record:
            path = f"{d}/trace.uvmt"
            uvmsim.trace_record(path, preset=w.preset, set=sets)
            sets = {
                "workload.kind": "warp-trace",
                "workload.warp_trace.path": path,
                **{k: v for k, v in sets.items() if not k.startswith("workload.")},
            }
        runs = [uvmsim.run(preset=w.preset, set=sets).metrics for _ in range(max(1, repeat))]
    walls = tuple(float(m["sim.wall_s"]) for m in runs)
    # The median run (the lower middle one of an even count): every run simulates the same work.
    m = sorted(runs, key=lambda x: float(x["sim.wall_s"]))[(len(runs) - 1) // 2]
    wall = float(m["sim.wall_s"])
    insts, events = _all_gpus(m, "warp_mem_insts"), int(m["sim.events"])
    per_s = (lambda x: x / wall) if wall > 0 else (lambda _x: float("nan"))
    translations = per_s(_all_gpus(m, "translations"))
    return BenchRow(w.name, insts, events, wall, per_s(insts), per_s(events), translations, peak_rss_kib(), walls)


def run_all(quick: bool = False, repeat: int = 1, only: Sequence[str] = ()) -> list[BenchRow]:
    """Run the bench workloads in turn (``quick``: smaller inputs; ``repeat``: runs of each, the median
    reported; ``only``: these workloads, by name, in the bench's order)."""
    unknown = sorted(set(only) - {w.name for w in WORKLOADS})
    if unknown:
        raise ValueError(f"unknown bench workload `{unknown[0]}`")
    return [run_one(w, quick, repeat) for w in WORKLOADS if not only or w.name in only]


def as_dicts(rows: list[BenchRow]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]


def format_table(rows: list[BenchRow]) -> str:
    """A fixed-width text table; peak RSS is the whole process's peak up to that row. With repeated runs
    ``wall s`` is their median and a column gives the fastest and slowest."""
    spread = any(len(r.wall_s_runs) > 1 for r in rows)
    head = (
        "workload",
        "warp mem insts",
        "events",
        "wall s",
        *(["min-max s"] if spread else []),
        "warp mem insts/s",
        "events/s",
        "translations/s",
        "peak RSS KiB",
    )
    body = [
        (
            r.name,
            f"{r.warp_mem_insts:,}",
            f"{r.events:,}",
            f"{r.wall_s:.3f}",
            *([f"{min(r.wall_s_runs or (r.wall_s,)):.3f}-{max(r.wall_s_runs or (r.wall_s,)):.3f}"] if spread else []),
            f"{r.warp_mem_insts_per_s:,.0f}",
            f"{r.events_per_s:,.0f}",
            f"{r.translations_per_s:,.0f}",
            f"{r.peak_rss_kib:,}",
        )
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in (head, *body)
    ]
    return "\n".join(lines)
