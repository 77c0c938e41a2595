"""The stress run's accounting-identity checker (scripts/stress_configs.py `check_invariants`): hand-made metrics,
one consistent set per model and one breaking each class of identity, so a checker that misses a violation (or
flags a consistent run) fails here rather than passing every stress run."""

from __future__ import annotations

from types import ModuleType

import pytest

from conftest import load_script


def _stress() -> ModuleType:
    return load_script("stress_configs")


stress = _stress()

# A consistent one-GPU managed run: explicit copies, faults, prefetches, evictions, host take-backs.
ONE_GPU: dict[str, float] = {
    "time.total_ns": 200000.0,
    "time.memcpy_ns": 3000.5,
    "time.memcpy_h2d_ns": 2000.25,
    "time.memcpy_d2h_ns": 1000.25,
    "host.memcpy_bytes": 12288,
    "host.memcpy_h2d_bytes": 8192,
    "host.memcpy_d2h_bytes": 4096,
    "link.h2d.bytes": 8192 + 40 * 4096,
    "link.d2h.bytes": 4096 + 6 * 4096 + 2 * 4096 + 1 * 4096,
    "gpu0.translations": 1000,
    "gpu0.l1tlb.accesses": 1000,
    "gpu0.l1tlb.hits": 700,
    "gpu0.l1tlb.mshr_hits": 100,
    "gpu0.l1tlb.misses": 200,
    "gpu0.l1tlb.hit_rate": 0.7,
    "gpu0.l2tlb.accesses": 230,
    "gpu0.l2tlb.hits": 100,
    "gpu0.l2tlb.mshr_hits": 30,
    "gpu0.l2tlb.misses": 100,
    "gpu0.l2tlb.hit_rate": 100 / 230,
    "gpu0.l1d.accesses": 0,
    "gpu0.l1d.hits": 0,
    "gpu0.l1d.mshr_hits": 0,
    "gpu0.l1d.misses": 0,
    "gpu0.l1d.hit_rate": 0.0,
    "gpu0.l1d.writebacks": 0,
    "gpu0.walker.walks": 100,
    "gpu0.walker.busy_ns": 50000.0,
    "gpu0.walker.walks_in_flight_mean": 0.25,
    "gpu0.walker.pte_reads": 170,
    "gpu0.walker.pte_reads_per_walk": 1.7,
    "gpu0.walker.reads.1": 60,
    "gpu0.walker.reads.2": 20,
    "gpu0.walker.reads.3": 10,
    "gpu0.walker.reads.4": 10,
    "gpu0.dram.reads": 10,
    "gpu0.dram.writes": 2,
    "gpu0.dram.pte_reads": 170,
    "gpu0.dram.bytes": 12 * 128 + 170 * 64,
    "uvm.faults.raw": 50,
    "uvm.faults.fetched": 40,
    "uvm.faults.flushed": 7,
    "uvm.faults.unfetched": 3,
    "uvm.faults.retried": 30,
    "uvm.faults.unique": 25,
    "uvm.faults.duplicate": 5,
    "uvm.faults.fetch_merged": 3,
    "uvm.prefetch_async.bytes_h2d": 20 * 4096,
    "uvm.prefetch_async.evictions": 1,
    "uvm.access_counters.bytes_h2d": 10 * 4096,
    "uvm.batches": 4,
    "uvm.replays": 4,
    "uvm.faults_per_batch": 10.0,
    "uvm.time_ns": 60.5,
    "uvm.stage.fetch_ns": 10.25,
    "uvm.stage.fault_ns": 20.25,
    "uvm.stage.replay_ns": 30.0,
    "uvm.stage.copy_ns": 999.0,
    "uvm.prefetch.pages": 15,
    "uvm.prefetched_pages": 15,
    "uvm.prefetch.used": 9,
    "uvm.prefetch.wasted": 6,
    "uvm.prefetch.evicted_unused": 2,
    "uvm.bytes_h2d": 40 * 4096,
    "uvm.evictions": 1,
    "uvm.pages_evicted": 8,
    "uvm.pages_evicted_clean": 2,
    "uvm.bytes_d2h": 6 * 4096,
    "uvm.host.pages_d2h": 2,
    "uvm.host.bytes_d2h": 2 * 4096,
    "uvm.read_dup.host_copies": 1,
    "uvm.read_dup.invalidations": 0,
    "uvm.resident_pages": 30,
    "baseline.copy_then_execute_ns": 100000.0,
    "baseline.ideal_overlap_ns": 80000.0,
    "baseline.slowdown_vs_copy": 2.0,
    "baseline.slowdown_vs_ideal": 2.5,
}

