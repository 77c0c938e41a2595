"""Random-configuration stress run: many small simulations with random option combinations.

Each run picks a preset, a workload at a small input and a few options (fault mode, cost
model, replay and prefetch policies, eviction, hints, page size, GPU count, migration policy,
the multi-GPU proposals), runs the `run` example and classifies the outcome: finished (0), bad
input (2, the message is kept), or anything else: a deadlock or model error (1), a panic
(101), or no end within the time limit. The last kinds are bugs to look at. Results go to a
JSON-lines file, one object per run, so an interrupted stress run keeps what it did.

    cargo build --release --example run
    python scripts/stress_configs.py target/release/examples/run -n 2000 --seed 1 -o stress.jsonl

Found so far (docs/multi-gpu.md, 2026-11-29): multi-GPU warps slept for answers that had
already come (every multi-GPU blas-gemm deadlocked), page-crossing lanes livelocked
between GPUs (sad with round-robin CTAs), and, at --scale 4, ATS-mode warps waiting for page
pairs two GPUs shared livelocked (CoMD on mi300a-apu). Session 65 added the 22 switches introduced
since session 40 (CTA dispatch and barriers, TLB fill and MSHR blocking, the polled model's MSHR reading,
the transfer set's options, overlapped write-backs, records, the multi-GPU oracles, the workloads' copies
and hints): 1,500 runs at scale 1 (seed 6501) and 800 at scale 4 (seed 6502) all finished or were
refused with exit code 2.
"""

from __future__ import annotations

import argparse
import collections
import json
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
            counts[str(rc)] += 1
            rec = {"i": i, "preset": Path(preset).stem, "sets": sets, "dropped": dropped, "rc": rc, "err": err}
            out.write(json.dumps(rec | {"s": round(time.monotonic() - start, 2)}) + "\n")
            out.flush()
            if rc not in (0, 2):
                print(f"run {i}: {rc}: {Path(preset).stem} {' '.join(sets)}\n  {err[:300]}", flush=True)
    print(dict(counts))


if __name__ == "__main__":
    main()
