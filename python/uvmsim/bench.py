"""Simulator throughput on fixed workloads (``uvmsim bench``).

Each workload stresses one path: TLB hits on a streaming kernel, page walks
on a divergent gather, IOMMU round trips on a dependent stride chain.
Throughput is simulated work per wall-clock second as the simulator measures
it (``sim.wall_s`` covers the simulation only, not config parsing).
"""

from __future__ import annotations

import resource
import sys
from dataclasses import asdict, dataclass
from typing import Any

import uvmsim


@dataclass(frozen=True)
class Workload:
    name: str
    preset: str
    set: dict[str, Any]
    quick_set: dict[str, Any]


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "stream-tlb-hits",
        "r9nano",
        {"workload.kind": "stream", "workload.stream.elements": 1 << 24, "translation.page_size": "2MiB"},
        {"workload.stream.elements": 1 << 20},
    ),
    Workload(
        "gather-walks",
        "kaveri-apu",
        {
            "workload.kind": "gather",
            "workload.gather.sorted": False,
            "translation.page_size": "4KiB",
            "workload.gather.lookups": 1 << 18,
            "workload.gather.threads": 1 << 14,
        },
        {"workload.gather.lookups": 1 << 15, "workload.gather.threads": 1 << 12},
    ),
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
)


@dataclass(frozen=True)
class BenchRow:
    name: str
    warp_mem_insts: int
    events: int
    wall_s: float
    warp_mem_insts_per_s: float
    events_per_s: float
    peak_rss_kib: int


def peak_rss_kib() -> int:
    """Peak resident set size of this process so far, in KiB."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss // 1024 if sys.platform == "darwin" else rss  # macOS reports bytes, Linux KiB


def run_one(w: Workload, quick: bool) -> BenchRow:
    r = uvmsim.run(preset=w.preset, set={**w.set, **(w.quick_set if quick else {})})
    m = r.metrics
    wall = float(m["sim.wall_s"])
    insts, events = int(m["gpu0.warp_mem_insts"]), int(m["sim.events"])
    per_s = (lambda x: x / wall) if wall > 0 else (lambda _x: float("nan"))
    return BenchRow(w.name, insts, events, wall, per_s(insts), per_s(events), peak_rss_kib())


def run_all(quick: bool = False) -> list[BenchRow]:
    """Run every bench workload in turn (``quick``: smaller inputs)."""
    return [run_one(w, quick) for w in WORKLOADS]


def as_dicts(rows: list[BenchRow]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]


def format_table(rows: list[BenchRow]) -> str:
    """A fixed-width text table; peak RSS is the whole process's peak up to that row."""
    head = ("workload", "warp mem insts", "events", "wall s", "warp mem insts/s", "events/s", "peak RSS KiB")
    body = [
        (
            r.name,
            f"{r.warp_mem_insts:,}",
            f"{r.events:,}",
            f"{r.wall_s:.3f}",
            f"{r.warp_mem_insts_per_s:,.0f}",
            f"{r.events_per_s:,.0f}",
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