# Without eviction nor host take-backs: resident pages are the faulted and the prefetched ones.
NO_EVICTION = ONE_GPU | {
    "uvm.evictions": 0,
    "uvm.prefetch_async.evictions": 0,
    "uvm.pages_evicted": 0,
    "uvm.pages_evicted_clean": 0,
    "uvm.bytes_d2h": 0,
    "uvm.host.pages_d2h": 0,
    "uvm.host.bytes_d2h": 0,
    "uvm.read_dup.host_copies": 0,
    "link.d2h.bytes": 4096,
    "uvm.resident_pages": 40,
}

# A consistent two-GPU run (GMMU mode: the host MMU's metrics).
MULTI: dict[str, float] = {
    "multi.gpus": 2,
    "gpu0.insts": 1000,
    "gpu1.insts": 3000,
    "gpu0.far_faults": 10,
    "gpu1.far_faults": 30,
    "gpu0.far_faults_pki": 10.0,
    "gpu1.far_faults_pki": 10.0,
    "gpu0.l1tlb.misses": 50,
    "gpu1.l1tlb.misses": 70,
    "gpu0.l2tlb.accesses": 50,
    "gpu1.l2tlb.accesses": 70,
    "gpu0.l2tlb.misses": 20,
    "gpu1.l2tlb.misses": 60,
    "gpu0.l2tlb.mpki": 20.0,
    "gpu1.l2tlb.mpki": 20.0,
    "gpu0.remote_accesses": 5,
    "gpu1.remote_accesses": 15,
    "multi.insts": 4000,
    "multi.far_faults": 40,
    "multi.far_faults_pki": 10.0,
    "multi.l2tlb.mpki": 20.0,
    "multi.remote_accesses": 20,
    "multi.local_accesses": 60,
    "multi.remote_fraction": 0.25,
    "multi.migrations": 12,
    "multi.migrations.h2d": 8,
    "multi.migrations.p2p": 4,
    "multi.migrations.counter": 2,
    "multi.replications": 1,
    "multi.bytes_h2d": 8 * 4096,
    "multi.bytes_p2p": 5 * 4096,
    "multi.invalidations.sent": 10,
    "multi.invalidations.necessary": 6,
    "multi.invalidations.unnecessary": 3,
    "host_mmu.tlb.accesses": 42,
    "host_mmu.tlb.hits": 30,
    "host_mmu.tlb.mshr_hits": 2,
    "host_mmu.tlb.misses": 10,
    "host_mmu.walker.walks": 10,
    # The multi-GPU model moves pages itself: the one-GPU link identities do not apply.
    "link.h2d.bytes": 0,
    "host.memcpy_h2d_bytes": 0,
    "uvm.bytes_h2d": 4096,
}


def test_parse_metrics() -> None:
    out = "warning: something\ntime.total_ns = 123.5\nuvm.batches = 4\nnot = a number\n"
    assert stress.parse_metrics(out) == {"time.total_ns": 123.5, "uvm.batches": 4.0}


@pytest.mark.parametrize("metrics", [ONE_GPU, NO_EVICTION, MULTI, {}], ids=["one-gpu", "no-eviction", "multi", "empty"])
def test_consistent_runs_pass(metrics: dict[str, float]) -> None:
    assert stress.check_invariants(metrics) == []


def test_rounding_is_tolerated() -> None:
    # Stage times are picosecond sums divided by 1000: the float sum may differ in the last bits.
    m = ONE_GPU | {
        "uvm.stage.fetch_ns": 0.1,
        "uvm.stage.fault_ns": 0.2,
        "uvm.stage.replay_ns": 60.2,
        "uvm.time_ns": 60.5,
    }
    assert stress.check_invariants(m) == []


