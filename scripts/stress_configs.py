"""Random-configuration stress run: many small simulations with random option combinations.

Each run picks a preset, a workload at a small input and a few options (fault mode, cost
model, replay and prefetch policies, eviction, hints, page size, GPU count, migration policy,
the multi-GPU proposals), runs the `run` example and classifies the outcome: finished (0), bad
input (2, the message is kept), or anything else: a deadlock or model error (1), a panic
(101), or no end within the time limit. A finished run's metrics are also checked against the
accounting identities docs/metrics.md states (`check_invariants`); one that breaks any is
`invariant`, its violations kept in its row. All but finished and bad input are bugs to look at.
Results go to a JSON-lines file, one object per run, so an interrupted stress run keeps what it did.

    cargo build --release --example run
    python scripts/stress_configs.py target/release/examples/run -n 2000 --seed 1 -o stress.jsonl

Found so far (docs/multi-gpu.md, 2026-11-29): multi-GPU warps slept for answers that had
already come (every multi-GPU blas-gemm deadlocked), page-crossing lanes livelocked
between GPUs (sad with round-robin CTAs), and, at --scale 4, ATS-mode warps waiting for page
pairs two GPUs shared livelocked (CoMD on mi300a-apu). Session 65 added the 22 switches introduced
since session 40 (CTA dispatch and barriers, TLB fill and MSHR blocking, the polled model's MSHR reading,
the transfer set's options, overlapped write-backs, records, the multi-GPU oracles, the workloads' copies
and hints): 1,500 runs at scale 1 (seed 6501) and 800 at scale 4 (seed 6502) all finished or were
refused with exit code 2. Invariant checks (2026-12-06): 300 runs (seed 7201), 1,500 (seed 7202)
and 400 at scale 4 (seed 7203) broke no identity once two were narrowed to where they hold (an L2 TLB
configured away has all-0 metrics; resident pages come from the APU's page requests in IOMMU mode, and
from cudaMemPrefetchAsync, which docs/metrics.md's "without eviction" identity had left out). A targeted
sweep beside them (hints x eviction granularity and write-back x cudaMemPrefetchAsync) broke no identity
but found a livelock (exit 1): with uvm.eviction.granularity = "page", a VA block whose faulted
pages in one batch outnumbered GPU memory was deferred whole at every batch (titan-v ping-pong, 64 pages,
uvm.oversubscription = 2: 32 pages of memory, 0 ever resident); fixed the same day (make_room services
the block's first pages, tests/policies.rs a_block_larger_than_gpu_memory_is_serviced_in_parts).
Session 80 (2026-12-07, commit 031e513): 1,500 runs at scale 1 (seed 8001) gave 1,478 finished and 22 bad
input; 800 at scale 4 (seed 8002), beside three builds (load ~5), 780 finished, 9 bad input and 11 past
the 40 s limit, each of which finished alone in 9-28 s (CoMD at 32^3 cells on five presets, the library
sgemm at n = 2048, spmv on four GPUs, a two-application trace replay). No invariant broken, no panic, no
deadlock.
Session 82 (2026-12-07, the model code of 0d87801, unchanged since 031e513): 1,500 runs at scale 1 (seed
8201) gave 1,472 finished and 28 bad input, 800 at scale 4 (seed 8202) 786 and 14, on the release build;
1,500 at scale 1 (seed 8203) on a debug-assertion build (`CARGO_PROFILE_DEV_OPT_LEVEL=2`) 1,478 and 22.
The refusals: an Accel-Sim trace on a 64-lane preset, or a traced CU the preset lacks (and one managed
Accel-Sim trace in the multi-GPU model). No invariant broken, no panic, no assertion, no timeout.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import re
import subprocess
import time
import tomllib
from pathlib import Path

PRESETS = (
    "gtx480-zheng",
    "titan-v",
    "a100-pcie4",
    "h100-pcie5",
    "kaveri-apu",
    "gh200-c2c",
    "mi300a-apu",
    "v100-nvlink2-p9",
    "r9nano",
    "mgpusim-r9nano",
    "li-4gpu-ats",
    "li-4gpu-gmmu",
)

# Small inputs: a run takes well under a second unless something is wrong.
WORKLOADS: dict[str, list[str]] = {
    "regular": ["workload.regular.threads=4096"],
    "random": ["workload.random.threads=4096"],
    "stream": ["workload.stream.elements=262144"],
    "gather": ["workload.gather.threads=1024", "workload.gather.lookups=2048", "workload.gather.table_entries=1048576"],
    "vecadd-probe": [],
    "pointer-chase": [
        "workload.pointer_chase.nodes=16384",
        "workload.pointer_chase.threads=256",
        "workload.pointer_chase.hops=8",
    ],
    "strided": ["workload.strided.threads=4096", "workload.strided.stride_elements=1024", "workload.strided.repeats=2"],
    "tiled-gemm": ["workload.tiled_gemm.n=256"],
    "blas-gemm": ["workload.blas_gemm.n=512"],
    "parboil-sgemm": ["workload.parboil_sgemm.m=256", "workload.parboil_sgemm.n=160", "workload.parboil_sgemm.k=96"],
    "stencil2d": ["workload.stencil2d.nx=256", "workload.stencil2d.ny=256", "workload.stencil2d.iterations=2"],
    "stencil3d": [
        "workload.stencil3d.nx=64",
        "workload.stencil3d.ny=64",
        "workload.stencil3d.nz=16",
        "workload.stencil3d.iterations=2",
    ],
    "parboil-stencil": [
        "workload.parboil_stencil.nx=64",
        "workload.parboil_stencil.ny=64",
        "workload.parboil_stencil.nz=16",
        "workload.parboil_stencil.iterations=2",
    ],
    "xsbench": ["workload.xsbench.gridpoints=300", "workload.xsbench.lookups=2048", "workload.xsbench.threads=1024"],
    "nw": ["workload.nw.n=512"],
    "hotspot": ["workload.hotspot.rows=256", "workload.hotspot.cols=256", "workload.hotspot.iterations=2"],
    "backprop": ["workload.backprop.input_units=16384"],
    "spmv": ["workload.spmv.rows=16384"],
    "btree": ["workload.btree.keys=65536", "workload.btree.queries=2048"],
    "fault-burst": ["workload.fault_burst.faults=512"],
    "ping-pong": ["workload.ping_pong.pages=64", "workload.ping_pong.iterations=20"],
    "kmeans": ["workload.kmeans.points=8192", "workload.kmeans.iterations=2"],
    "pagerank": ["workload.pagerank.nodes=4096", "workload.pagerank.iterations=2"],
    "matrix-transpose": ["workload.matrix_transpose.width=256"],
    "fir": ["workload.fir.length=65536"],
    "bfs": ["workload.bfs.scale=12"],
    "sad": [],
    "srad": ["workload.srad.rows=256", "workload.srad.cols=256", "workload.srad.iterations=2"],
    "shootdown": [],
    "fft": ["workload.fft.points=65536"],
    "aes": ["workload.aes.length=65536"],
    "minife": [
        "workload.minife.nx=16",
        "workload.minife.ny=16",
        "workload.minife.nz=16",
        "workload.minife.iterations=2",
    ],
    "comd": ["workload.comd.cells_x=8", "workload.comd.cells_y=8", "workload.comd.cells_z=8"],
    "stride": ["workload.stride.accesses=2000"],
    "concurrency": ["workload.concurrency.accesses=200"],
    "pathfinder": ["workload.pathfinder.rows=20", "workload.pathfinder.cols=8192"],
    "miniamr": [],
    "bitonic-sort": [],
    "simple-convolution": ["workload.simple_convolution.width=126", "workload.simple_convolution.height=126"],
    "im2col": [],
    "conv2d": [],
    "cufft": ["workload.cufft.n1=128", "workload.cufft.n2=128"],
    "tealeaf": ["workload.tealeaf.nx=128", "workload.tealeaf.ny=128", "workload.tealeaf.iterations=2"],
    "hpgmg": ["workload.hpgmg.n=32", "workload.hpgmg.cycles=1"],
    "cusparse": ["workload.cusparse.n=1024", "workload.cusparse.nnz_per_row=64"],
}

OPTIONS: dict[str, list[str]] = {
    "workload.managed": ["true", "false", "true", "true"],
    "uvm.fault_mode": ['"replayable"', '"blocking"'],
    "uvm.cost_model": ['"driver"', '"fixed-latency"', '"polled"'],
    "uvm.replay_policy": ['"batch-flush"', '"batch"', '"block"', '"once"'],
    "uvm.prefetch.policy": [
        '"none"',
        '"density"',
        '"random"',
        '"sequential"',
        '"locality"',
        '"oracle"',
        '"sequential-local"',
        '"random-4k"',
    ],
    "uvm.prefetch.when_full": ['"keep"', '"stop"'],
    "uvm.eviction.policy": ['"driver"', '"lru"', '"random"', '"lfu"'],
    "uvm.eviction.granularity": ['"block"', '"page"'],
    "uvm.eviction.write_back": ['"all"', '"dirty"'],
    "uvm.oversubscription": ["0", "1.5", "2", "4"],
    "translation.page_size": ['"4KiB"', '"64KiB"', '"2MiB"'],
    "translation.managed_large_ptes": ["true", "false"],
    "uvm.advise.policy": ['"none"', '"read-mostly"', '"preferred-location-host"', '"accessed-by"'],
    "uvm.preunmap.granularity": ['"va-block"', '"allocation"', '"space"'],
    "uvm.preunmap.mode": ['"sync"', '"async"'],
    "uvm.thrashing.enable": ["true", "false"],
    "uvm.utlb_merge_faults": ["true", "false"],
    "uvm.stall_warp_on_fault": ["true", "false"],
    "uvm.async_copies": ["true", "false"],
    "uvm.access_counters.migrate": ["true", "false"],
    "gpu.scheduler": ['"gto"', '"time-order"'],
    "uvm.baselines": ["true", "false"],
    "uvm.land_per_copy": ["true", "false"],
    "uvm.fetch_after_replay_wait": ["true", "false"],
    "multi.migration": ['"on-touch"', '"first-touch"', '"access-counter"', '"read-replication"'],
    "multi.gpus": ["1", "2", "4", "8", "16"],
    "multi.cta_placement": ['"greedy"', '"round-robin"'],
    "multi.idyll.directory": ["true", "false"],
    "multi.idyll.lazy": ["true", "false"],
    "multi.transfw.prt": ["true", "false"],
    "multi.transfw.forwarding": ["true", "false"],
    "multi.least_tlb.enabled": ["true", "false"],
    # Added in session 27: limits, fabrics and oracles the first runs left at their defaults.
    "multi.least_tlb.spill": ["true", "false"],
    "multi.model_one_gpu": ["true", "false"],
    "multi.shootdown_stalls_gpu": ["true", "false"],
    "multi.peer_topology": ['"switch"', '"direct"'],
    "multi.remote_reads_cached": ["true", "false"],
    "multi.apps": ['["fir", "matrix-transpose"]', '["pagerank", "kmeans", "aes"]', '["sad", "sad"]'],
    "multi.apps_resident": ["true", "false"],
    "multi.oracle.infinite_walkers": ["true", "false"],
    "multi.oracle.zero_latency_invalidation": ["true", "false"],
    "multi.oracle.no_migration_latency": ["true", "false"],
    # Added in session 49: the driver's far-fault batches (0 = none, 1 = one fault at a time).
    "multi.fault_batch_size": ["0", "1", "16", "256"],
    # Added in session 51: the driver's access-counter notification batches.
    "multi.counter_batch_size": ["0", "1", "256"],
    # Added in session 51: host DMA into a GPU over its switch port (shared with its peer traffic).
    "multi.host_dma_uses_peer_port": ["true", "false"],
    # Added in session 50: buffers split over the GPUs before the kernels (refused with multi.apps).
    "multi.initial_placement": ['"host"', '"distributed"'],
    "translation.mode": ['"gmmu"', '"iommu"'],
    "iommu.ats_prefetch_pages": ["1", "16"],
    "iommu.ppr.max_outstanding": ["1", "32"],
    "iommu.walker.pwc_organization": ['"per-level"', '"unified"'],
    "uvm.batch_size": ["32", "256", "1024"],
    "uvm.utlb_fault_limit": ["1", "8", "56"],
    "uvm.fault_buffer_entries": ["64", "4096"],
    "uvm.max_batches_per_service": ["1", "20"],
    "uvm.merge_far_faults": ["true", "false"],
    "uvm.merge_prefetched_faults": ["true", "false"],
    "uvm.sm_fault_interval_ns": ["0", "500"],
    "uvm.prefetch.threshold": ["1", "51", "100"],
    "uvm.eviction.lru_recency": ['"access"', '"walk"'],
    "uvm.thrashing.pin": ["1", "300"],
    "link.bandwidth_model": ['"constant"', '"atan"'],
    "link.copy_engines": ["1", "2"],
    "gpu.vmem.backpressure": ["true", "false"],
    # Added in session 29: the L1 cache's intake limits of the back-pressured path.
    "gpu.vmem.buffer_entries": ["1", "104"],
    "gpu.vmem.dir_entries": ["1", "32"],
    "gpu.vmem.l1_transactions": ["0", "2", "128"],
    "gpu.max_warps_per_sm": ["4", "48"],
    # Added in session 28: GPU memory limits without uvm.oversubscription (which needs the GMMU on
    # one GPU), so iommu-mode runs and access-counter migrations meet a full memory too.
    "uvm.gpu_memory_bytes": ['"0B"', '"4MiB"', '"64MiB"'],
    # Added in session 65: the switches added since session 40, which no stress run had drawn yet.
    "gpu.cta_dispatch": ['"round-robin"', '"fill"'],
    "gpu.cta_barriers": ["true", "false"],
    "gpu.l1tlb.allocate": ['"on-miss"', '"on-fill"'],
    "gpu.l1tlb.full_mshrs_block": ["true", "false"],
    "gpu.l2tlb.replacement": ['"lru"', '"fifo"'],
    "gpu.l2tlb.allocate": ['"on-miss"', '"on-fill"'],
    "gmmu.walker.pte_from_dram": ["true", "false"],
    "uvm.merged_faults_take_mshr": ["true", "false"],
    "uvm.prefetch.gpu_preferred": ["true", "false"],
    "uvm.prefetch.full_link_room": ["true", "false"],
    "uvm.prefetch.demand_waits_for_set": ["true", "false"],
    "uvm.eviction.overlap_write_back": ["true", "false"],
    "uvm.records": ["true", "false"],
    "uvm.fault_records": ["true", "false"],
    "multi.host_uplink_shared": ["true", "false"],
    "multi.oracle.infinite_iommu_tlb": ["true", "false"],
    "multi.oracle.infinite_pwc": ["true", "false"],
    "multi.least_tlb.tracker": ["true", "false"],
    "workload.memcpy_inputs": ["true", "false"],
    "workload.memcpy_outputs": ["true", "false"],
    "workload.host_init": ["true", "false"],
    "workload.prefetch_inputs": ["true", "false"],
}


# Counts that set how long a workload runs, not how much memory it touches, and log2 sizes: not scaled.
UNSCALED = ("iterations", "repeats", "hops", "cycles", "pyramid_height", "mask", "kernel", "nnz_per_row", "scale")


# Trace replays (the random options never reached them: a multi-GPU warp-trace replay and managed replays
# failed until session 30): the repository's Accel-Sim sample (converted to a warp trace and replayed), and
# an MGPUSim trace when shared/traces sits beside the repository.
_ROOT = Path(__file__).resolve().parent.parent
WORKLOADS["accelsim"] = [f'workload.accelsim.path="{_ROOT / "tests" / "data" / "accelsim" / "kernelslist.g"}"']
_MGPUSIM_TRACE = _ROOT.parent / "shared" / "traces" / "mgpusim" / "fir.csv.gz"
if _MGPUSIM_TRACE.exists():
    WORKLOADS["trace"] = [f'workload.trace.path="{_MGPUSIM_TRACE}"']


# The keys a resolver's refusal names: the key refused, and the `--set` one it conflicts with.
REFUSED_KEY = re.compile(r"--set: key `([\w.]+)`|in conflict with `([\w.]+)` from --set")


def scaled(setting: str, scale: int) -> str:
    """`key=N` with a size N multiplied by `scale` (each dimension of a grid: 2-D grids grow scale^2)."""
    key, _, value = setting.partition("=")
    if scale == 1 or not value.isdigit() or key.rsplit(".", 1)[-1] in UNSCALED:
        return setting
    return f"{key}={int(value) * scale}"


def one(rng: random.Random, presets_dir: Path, scale: int = 1) -> tuple[str, list[str]]:
    """A random run: the preset file and the `key=value` overrides."""
    preset, kind = rng.choice(PRESETS), rng.choice(sorted(WORKLOADS))
    sets = [f"workload.kind={kind}", *(scaled(s, scale) for s in WORKLOADS[kind])]
    for key in rng.sample(sorted(OPTIONS), rng.randint(2, 9)):
        sets.append(f"{key}={rng.choice(OPTIONS[key])}")
    watchdog = _watchdog(presets_dir / f"{preset}.toml", sets)
    if watchdog:
        sets.append(watchdog)
    return str(presets_dir / f"{preset}.toml"), sets


def _watchdog(preset: Path, sets: list[str]) -> str | None:
    """The watchdog the run's model reads, tightened (the other one is refused there): the driver's
    batches on one GPU in GMMU mode, far-fault answers in the multi-GPU model, none on one APU."""
    with open(preset, "rb") as f:
        base = tomllib.load(f)
    over = dict(s.partition("=")[::2] for s in sets)
    gpus = int(over.get("multi.gpus", base.get("multi", {}).get("gpus", 1)))
    one_gpu_model = over.get("multi.model_one_gpu", str(base.get("multi", {}).get("model_one_gpu", False)).lower())
    mode = over.get("translation.mode", f'"{base.get("translation", {}).get("mode", "gmmu")}"')
    if gpus > 1 or one_gpu_model == "true":
        return "sim.watchdog_answers=200000"
    return None if mode == '"iommu"' else "sim.watchdog_batches=20000"


# Accounting identities between the summary metrics that docs/metrics.md states (the line cited with each:
# docs/metrics.md:N), checked on every finished run. Counts print exactly; times and ratios are floats, summed
# in picoseconds or divided in the simulator, so they are compared with a small tolerance.
REL_TOL = 1e-9
ABS_TOL = 1e-6
# Metric families of lookups (docs/metrics.md:41-48: a lookup is exactly one of a hit, an MSHR hit or a miss).
LOOKUP_FAMILIES = re.compile(
    r"^(gpu\d+\.l1tlb|gpu\d+\.l2tlb|gpu\d+\.l1d|gpu\d+\.l2d|iommu\.tlb|host_mmu\.tlb)\.accesses$"
)
WALKERS = re.compile(r"^(gpu\d+\.walker|iommu\.walker|host_mmu\.walker)\.walks$")
GPU_PREFIX = re.compile(r"^(gpu\d+)\.insts$")


def parse_metrics(stdout: str) -> dict[str, float]:
    """The `key = value` lines the `run` example prints (other lines are ignored)."""
    metrics: dict[str, float] = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition(" = ")
        if not sep:
            continue
        try:
            metrics[key.strip()] = float(value)
        except ValueError:
            continue
    return metrics


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= ABS_TOL + REL_TOL * max(abs(a), abs(b))


def _ratio(num: float, den: float, scale: float = 1.0) -> float:
    return scale * num / den if den else 0.0


def check_invariants(metrics: dict[str, float], replay_policy: str = "batch-flush") -> list[str]:
    """The accounting identities of docs/metrics.md that `metrics` (a finished run's) break, as readable
    strings; an identity is checked only when the metrics it names exist, and only under the conditions
    it holds in (noted with each). `replay_policy` is the run's `uvm.replay_policy` (`replay_policy_of`):
    the metrics do not say it, and the replay count depends on it."""
    m = metrics
    out: list[str] = []
    one_gpu = "multi.gpus" not in m

    def eq(what: str, lhs: float, rhs: float, detail: str = "") -> None:
        if not _close(lhs, rhs):
            out.append(f"{what}: {lhs:g} != {rhs:g}" + (f" ({detail})" if detail else ""))

    def has(*keys: str) -> bool:
        return all(k in m for k in keys)

    # Lookups (docs/metrics.md:47): accesses = hits + mshr_hits + misses; hit rates (docs/metrics.md:42) are
    # hits / accesses, 0 with no accesses.
    for key in m:
        fam = LOOKUP_FAMILIES.match(key)
        if not fam:
            continue
        p = fam.group(1)
        if has(f"{p}.hits", f"{p}.mshr_hits", f"{p}.misses"):
            parts = m[f"{p}.hits"] + m[f"{p}.mshr_hits"] + m[f"{p}.misses"]
            eq(f"{p}.accesses = hits + mshr_hits + misses", m[key], parts)
        if has(f"{p}.hits", f"{p}.hit_rate"):
            eq(f"{p}.hit_rate = hits / accesses", m[f"{p}.hit_rate"], _ratio(m[f"{p}.hits"], m[key]))
    # The L1 data cache holds no dirty data (docs/metrics.md:270).
    for key in m:
        if re.fullmatch(r"gpu\d+\.l1d\.writebacks", key):
            eq(f"{key} = 0", m[key], 0)

    # One translation per L1 TLB lookup (docs/metrics.md:108).
    for key in m:
        tm = re.fullmatch(r"(gpu\d+)\.translations", key)
        if tm and f"{tm.group(1)}.l1tlb.accesses" in m:
            eq(f"{key} = {tm.group(1)}.l1tlb.accesses", m[key], m[f"{tm.group(1)}.l1tlb.accesses"])

    # L2 TLB lookups = L1 TLB misses + µTLB retries after replays (docs/metrics.md:131). The retries are the
    # one-GPU driver's (uvm.faults.retried); the multi-GPU model has no µTLB retries, so there the sum over the
    # GPUs is compared. Narrowed (stress seed 7201, gtx480-zheng): without an L2 TLB (gpu.l2tlb.entries = 0) the
    # L1 misses go to the walker and the L2 TLB's metrics are all 0 (docs/metrics.md:57-59), so it is checked only
    # where the L2 TLB saw a lookup.
    gpus = sorted({k.split(".", 1)[0] for k in m if re.match(r"gpu\d+\.l1tlb\.misses$", k)})
    l2_lookups = sum(m.get(f"{g}.l2tlb.accesses", 0) for g in gpus)
    if gpus and all(f"{g}.l2tlb.accesses" in m for g in gpus) and l2_lookups > 0:
        l2 = sum(m[f"{g}.l2tlb.accesses"] for g in gpus)
        l1 = sum(m[f"{g}.l1tlb.misses"] for g in gpus)
        eq("l2tlb.accesses = l1tlb.misses + uvm.faults.retried", l2, l1 + m.get("uvm.faults.retried", 0))

    # Walkers (docs/metrics.md:166, 169, 170): walks_in_flight_mean = busy_ns / time.total_ns; pte_reads_per_walk
    # = pte_reads / walks; every walk reads N = 1 .. levels entries, so reads.{N} partition the walks and
    # sum N * reads.{N} = pte_reads.
    for key in m:
        w = WALKERS.match(key)
        if not w:
            continue
        p = w.group(1)
        walks = m[key]
        if has(f"{p}.busy_ns", f"{p}.walks_in_flight_mean", "time.total_ns"):
            eq(
                f"{p}.walks_in_flight_mean = busy_ns / time.total_ns",
                m[f"{p}.walks_in_flight_mean"],
                _ratio(m[f"{p}.busy_ns"], m["time.total_ns"]),
            )
        if has(f"{p}.pte_reads", f"{p}.pte_reads_per_walk"):
            eq(
                f"{p}.pte_reads_per_walk = pte_reads / walks",
                m[f"{p}.pte_reads_per_walk"],
                _ratio(m[f"{p}.pte_reads"], walks),
            )
        reads = {int(k.rsplit(".", 1)[1]): v for k, v in m.items() if re.fullmatch(rf"{re.escape(p)}\.reads\.\d+", k)}
        if reads:
            eq(f"{p}.walks = sum of reads.{{N}}", walks, sum(reads.values()))
            if f"{p}.pte_reads" in m:
                eq(f"{p}.pte_reads = sum of N * reads.{{N}}", m[f"{p}.pte_reads"], sum(n * v for n, v in reads.items()))

    # DRAM bytes (docs/metrics.md:281) = (reads + writes) * gpu.line_bytes + pte_reads * 64. The line size is
    # config, not a metric: the rest must be a whole number of lines of a power-of-two size.
    for key in m:
        dm = re.fullmatch(r"(gpu\d+)\.dram\.bytes", key)
        if not dm:
            continue
        p = dm.group(1)
        if not has(f"{p}.dram.reads", f"{p}.dram.writes", f"{p}.dram.pte_reads"):
            continue
        lines = m[f"{p}.dram.reads"] + m[f"{p}.dram.writes"]
        data = m[key] - 64 * m[f"{p}.dram.pte_reads"]
        if lines == 0:
            eq(f"{key} = pte_reads * 64 (no line traffic)", data, 0)
        elif data % lines or int(data // lines) not in (32, 64, 128, 256):
            out.append(
                f"{key} = (reads + writes) * line_bytes + pte_reads * 64: {m[key]:g} gives line_bytes {data / lines:g}"
            )

    # Explicit copies (docs/metrics.md:68-69, 76-77): the h2d and d2h parts add up to the whole.
    if has("time.memcpy_ns", "time.memcpy_h2d_ns", "time.memcpy_d2h_ns"):
        eq("time.memcpy_ns = h2d + d2h", m["time.memcpy_ns"], m["time.memcpy_h2d_ns"] + m["time.memcpy_d2h_ns"])
    if has("host.memcpy_bytes", "host.memcpy_h2d_bytes", "host.memcpy_d2h_bytes"):
        eq(
            "host.memcpy_bytes = h2d + d2h",
            m["host.memcpy_bytes"],
            m["host.memcpy_h2d_bytes"] + m["host.memcpy_d2h_bytes"],
        )

    # The fault buffer (docs/metrics.md:288): every raised fault is fetched, flushed, or still in the buffer.
    if has("uvm.faults.raw", "uvm.faults.fetched", "uvm.faults.flushed", "uvm.faults.unfetched"):
        eq(
            "uvm.faults.raw = fetched + flushed + unfetched",
            m["uvm.faults.raw"],
            m["uvm.faults.fetched"] + m["uvm.faults.flushed"] + m["uvm.faults.unfetched"],
        )
    # docs/metrics.md:309: faults_per_batch = fetched / batches.
    if has("uvm.faults_per_batch", "uvm.faults.fetched", "uvm.batches"):
        eq(
            "uvm.faults_per_batch = fetched / batches",
            m["uvm.faults_per_batch"],
            _ratio(m["uvm.faults.fetched"], m["uvm.batches"]),
        )
    # docs/metrics.md:683 (and the uvm.faults.fetch_merged row): the duplicates merged at fetch are some of them.
    if (
        has("uvm.faults.fetch_merged", "uvm.faults.duplicate")
        and m["uvm.faults.fetch_merged"] > m["uvm.faults.duplicate"]
    ):
        out.append(
            f"uvm.faults.fetch_merged <= duplicate: {m['uvm.faults.fetch_merged']:g} > {m['uvm.faults.duplicate']:g}"
        )
    # Stage times (docs/metrics.md:289, 686): the stages of a batch add up to its time, and the uvm.stage.*
    # totals and uvm.time_ns cover the same (finished) batches. copy_ns is not a stage.
    stages = [v for k, v in m.items() if k.startswith("uvm.stage.") and k != "uvm.stage.copy_ns"]
    if stages and "uvm.time_ns" in m:
        eq("uvm.time_ns = sum of uvm.stage.*_ns (copy_ns aside)", m["uvm.time_ns"], sum(stages))

    # Prefetching (docs/metrics.md:344, 349, 351, 352): prefetched_pages is prefetch.pages under another name;
    # pages = used + wasted; evicted_unused is part of wasted.
    if has("uvm.prefetched_pages", "uvm.prefetch.pages"):
        eq("uvm.prefetched_pages = uvm.prefetch.pages", m["uvm.prefetched_pages"], m["uvm.prefetch.pages"])
    if has("uvm.prefetch.pages", "uvm.prefetch.used", "uvm.prefetch.wasted"):
        eq(
            "uvm.prefetch.pages = used + wasted",
            m["uvm.prefetch.pages"],
            m["uvm.prefetch.used"] + m["uvm.prefetch.wasted"],
        )
    if (
        has("uvm.prefetch.evicted_unused", "uvm.prefetch.wasted")
        and m["uvm.prefetch.evicted_unused"] > m["uvm.prefetch.wasted"]
    ):
        out.append(
            f"uvm.prefetch.evicted_unused <= wasted: {m['uvm.prefetch.evicted_unused']:g}"
            f" > {m['uvm.prefetch.wasted']:g}"
        )
    # Eviction write-back (docs/metrics.md:357-358): bytes_d2h = (pages_evicted - pages_evicted_clean) * 4096.
    if has("uvm.bytes_d2h", "uvm.pages_evicted", "uvm.pages_evicted_clean"):
        eq(
            "uvm.bytes_d2h = (pages_evicted - pages_evicted_clean) * 4096",
            m["uvm.bytes_d2h"],
            (m["uvm.pages_evicted"] - m["uvm.pages_evicted_clean"]) * 4096,
        )
    # docs/metrics.md:335-343: every page a batch migrates to the GPU is a demand fault or a prefetch, so without
    # eviction resident_pages = faults.unique + prefetch.pages. Read-mostly duplicates count in both
    # (docs/metrics.md:719). The other ways pages arrive or leave are left out (the docs said "without eviction"
    # only until this check: a titan-v stream with workload.prefetch_inputs has 1536 resident pages, 0 faulted,
    # and ping-pong's host phases take every page back): cudaMemPrefetchAsync (docs/metrics.md:402) and
    # access-counter migrations (docs/metrics.md:423) bring pages; host take-backs and pins
    # (docs/metrics.md:386) and host writes invalidating duplicates (docs/metrics.md:383) remove them.
    # Narrowed (stress seed 7201, mi300a-apu, kaveri-apu, mgpusim-r9nano): in IOMMU mode the APU's page requests
    # map the pages (apu.pages_mapped, docs/metrics.md:241-250) and the driver services none, so GMMU mode only.
    others = ("uvm.evictions", "uvm.prefetch_async.pages", "uvm.access_counters.pages", "uvm.host.pages_d2h")
    if (
        one_gpu
        and "apu.pages_mapped" not in m
        and has("uvm.resident_pages", "uvm.faults.unique", "uvm.prefetch.pages")
        and not any(m.get(k, 0) for k in (*others, "uvm.read_dup.invalidations"))
    ):
        eq(
            "uvm.resident_pages = faults.unique + prefetch.pages (no eviction)",
            m["uvm.resident_pages"],
            m["uvm.faults.unique"] + m["uvm.prefetch.pages"],
        )
    # docs/metrics.md:313: one replay per batch (not the polled model's, one per flight); a batch still in
    # service at the end (docs/metrics.md:289-291) may not have issued its replay yet. Narrowed (edge_sweep.py,
    # 2026-12-06: 68 runs): replay policy "block" replays after each VA block (more), "once" only when the
    # buffer is drained (fewer).
    if has("uvm.replays", "uvm.batches") and "uvm.polled.faults" not in m:
        lo = 0 if replay_policy == "once" else m["uvm.batches"] - 1
        hi = math.inf if replay_policy == "block" else m["uvm.batches"]
        if not lo <= m["uvm.replays"] <= hi:
            out.append(
                f"uvm.replays = one per batch ({replay_policy}): {m['uvm.replays']:g} replays,"
                f" {m['uvm.batches']:g} batches"
            )
    # cudaMemPrefetchAsync's and access-counter migrations' copies are also in uvm.bytes_h2d (docs/metrics.md:396,
    # 410), the former's evictions in uvm.evictions (docs/metrics.md:397).
    driver_h2d = m.get("uvm.prefetch_async.bytes_h2d", 0) + m.get("uvm.access_counters.bytes_h2d", 0)
    if "uvm.bytes_h2d" in m and driver_h2d > m["uvm.bytes_h2d"]:
        out.append(
            f"uvm.prefetch_async.bytes_h2d + access_counters.bytes_h2d <= uvm.bytes_h2d: {driver_h2d:g}"
            f" > {m['uvm.bytes_h2d']:g}"
        )
    if has("uvm.prefetch_async.evictions", "uvm.evictions") and m["uvm.prefetch_async.evictions"] > m["uvm.evictions"]:
        out.append("uvm.prefetch_async.evictions <= uvm.evictions")
    # Host take-backs (docs/metrics.md:387): host.bytes_d2h = host.pages_d2h * 4096.
    if has("uvm.host.bytes_d2h", "uvm.host.pages_d2h"):
        eq("uvm.host.bytes_d2h = pages_d2h * 4096", m["uvm.host.bytes_d2h"], m["uvm.host.pages_d2h"] * 4096)

    # Link bytes (docs/metrics.md:725, 396, 410): in a one-GPU run the link carries the explicit copies
    # (host.memcpy_*) and the migrations, whose bytes add up to the link's. Host to device, every cause is in
    # uvm.bytes_h2d (docs/metrics.md:748 allocations' pages_h2d: "for any cause"); device to host, the
    # causes are evictions (uvm.bytes_d2h), host take-backs and pins (uvm.host.bytes_d2h) and host reads of
    # read-mostly pages (uvm.read_dup.host_copies, a d2h `hint` row). The multi-GPU model moves pages itself
    # (multi.bytes_*), so one GPU only.
    if one_gpu and has("link.h2d.bytes", "host.memcpy_h2d_bytes", "uvm.bytes_h2d"):
        eq(
            "link.h2d.bytes = host.memcpy_h2d_bytes + uvm.bytes_h2d",
            m["link.h2d.bytes"],
            m["host.memcpy_h2d_bytes"] + m["uvm.bytes_h2d"],
        )
    if one_gpu and has("link.d2h.bytes", "host.memcpy_d2h_bytes", "uvm.bytes_d2h", "uvm.host.bytes_d2h"):
        back = m["uvm.bytes_d2h"] + m["uvm.host.bytes_d2h"] + 4096 * m.get("uvm.read_dup.host_copies", 0)
        eq(
            "link.d2h.bytes = host.memcpy_d2h_bytes + uvm.bytes_d2h + uvm.host.bytes_d2h + 4096 * read_dup.host_copies",
            m["link.d2h.bytes"],
            m["host.memcpy_d2h_bytes"] + back,
        )

    # Baselines (docs/metrics.md:467-469).
    if has("baseline.copy_then_execute_ns", "baseline.ideal_overlap_ns", "time.total_ns"):
        total = m["time.total_ns"]
        eq(
            "baseline.slowdown_vs_copy = time.total_ns / copy_then_execute_ns",
            m.get("baseline.slowdown_vs_copy", 0),
            _ratio(total, m["baseline.copy_then_execute_ns"]),
        )
        eq(
            "baseline.slowdown_vs_ideal = time.total_ns / ideal_overlap_ns",
            m.get("baseline.slowdown_vs_ideal", 0),
            _ratio(total, m["baseline.ideal_overlap_ns"]),
        )
        if m["baseline.ideal_overlap_ns"] > m["baseline.copy_then_execute_ns"] + ABS_TOL:
            out.append("baseline.ideal_overlap_ns <= copy_then_execute_ns (the longer of copy and kernel)")

    # Multi-GPU (docs/metrics.md:483-536).
    per_gpu = sorted(mt.group(1) for k in m if (mt := GPU_PREFIX.match(k)))
    if per_gpu and "multi.insts" in m:
        eq("multi.insts = sum of gpu*.insts", m["multi.insts"], sum(m[f"{g}.insts"] for g in per_gpu))
        for g in per_gpu:
            if has(f"{g}.far_faults", f"{g}.far_faults_pki"):
                eq(
                    f"{g}.far_faults_pki = far_faults per 1000 insts",
                    m[f"{g}.far_faults_pki"],
                    _ratio(m[f"{g}.far_faults"], m[f"{g}.insts"], 1000),
                )
            if has(f"{g}.l2tlb.misses", f"{g}.l2tlb.mpki"):
                eq(
                    f"{g}.l2tlb.mpki = l2tlb.misses per 1000 insts",
                    m[f"{g}.l2tlb.mpki"],
                    _ratio(m[f"{g}.l2tlb.misses"], m[f"{g}.insts"], 1000),
                )
        if all(f"{g}.far_faults" in m for g in per_gpu) and "multi.far_faults" in m:
            eq(
                "multi.far_faults = sum of gpu*.far_faults",
                m["multi.far_faults"],
                sum(m[f"{g}.far_faults"] for g in per_gpu),
            )
            if "multi.far_faults_pki" in m:
                eq(
                    "multi.far_faults_pki",
                    m["multi.far_faults_pki"],
                    _ratio(m["multi.far_faults"], m["multi.insts"], 1000),
                )
        if "multi.l2tlb.mpki" in m and all(f"{g}.l2tlb.misses" in m for g in per_gpu):
            misses = sum(m[f"{g}.l2tlb.misses"] for g in per_gpu)
            eq(
                "multi.l2tlb.mpki = L2 TLB misses per 1000 insts",
                m["multi.l2tlb.mpki"],
                _ratio(misses, m["multi.insts"], 1000),
            )
        if "multi.remote_accesses" in m and all(f"{g}.remote_accesses" in m for g in per_gpu):
            eq(
                "multi.remote_accesses = sum of gpu*.remote_accesses",
                m["multi.remote_accesses"],
                sum(m[f"{g}.remote_accesses"] for g in per_gpu),
            )
    if has("multi.remote_fraction", "multi.remote_accesses", "multi.local_accesses"):
        r, loc = m["multi.remote_accesses"], m["multi.local_accesses"]
        eq("multi.remote_fraction = remote / (remote + local)", m["multi.remote_fraction"], _ratio(r, r + loc))
    if has("multi.migrations", "multi.migrations.h2d", "multi.migrations.p2p"):
        eq("multi.migrations = h2d + p2p", m["multi.migrations"], m["multi.migrations.h2d"] + m["multi.migrations.p2p"])
        if m.get("multi.migrations.counter", 0) > m["multi.migrations.p2p"]:
            out.append("multi.migrations.counter <= migrations.p2p (docs/metrics.md:504: of p2p)")
    # docs/metrics.md:729-739: one 4 KiB page per move; bytes 0 under multi.oracle.no_migration_latency.
    if has("multi.bytes_h2d", "multi.migrations.h2d") and m["multi.bytes_h2d"] not in (
        0,
        4096 * m["multi.migrations.h2d"],
    ):
        out.append(
            f"multi.bytes_h2d = 4096 * migrations.h2d: {m['multi.bytes_h2d']:g} vs {m['multi.migrations.h2d']:g} pages"
        )
    if has("multi.bytes_p2p", "multi.migrations.p2p", "multi.replications"):
        pages = m["multi.migrations.p2p"] + m["multi.replications"]
        if m["multi.bytes_p2p"] not in (0, 4096 * pages):
            out.append(
                f"multi.bytes_p2p = 4096 * (migrations.p2p + replications): {m['multi.bytes_p2p']:g} vs {pages:g} pages"
            )
    # docs/metrics.md:517: sent >= necessary + unnecessary (requests still on their way count in neither).
    if has("multi.invalidations.sent", "multi.invalidations.necessary", "multi.invalidations.unnecessary"):
        if m["multi.invalidations.sent"] < m["multi.invalidations.necessary"] + m["multi.invalidations.unnecessary"]:
            out.append("multi.invalidations.sent >= necessary + unnecessary")
    # docs/metrics.md:536: GMMU mode, one host-MMU TLB lookup per far fault and per access-counter migration.
    if has("host_mmu.tlb.accesses", "multi.far_faults", "host_mmu.walker.walks"):
        eq(
            "host_mmu.tlb.accesses = multi.far_faults + multi.migrations.counter",
            m["host_mmu.tlb.accesses"],
            m["multi.far_faults"] + m.get("multi.migrations.counter", 0),
        )
    # docs/metrics.md (apu.time_ns): the time with a page request outstanding is at most the run's and at most
    # the requests' latencies summed.
    if has("apu.time_ns", "apu.faults", "apu.fault_latency_ns.mean", "time.total_ns"):
        summed = m["apu.faults"] * m["apu.fault_latency_ns.mean"]
        if m["apu.time_ns"] > min(m["time.total_ns"], summed) * (1 + 1e-9) + 1e-6:
            out.append(
                f"apu.time_ns <= time.total_ns and <= apu.faults * fault_latency mean: {m['apu.time_ns']:g} vs"
                f" {m['time.total_ns']:g}, {summed:g}"
            )
    # docs/metrics.md:574: remote_probes >= false_positives + remote_hits.
    if has("multi.least_tlb.remote_probes", "multi.least_tlb.false_positives", "multi.least_tlb.remote_hits"):
        if m["multi.least_tlb.remote_probes"] < m["multi.least_tlb.false_positives"] + m["multi.least_tlb.remote_hits"]:
            out.append("multi.least_tlb.remote_probes >= false_positives + remote_hits")
    return out


def replay_policy_of(preset: Path, sets: list[str]) -> str:
    """The run's `uvm.replay_policy`: the `--set` one, else the preset's, else the default."""
    for x in sets:
        key, _, value = x.partition("=")
        if key == "uvm.replay_policy":
            return value.strip('"')
    with open(preset, "rb") as f:
        return str(tomllib.load(f).get("uvm", {}).get("replay_policy", "batch-flush"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", help="the `run` example (cargo build --release --example run)")
    ap.add_argument("-n", type=int, default=1000, help="runs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=40.0, help="seconds before a run counts as never ending")
    ap.add_argument("-o", "--out", default="stress.jsonl", help="JSON-lines results (appended)")
    ap.add_argument("--scale", type=int, default=1, help="multiply each workload size parameter by this")
    args = ap.parse_args()
    presets_dir = Path(__file__).resolve().parent.parent / "presets"
    rng = random.Random(args.seed)
    counts: collections.Counter[str] = collections.Counter()
    with open(args.out, "a") as out:
        for i in range(args.n):
            preset, sets = one(rng, presets_dir, args.scale)
            start = time.monotonic()
            dropped: list[str] = []
            while True:
                try:
                    cmd = [args.binary, preset, *sets]
                    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                    rc: int | str = p.returncode
                    err = p.stderr.strip()
                except subprocess.TimeoutExpired:
                    rc, err = "timeout", ""
                # An option refused in this combination (not read in the run's mode, or in conflict
                # with another): drop the one set here and run the rest.
                named = {k for pair in REFUSED_KEY.findall(err) for k in pair if k} if rc == 2 else set()
                gone = [x for x in sets if x.partition("=")[0] in named]
                err = err[-600:]
                if not gone:
                    break
                dropped += gone
                sets = [x for x in sets if x not in gone]
            # A finished run whose metrics break an accounting identity is a bug to look at too.
            policy = replay_policy_of(Path(preset), sets)
            violations = check_invariants(parse_metrics(p.stdout), policy) if rc == 0 else []
            kind = "invariant" if violations else str(rc)
            counts[kind] += 1
            rec = {"i": i, "preset": Path(preset).stem, "sets": sets, "dropped": dropped, "rc": rc, "err": err}
            if violations:
                rec |= {"kind": kind, "violations": violations}
            out.write(json.dumps(rec | {"s": round(time.monotonic() - start, 2)}) + "\n")
            out.flush()
            if rc not in (0, 2) or violations:
                detail = "; ".join(violations) if violations else err
                print(f"run {i}: {kind}: {Path(preset).stem} {' '.join(sets)}\n  {detail[:600]}", flush=True)
    print(dict(counts))


if __name__ == "__main__":
    main()
