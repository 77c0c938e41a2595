"""Targeted sweeps of extreme option corners that random stress runs (stress_configs.py) rarely reach.

A deterministic grid (fixed seed for the secondary options each row rotates through) of small single-GPU
runs of the `run` example, each classified as stress_configs.py does: `ok` (exit 0, accounting identities
of docs/metrics.md hold), `invariant` (exit 0, some identity broken: `check_invariants`), `bad-input`
(exit 2, the message kept), `error` (exit 1: model error or deadlock watchdog), `panic` (101) or
`timeout`. One JSON object per run goes to the output file (appended, flushed per run). The corners:

- `tiny`: GPU memory far below the footprint (uvm.oversubscription 1.01 .. 64) x eviction granularity
  and policy, two prefetch policies each in turn; write-back and prefetch.when_full drawn;
- `hints`: every uvm.advise.policy x oversubscription x workload.prefetch_inputs, ping-pong's host writes
  or reads and srad's host reads of its region of interest (on by default);
- `thrash`: thrashing detection off, or on with the smallest thresholds, lapses and pin periods;
- `batch`: fault-buffer extremes (batch_size 1 and 4096, utlb_fault_limit 1, every replay policy,
  max_batches_per_service 1, a 64-entry fault buffer);
- `cost`: the polled and fixed-latency cost models with page eviction and every prefetch policy.

    cargo build --release --example run
    python scripts/edge_sweep.py target/release/examples/run -o edge.jsonl [--grid tiny --grid hints]
    python scripts/edge_sweep.py target/release/examples/run --count   # grid sizes only

Found (2026-12-06, seed 1, 2,288 runs in 403 s on the fixed binary: 2,040 ok, 141 bad input, 72 invariant,
35 error, 0 timeout, 0 panic). On the code before it, the tiny grid's first 480 runs had 11 watchdog
livelocks and 3 timeouts: with a transfer-set prefetcher (random, sequential, locality) and the driver or
fixed-latency cost model the batch's blocks go in VA-block order, so a prefetch-only block below the faulting
one took the last root chunk (or the free pages), pinned as the batch's, and the demand block was deferred at
every batch; fixed (uvm: room_for_later, tests/policies.rs prefetches_leave_room_for_the_batch_demand_pages).
The 141 bad inputs are the grid's own impossible pairs (batch_size 4096 over a 64-entry buffer, lapse_us
0.001), refused with messages naming the key and its bounds. The 72 invariant rows: 67 were the checker's
one-replay-per-batch rule, which holds for batch-flush and batch only ("block" replays after each VA block,
"once" only when the buffer is drained): narrowed (`replay_policy_of`), docs/metrics.md's uvm.replays row
corrected. 5 remain, described, not fixed: replay_policy "block", blocking faults, block eviction, driver
model: uvm.time_ns < the sum of uvm.stage.*_ns (run 1605: 6.78e6 vs 6.98e6 ns); suspected cause: a block
deferred after the batch's last serviced block adds stage time after the last segment's end, where the batch
ends (uvm/mod.rs, the per_block_replay segments in `service`). The 35 errors, each reproduced alone:
(a) 6 deadlocks ("no event is pending"), blocking faults + fixed-latency model + page or block eviction at
oversubscription 8-64, e.g. a100-pcie4 minife 16^3 x 2, oversubscription 64, page, random eviction, no
prefetch: warps wait for a page no fault is raised for (nothing buffered, held or outstanding); gone with
the driver model, utlb_merge_faults = true or utlb_fault_limit <= 2. Root-caused and fixed the same day
(world.rs): with memory full, a blocking replay re-executed only the warps of a new refault epoch, and a
warp that slept after the service began that epoch waited for ever on its deferred page; the replay now
requeues the waiters of every page whose fault ended unmapped (tests/policies.rs
blocking_warps_whose_deferred_faults_ended_unmapped_fault_again). Re-run alone, all 6 (and one block-
granularity nw run that finished before room_for_later and deadlocked with it) now finish; the other 28
errors below still stop on the watchdog. (b) 14 watchdog
stops in the polled model with page eviction at oversubscription 64 (6-64 pages for 128 warps' faults; 0
pages resident, all memory crossing the link: each round evicts the pages the last one landed before their
warps re-execute), plus 2 with block eviction (gather, 1 chunk, oracle or no prefetch) and 1 read-mostly random:
likely a genuine thrash of the polled model's overlapping rounds, not checked further. (c) 11 in the thrash
grid's extreme profiles (lapse 1 s with nap 100 or pin 300): the watchdog fires while a page stays throttled
or pinned for minutes of simulated time; run 1317 finishes with the watchdog off, 1320 and 1322 do not within
25 s. (d) 1 batch-grid watchdog (random, 1 chunk, replay "once", fixed-latency), unexamined.

Session 73 (2026-12-06, the same grid on the session's final binary: 2,118 ok, 141 bad input, 0 invariant,
29 error, 0 timeout, 0 panic). The 5 invariant rows were the "block" policy's batches ending with their
last serviced block while blocks deferred after it still cost time: fixed (uvm/mod.rs, a final segment;
tests/policies.rs block_replay_batches_end_after_their_deferred_blocks). The 29 errors are all watchdog
stops at this grid's 20,000 batches (the default is 100,000): 11 name a thrashing throttle (the message now
says so, with the nap's end: tests/robust.rs the_watchdog_names_the_far_fault_state), pages kept off the GPU
for nap x lapse (up to 100 s); run 1317 also polled an idle GPU every interval while the host slept out its
nap, a transfer set of only thrashing pages making empty rounds (fixed: tests/policies.rs
polled_sets_of_only_thrashing_pages_are_no_round). 18 name GPU memory: 6 finish with the default watchdog
(729, 1905, 1909, 1937, 1945, 1947: up to 126,150 rounds); 12 stop at 100,000 too (557, 645, 1451, 1514,
1566, 2193, 2195, 2201, 2203, 2207, 2267, 2269): gather, XSBench and random kernels at 1/8 to 1/64 of the
footprint, where one warp instruction's pages exceed GPU memory (one 2 MiB chunk for lanes over four
blocks; 6-64 pages for 128 warps) or each round evicts what the last one landed. The driver does not count
evictions as thrashing events (uvm_perf_thrashing.c skips UVM_MAKE_RESIDENT_CAUSE_EVICTION), so no pin
rescues them, in the model as in the driver.

Session 80 (2026-12-07, commit 031e513, after the changes of sessions 74-79): 2,118 ok, 141 bad input,
0 invariant, 29 error, 0 timeout, 0 panic: the same 29 runs as session 73 stop on the watchdog (557, 645,
729, 1317, 1319-1323, 1340-1342, 1345, 1346, 1451, 1514, 1566, 1905, 1909, 1937, 1945, 1947, 2193,
2195, 2201, 2203, 2207, 2267, 2269).

Session 82 (2026-12-07, the model code of 0d87801, unchanged since 031e513; a debug-assertion build,
`CARGO_PROFILE_DEV_OPT_LEVEL=2 cargo build --example run`): the same counts and the same 29 watchdog stops;
no debug assertion or overflow check fired.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

# A sibling script: `python scripts/edge_sweep.py` puts its directory on the path (typed, unlike a loaded module).
import stress_configs as stress

ROOT = Path(__file__).resolve().parent.parent

parse_metrics = stress.parse_metrics
check_invariants = stress.check_invariants

# The workloads the corners are crossed with, at stress_configs.py's small inputs.
WORKLOAD_KINDS = (
    "regular",
    "random",
    "stream",
    "ping-pong",
    "srad",
    "blas-gemm",
    "hotspot",
    "nw",
    "backprop",
    "xsbench",
    "minife",
    "gather",
)
WORKLOADS: dict[str, list[str]] = {k: list(stress.WORKLOADS[k]) for k in WORKLOAD_KINDS}
# blas-gemm at n = 512 takes seconds at oversubscription 64 (22,000 page evictions): a smaller matrix.
WORKLOADS["blas-gemm"] = ["workload.blas_gemm.n=256"]

# Single-GPU GMMU presets with the UVM driver's fault path (the options below are refused elsewhere).
PRESETS = ("titan-v", "a100-pcie4", "gtx480-zheng")

OVERSUB = ("1.01", "2", "8", "64")
GRANULARITY = ('"block"', '"page"')
EVICTION_POLICY = ('"driver"', '"lru"', '"random"', '"lfu"')
WRITE_BACK = ('"all"', '"dirty"')
# Every prefetch policy, in the stress run's order (the grid's rotation depends on it).
PREFETCH: tuple[str, ...] = tuple(stress.OPTIONS["uvm.prefetch.policy"])
WHEN_FULL = ('"keep"', '"stop"', '"locality"')
ADVISE = ('"none"', '"read-mostly"', '"preferred-location-host"', '"accessed-by"')
FAULT_MODE = ('"replayable"', '"blocking"')
COST_MODEL = ('"driver"', '"fixed-latency"', '"polled"')
REPLAY = ('"batch-flush"', '"batch"', '"block"', '"once"')
# Drawn cost models: the driver's twice as often where its batch and throttle limits are the corner; the
# polled model has no batches, so the batch grid leaves it out.
THRASH_COST = ('"driver"', '"driver"', '"fixed-latency"', '"polled"')
BATCH_COST = ('"driver"', '"driver"', '"fixed-latency"')

# Thrashing profiles: off, the defaults, and the smallest (and a few largest) values docs/config.md allows.
THRASHING: dict[str, list[str]] = {
    "off": ["uvm.thrashing.enable=false"],
    "default": ["uvm.thrashing.enable=true"],
    "min-all": [
        "uvm.thrashing.enable=true",
        "uvm.thrashing.threshold=1",
        "uvm.thrashing.pin_threshold=1",
        "uvm.thrashing.lapse_us=1.0",
        "uvm.thrashing.nap=1",
        "uvm.thrashing.pin=1",
        "uvm.max_throttle_per_service=1",
    ],
    "pin-at-once": [
        "uvm.thrashing.enable=true",
        "uvm.thrashing.threshold=1",
        "uvm.thrashing.pin_threshold=1",
        "uvm.thrashing.lapse_us=1000000.0",
        "uvm.thrashing.pin=300",
    ],
    "throttle-long": [
        "uvm.thrashing.enable=true",
        "uvm.thrashing.threshold=1",
        "uvm.thrashing.pin_threshold=255",
        "uvm.thrashing.lapse_us=1000000.0",
        "uvm.thrashing.nap=100",
        "uvm.max_throttle_per_service=1",
    ],
    "tiny-lapse": [
        "uvm.thrashing.enable=true",
        "uvm.thrashing.threshold=7",
        "uvm.thrashing.lapse_us=0.001",
        "uvm.thrashing.pin=1",
    ],
}

Run = tuple[str, str, list[str]]  # grid, preset, `key=value` settings


def _base(kind: str) -> list[str]:
    return ["workload.managed=true", f"workload.kind={kind}", *WORKLOADS[kind], "sim.watchdog_batches=20000"]


def grid_tiny(rng: random.Random) -> Iterator[Run]:
    """Every workload x oversubscription x granularity x eviction policy, each with two prefetch policies
    (taken in turn, so each workload meets all eight); write-back, prefetch.when_full, fault mode, cost model
    and preset drawn (fixed seed) per run."""
    combos = itertools.product(WORKLOAD_KINDS, OVERSUB, GRANULARITY, EVICTION_POLICY)
    # lfu is block-only: page-granular lfu is refused (exit 2), so it is left out.
    combos_kept = [c for c in combos if not (c[3] == '"lfu"' and c[2] == '"page"')]
    for c, (kind, over, gran, pol) in enumerate(combos_kept):
        for pf in (PREFETCH[(2 * c) % len(PREFETCH)], PREFETCH[(2 * c + 1) % len(PREFETCH)]):
            sets = _base(kind) + [
                f"uvm.oversubscription={over}",
                f"uvm.eviction.granularity={gran}",
                f"uvm.eviction.policy={pol}",
                f"uvm.prefetch.policy={pf}",
                f"uvm.eviction.write_back={rng.choice(WRITE_BACK)}",
                f"uvm.prefetch.when_full={rng.choice(WHEN_FULL)}",
                f"uvm.fault_mode={rng.choice(FAULT_MODE)}",
                f"uvm.cost_model={rng.choice(COST_MODEL)}",
            ]
            yield "tiny", rng.choice(PRESETS), sets


def grid_hints(rng: random.Random) -> Iterator[Run]:
    """Every workload x hint x oversubscription (0 = off) x cudaMemPrefetchAsync, ping-pong with host reads
    and writes; granularity, write-back, prefetch policy and cost model drawn per run."""
    kinds: list[tuple[str, list[str]]] = [(k, []) for k in WORKLOAD_KINDS if k != "ping-pong"]
    kinds += [
        ("ping-pong", ["workload.ping_pong.host_write=true"]),
        ("ping-pong", ["workload.ping_pong.host_write=false"]),
    ]
    kinds += [("ping-pong", ["workload.ping_pong.host_write=true", "workload.ping_pong.gpu_write=true"])]
    for (kind, extra), hint, over, pin in itertools.product(kinds, ADVISE, ("0", *OVERSUB), ("true", "false")):
        sets = (
            _base(kind)
            + extra
            + [
                f"uvm.advise.policy={hint}",
                f"uvm.oversubscription={over}",
                f"workload.prefetch_inputs={pin}",
                f"uvm.eviction.granularity={rng.choice(GRANULARITY)}",
                f"uvm.eviction.write_back={rng.choice(WRITE_BACK)}",
                f"uvm.prefetch.policy={rng.choice(PREFETCH)}",
                f"uvm.cost_model={rng.choice(COST_MODEL)}",
            ]
        )
        yield "hints", rng.choice(PRESETS), sets


def grid_thrash(rng: random.Random) -> Iterator[Run]:
    """Every workload x thrashing profile x oversubscription {2, 64} x granularity; fault mode, cost model
    (driver twice as often: the throttle limit is the driver's) and prefetch drawn per run."""
    for kind, prof, over, gran in itertools.product(WORKLOAD_KINDS, THRASHING, ("2", "64"), GRANULARITY):
        sets = (
            _base(kind)
            + THRASHING[prof]
            + [
                f"uvm.oversubscription={over}",
                f"uvm.eviction.granularity={gran}",
                f"uvm.fault_mode={rng.choice(FAULT_MODE)}",
                f"uvm.cost_model={rng.choice(THRASH_COST)}",
                f"uvm.prefetch.policy={rng.choice(PREFETCH)}",
            ]
        )
        if '"polled"' in sets[-2]:
            sets = [s for s in sets if not s.startswith("uvm.max_throttle_per_service=")]
        yield "thrash", rng.choice(PRESETS), sets


def grid_batch(rng: random.Random) -> Iterator[Run]:
    """Every workload x batch_size {1, 4096} x utlb_fault_limit {1, 56} x replay policy x fault mode; the
    bottom half's batch limit, the fault buffer's size, duplicate merging, oversubscription and eviction
    granularity drawn per run (driver and fixed-latency cost models: the polled one has no batches)."""
    for kind, bs, limit, replay, mode in itertools.product(
        WORKLOAD_KINDS, ("1", "4096"), ("1", "56"), REPLAY, FAULT_MODE
    ):
        sets = _base(kind) + [
            f"uvm.batch_size={bs}",
            f"uvm.utlb_fault_limit={limit}",
            f"uvm.replay_policy={replay}",
            f"uvm.fault_mode={mode}",
            f"uvm.max_batches_per_service={rng.choice(('1', '1', '20'))}",
            f"uvm.fault_buffer_entries={rng.choice(('64', '4096'))}",
            f"uvm.utlb_merge_faults={rng.choice(('true', 'false'))}",
            f"uvm.oversubscription={rng.choice(('0', '2', '64'))}",
            f"uvm.eviction.granularity={rng.choice(GRANULARITY)}",
            f"uvm.cost_model={rng.choice(BATCH_COST)}",
            f"uvm.prefetch.policy={rng.choice(PREFETCH[:2])}",
        ]
        yield "batch", rng.choice(PRESETS), sets


def grid_cost(rng: random.Random) -> Iterator[Run]:
    """Every workload x {polled, fixed-latency} x prefetch policy x oversubscription {1.01, 64}, page
    eviction; eviction policy (lfu is block-only), when_full, write-back and the polled model's switches
    drawn per run."""
    for kind, cost, pf, over in itertools.product(
        WORKLOAD_KINDS, ('"polled"', '"fixed-latency"'), PREFETCH, ("1.01", "64")
    ):
        sets = _base(kind) + [
            f"uvm.cost_model={cost}",
            f"uvm.prefetch.policy={pf}",
            f"uvm.oversubscription={over}",
            'uvm.eviction.granularity="page"',
            f"uvm.eviction.policy={rng.choice(EVICTION_POLICY[:3])}",
            f"uvm.prefetch.when_full={rng.choice(WHEN_FULL)}",
            f"uvm.eviction.write_back={rng.choice(WRITE_BACK)}",
            f"uvm.fault_mode={rng.choice(FAULT_MODE)}",
        ]
        if cost == '"polled"':
            sets += [
                f"uvm.merge_far_faults={rng.choice(('true', 'false'))}",
                f"uvm.land_per_copy={rng.choice(('true', 'false'))}",
                f"uvm.prefetch.demand_waits_for_set={rng.choice(('true', 'false'))}",
                f"uvm.eviction.overlap_write_back={rng.choice(('true', 'false'))}",
            ]
        yield "cost", rng.choice(PRESETS), sets


GRIDS = {"tiny": grid_tiny, "hints": grid_hints, "thrash": grid_thrash, "batch": grid_batch, "cost": grid_cost}


def runs(grids: list[str], seed: int) -> list[Run]:
    out: list[Run] = []
    for name in grids:
        out += list(GRIDS[name](random.Random(f"{seed}-{name}")))
    return out


def classify(rc: int | str, violations: list[str]) -> str:
    if rc == 0:
        return "invariant" if violations else "ok"
    return {2: "bad-input", 1: "error", 101: "panic", "timeout": "timeout"}.get(rc, f"exit-{rc}")


def run_one(binary: str, preset: str, sets: list[str], timeout: float) -> dict[str, object]:
    """Run one configuration and classify it."""
    start = time.monotonic()
    try:
        p = subprocess.run(
            [binary, str(ROOT / "presets" / f"{preset}.toml"), *sets], capture_output=True, text=True, timeout=timeout
        )
        rc: int | str = p.returncode
        err, stdout = p.stderr.strip(), p.stdout
    except subprocess.TimeoutExpired:
        rc, err, stdout = "timeout", "", ""
    policy = stress.replay_policy_of(ROOT / "presets" / f"{preset}.toml", sets)
    violations = check_invariants(parse_metrics(stdout), policy) if rc == 0 else []
    rec: dict[str, object] = {"preset": preset, "sets": sets, "rc": rc, "kind": classify(rc, violations)}
    if err and rc != 0:
        # The head names the error, the tail the waiting warps (a watchdog's state).
        rec["err"] = err if len(err) <= 1200 else f"{err[:600]} [...] {err[-600:]}"
    if violations:
        rec["violations"] = violations
    rec["s"] = round(time.monotonic() - start, 2)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", help="the `run` example (cargo build --release --example run)")
    ap.add_argument("--grid", action="append", choices=sorted(GRIDS), help="grids to run (default: all)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the per-run drawn options")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a run counts as never ending")
    ap.add_argument("--start", type=int, default=0, help="skip the grid's first runs (resume)")
    ap.add_argument("-o", "--out", default="edge.jsonl", help="JSON-lines results (appended)")
    ap.add_argument("--count", action="store_true", help="print each grid's size and exit")
    args = ap.parse_args()
    grids = args.grid or list(GRIDS)
    todo = runs(grids, args.seed)
    if args.count:
        print(dict(collections.Counter(g for g, _, _ in todo)), len(todo))
        return
    counts: collections.Counter[str] = collections.Counter()
    with open(args.out, "a") as out:
        for i, (grid, preset, sets) in enumerate(todo):
            if i < args.start:
                continue
            rec = {"i": i, "grid": grid} | run_one(args.binary, preset, sets, args.timeout)
            counts[str(rec["kind"])] += 1
            out.write(json.dumps(rec) + "\n")
            out.flush()
            if rec["kind"] not in ("ok", "bad-input"):
                detail = "; ".join(rec.get("violations", [])) or str(rec.get("err", ""))  # type: ignore[arg-type]
                print(f"run {i}: {rec['kind']}: {grid} {preset} {' '.join(sets)}\n  {detail[:600]}", flush=True)
    print(dict(counts))


if __name__ == "__main__":
    main()