# One change per identity class, and the text its violation names.
BROKEN = [
    (ONE_GPU, {"gpu0.l1tlb.hits": 701}, "gpu0.l1tlb.accesses = hits + mshr_hits + misses"),
    (ONE_GPU, {"gpu0.l2tlb.hit_rate": 0.5}, "gpu0.l2tlb.hit_rate = hits / accesses"),
    (ONE_GPU, {"gpu0.l1d.writebacks": 1}, "gpu0.l1d.writebacks = 0"),
    (ONE_GPU, {"gpu0.translations": 999}, "gpu0.translations = gpu0.l1tlb.accesses"),
    (ONE_GPU, {"uvm.faults.retried": 31}, "l2tlb.accesses = l1tlb.misses + uvm.faults.retried"),
    (ONE_GPU, {"gpu0.walker.walks_in_flight_mean": 0.3}, "walks_in_flight_mean = busy_ns / time.total_ns"),
    (ONE_GPU, {"gpu0.walker.pte_reads_per_walk": 1.8}, "pte_reads_per_walk = pte_reads / walks"),
    (ONE_GPU, {"gpu0.walker.reads.4": 11}, "gpu0.walker.walks = sum of reads.{N}"),
    (ONE_GPU, {"gpu0.walker.reads.1": 59, "gpu0.walker.reads.2": 21}, "pte_reads = sum of N * reads.{N}"),
    (ONE_GPU, {"gpu0.dram.bytes": 12 * 100 + 170 * 64}, "gpu0.dram.bytes = (reads + writes) * line_bytes"),
    (ONE_GPU, {"time.memcpy_d2h_ns": 1001.0}, "time.memcpy_ns = h2d + d2h"),
    (ONE_GPU, {"host.memcpy_bytes": 8192}, "host.memcpy_bytes = h2d + d2h"),
    (ONE_GPU, {"uvm.faults.unfetched": 4}, "uvm.faults.raw = fetched + flushed + unfetched"),
    (ONE_GPU, {"uvm.faults_per_batch": 12.5}, "uvm.faults_per_batch = fetched / batches"),
    (ONE_GPU, {"uvm.faults.duplicate": 2, "uvm.faults.fetch_merged": 3}, "uvm.faults.fetch_merged <= duplicate"),
    (
        ONE_GPU,
        {"uvm.prefetch_async.bytes_h2d": 30 * 4096, "uvm.access_counters.bytes_h2d": 11 * 4096},
        "<= uvm.bytes_h2d",
    ),
    (ONE_GPU, {"uvm.prefetch_async.evictions": 2}, "uvm.prefetch_async.evictions <= uvm.evictions"),
    (ONE_GPU, {"uvm.stage.replay_ns": 31.0}, "uvm.time_ns = sum of uvm.stage.*_ns"),
    (ONE_GPU, {"uvm.prefetched_pages": 16}, "uvm.prefetched_pages = uvm.prefetch.pages"),
    (ONE_GPU, {"uvm.prefetch.used": 10}, "uvm.prefetch.pages = used + wasted"),
    (ONE_GPU, {"uvm.prefetch.evicted_unused": 7}, "uvm.prefetch.evicted_unused <= wasted"),
    (ONE_GPU, {"uvm.bytes_d2h": 8 * 4096, "link.d2h.bytes": 13 * 4096}, "uvm.bytes_d2h = (pages_evicted"),
    (ONE_GPU, {"uvm.host.bytes_d2h": 4096, "link.d2h.bytes": 10 * 4096}, "uvm.host.bytes_d2h = pages_d2h * 4096"),
    (ONE_GPU, {"link.h2d.bytes": 8192 + 41 * 4096}, "link.h2d.bytes = host.memcpy_h2d_bytes + uvm.bytes_h2d"),
    (ONE_GPU, {"uvm.read_dup.host_copies": 0}, "link.d2h.bytes = host.memcpy_d2h_bytes + uvm.bytes_d2h"),
    (NO_EVICTION, {"uvm.resident_pages": 41}, "uvm.resident_pages = faults.unique + prefetch.pages"),
    (ONE_GPU, {"uvm.replays": 2}, "uvm.replays = one per batch"),
    (ONE_GPU, {"baseline.slowdown_vs_copy": 2.1}, "baseline.slowdown_vs_copy"),
    (ONE_GPU, {"baseline.slowdown_vs_ideal": 2.0}, "baseline.slowdown_vs_ideal"),
    (MULTI, {"multi.insts": 4001}, "multi.insts = sum of gpu*.insts"),
    (MULTI, {"gpu1.far_faults_pki": 11.0}, "gpu1.far_faults_pki"),
    (MULTI, {"gpu0.l2tlb.mpki": 21.0}, "gpu0.l2tlb.mpki"),
    (MULTI, {"multi.far_faults": 41, "host_mmu.tlb.accesses": 43}, "multi.far_faults = sum of gpu*.far_faults"),
    (MULTI, {"multi.l2tlb.mpki": 19.0}, "multi.l2tlb.mpki"),
    (MULTI, {"multi.remote_accesses": 21, "multi.remote_fraction": 21 / 81}, "multi.remote_accesses = sum"),
    (MULTI, {"multi.remote_fraction": 0.3}, "multi.remote_fraction = remote / (remote + local)"),
    (MULTI, {"multi.migrations": 13}, "multi.migrations = h2d + p2p"),
    (MULTI, {"multi.migrations.counter": 5, "host_mmu.tlb.accesses": 45}, "multi.migrations.counter <= migrations.p2p"),
    (MULTI, {"multi.bytes_h2d": 7 * 4096}, "multi.bytes_h2d = 4096 * migrations.h2d"),
    (MULTI, {"multi.bytes_p2p": 4 * 4096}, "multi.bytes_p2p = 4096 * (migrations.p2p + replications)"),
    (MULTI, {"multi.invalidations.unnecessary": 5}, "multi.invalidations.sent >= necessary + unnecessary"),
    (MULTI, {"host_mmu.tlb.accesses": 40, "host_mmu.tlb.hits": 28}, "host_mmu.tlb.accesses = multi.far_faults"),
    (MULTI, {"gpu1.l2tlb.accesses": 71}, "l2tlb.accesses = l1tlb.misses + uvm.faults.retried"),
]


@pytest.mark.parametrize(("base", "change", "expected"), BROKEN, ids=[b[2] for b in BROKEN])
def test_each_identity_is_checked(base: dict[str, float], change: dict[str, float], expected: str) -> None:
    violations = stress.check_invariants(base | change)
    assert any(expected in v for v in violations), violations


def test_identity_needs_its_metrics() -> None:
    # A metric the run does not export (another mode's) leaves its identities unchecked.
    m = {k: v for k, v in ONE_GPU.items() if k != "uvm.faults.unfetched"} | {"uvm.faults.raw": 1}
    assert not any("uvm.faults.raw" in v for v in stress.check_invariants(m))


def test_multi_gpu_skips_one_gpu_link_identity() -> None:
    # The one-GPU link identity would fail on MULTI's link bytes; the multi-GPU model is exempt.
    assert stress.check_invariants(MULTI) == []
    assert stress.check_invariants({k: v for k, v in MULTI.items() if k != "multi.gpus"}) != []


def test_narrowed_identities() -> None:
    # Without an L2 TLB (gtx480-zheng: gpu.l2tlb.entries = 0) its metrics are all 0: L1 misses go to the walker.
    no_l2 = {"gpu0.l2tlb.accesses": 0, "gpu0.l2tlb.hits": 0, "gpu0.l2tlb.mshr_hits": 0, "gpu0.l2tlb.misses": 0}
    assert stress.check_invariants(ONE_GPU | no_l2 | {"gpu0.l2tlb.hit_rate": 0.0}) == []
    # In IOMMU mode the APU's page requests map the resident pages; the driver services none.
    apu = NO_EVICTION | {"uvm.faults.unique": 0, "uvm.prefetch.pages": 0, "uvm.prefetched_pages": 0}
    apu |= {"uvm.prefetch.used": 0, "uvm.prefetch.wasted": 0, "uvm.prefetch.evicted_unused": 0}
    assert stress.check_invariants(apu)
    assert stress.check_invariants(apu | {"apu.pages_mapped": 40}) == []


def test_page_request_time_is_bounded_by_the_run_and_the_latencies() -> None:
    # 4 requests of 30 us mean latency: at most 120 us outstanding, and at most the run's 200 us.
    apu = NO_EVICTION | {"uvm.faults.unique": 0, "uvm.prefetch.pages": 0, "uvm.prefetched_pages": 0}
    apu |= {"uvm.prefetch.used": 0, "uvm.prefetch.wasted": 0, "uvm.prefetch.evicted_unused": 0, "apu.pages_mapped": 40}
    apu |= {"apu.faults": 4, "apu.fault_latency_ns.mean": 30000.0}
    assert stress.check_invariants(apu | {"apu.time_ns": 120000.0}) == []
    assert any("apu.time_ns" in v for v in stress.check_invariants(apu | {"apu.time_ns": 120001.0}))
    assert any("apu.time_ns" in v for v in stress.check_invariants(apu | {"apu.faults": 40, "apu.time_ns": 200001.0}))


def test_replay_count_follows_the_replay_policy() -> None:
    # ONE_GPU has 4 batches. "once" replays only when the buffer is drained (fewer), "block" after each VA
    # block (more): edge_sweep.py found 68 finished runs of those policies flagged by the one-per-batch rule.
    fewer, more = ONE_GPU | {"uvm.replays": 1}, ONE_GPU | {"uvm.replays": 9}
    assert any("uvm.replays" in v for v in stress.check_invariants(fewer))
    assert any("uvm.replays" in v for v in stress.check_invariants(more, "batch"))
    assert not any("uvm.replays" in v for v in stress.check_invariants(fewer, "once"))
    assert not any("uvm.replays" in v for v in stress.check_invariants(more, "block"))
    assert any("uvm.replays" in v for v in stress.check_invariants(more, "once"))
    assert any("uvm.replays" in v for v in stress.check_invariants(fewer, "block"))
