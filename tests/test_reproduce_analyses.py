"""The experiment analyses of `uvmsim.reproduce` on hand-made metrics: each test replaces `Context.run` with
made-up results (no simulation) and checks the values an analysis reports against arithmetic done by hand.

Written for the mutation audit of reproduce.py (docs/testing.md): each test fails on a plausible fault in the
analysis (a bound `<` for `<=`, a wrong denominator, a mean for a geomean, a dropped term, a swapped key), most
of them faults that every earlier test let pass; the vecadd-probe and batch-composition ones check by hand, in
no time, what the simulated runs of tests/test_reproduce.py check."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from uvmsim import reproduce as rep


class Fake:
    """A run's result: its metrics, its batches table (if any) and its configuration."""

    def __init__(
        self,
        metrics: Mapping[str, float] | None = None,
        batches: list[dict[str, float]] | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.metrics = dict(metrics or {})
        self.tables = {} if batches is None else {"batches": pd.DataFrame(batches)}
        self.config = config or {}


def fake_runs(
    monkeypatch: pytest.MonkeyPatch, runs: Mapping[str, Fake] | Callable[[str], Fake]
) -> list[tuple[str, dict[str, Any]]]:
    """Replace `Context.run` with the made-up results `runs` (by run name); returns the runs asked for."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def run(self: rep.Context, name: str, set: Mapping[str, Any], preset: str | None = None) -> Fake:
        calls.append((name, dict(set)))
        return runs(name) if callable(runs) else runs[name]

    monkeypatch.setattr(rep.Context, "run", run)
    return calls


def context(tmp_path: Path, id: str, params: dict[str, Any]) -> rep.Context:
    return rep.Context(spec=rep.load_spec(id), params=params, out=tmp_path)


def suite(monkeypatch: pytest.MonkeyPatch, names: list[str]) -> None:
    """The suite experiments' workloads: `names`, with no settings of their own."""
    monkeypatch.setattr(rep, "load_suite", lambda ctx: [(n, {}) for n in names])


# --- tolerances and comparison -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tol", "published", "simulated", "ok"),
    [
        # 10% of 100 is 10.0 exactly: 110 and 90 are on the bound, inside it.
        ("10%", 100, 110.0, True),
        ("10%", 100, 90.0, True),
        ("10%", 100, 110.5, False),
        # A negative published number: 10% of |-100| = 10, so -109 is in and -111 out.
        ("10%", -100, -109.0, True),
        ("10%", -100, -111.0, False),
        # A band includes both ends.
        ("5..30", "5-30", 5.0, True),
        ("5..30", "5-30", 30.0, True),
        ("5..30", "5-30", 17.0, True),
        ("5..30", "5-30", 4.99, False),
        ("5..30", "5-30", 30.01, False),
        (">=10", "x", 10.0, True),
        (">=10", "x", 9.99, False),
    ],
)
def test_tolerance_bounds_are_inclusive(tol: str, published: float | str, simulated: float, ok: bool) -> None:
    pred = rep.parse_tolerance(tol)
    assert pred is not None and pred(published, simulated) is ok
    # compare gives the same verdict.
    [row] = rep.compare([rep.Check("m", published, "", tol, "")], {"m": simulated})
    assert row.status == ("PASS" if ok else "FAIL")


# --- apu-walk-concurrency ----------------------------------------------------------------------------


def test_knee_bound_is_inclusive_and_counts_are_sorted() -> None:
    # factor 1.5 of L(1) = 100 is 150 exactly: N = 2 at 150 is still within it, 151 at N = 4 is not.
    assert rep.knee({1: 100.0, 2: 150.0, 4: 151.0}, 1.5) == (2, 4)
    # The counts in any order: L(1) = 100 is the base (bound 150), 110 and 120 stay under, 300 at N = 8 does not.
    assert rep.knee({8: 300.0, 1: 100.0, 4: 120.0, 2: 110.0}, 1.5) == (4, 8)


def test_walk_concurrency_rise_is_over_the_one_work_item_latency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Line runs: 1000 ns, 0 misses. Page runs of N work-items: 100 * N misses (100 wavefront misses) and
    # 1000 + 100 * L(N) ns, so the latency per wavefront miss is L(N): 10, 12 and 20 ns at N = 1, 2, 4.
    lat = {1: 10.0, 2: 12.0, 4: 20.0}

    def run(name: str) -> Fake:
        n = int(name.split("-n")[1].split("-")[0])
        if name.endswith("-line"):
            return Fake({rep.KERNEL_NS: 1000.0, rep.GPU_LLT_MISSES: 0.0})
        return Fake({rep.KERNEL_NS: 1000.0 + 100.0 * lat[n], rep.GPU_LLT_MISSES: 100.0 * n})

    fake_runs(monkeypatch, run)
    params = {
        "knee_factor": 1.5,
        "series": [{"name": "s"}],
        "work_items": [1, 2, 4],
        "accesses": 1,
        "line_stride_bytes": 64,
        "page_stride_bytes": 4096,
    }
    out = rep.REGISTRY["apu-walk-concurrency"](context(tmp_path, "apu-walk-concurrency", params))
    # Bound 1.5 * 10 = 15: N = 2 (12) is the knee, N = 4 (20) the next; the rise is 20 / L(1) = 2, not 20 / 12.
    assert out == {"knee_work_items.s": 2, "rise_after_knee.s": 2.0, "latency_ns_1.s": 10.0}


def test_apu_fault_throughput_and_shootdown_ratios(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 32 faults in 1 ms: 32 per ms; 64 faults in 4 ms: 16 per ms. The 64/32 ratio is 0.5.
    burst = {"faults-32": (32.0, 1e6, 5000.0), "faults-64": (64.0, 4e6, 9000.0)}

    def fault_run(name: str) -> Fake:
        faults, ns, lat = burst[name]
        return Fake({"apu.faults": faults, "time.kernel_ns": ns, "apu.fault_latency_ns.mean": lat})

    fake_runs(monkeypatch, fault_run)
    out = rep.REGISTRY["apu-fault-latency"](context(tmp_path, "apu-fault-latency", {"concurrency": [32, 64]}))
    assert out == {
        "latency_us.32": 5.0,
        "throughput_per_ms.32": 32.0,
        "latency_us.64": 9.0,
        "throughput_per_ms.64": 16.0,
        "throughput_ratio.64_over_32": 0.5,
    }
    # The slow host's latency over the fast one's: 6 µs / 4 µs.
    lat = {"3.7GHz": 4000.0, "1.7GHz": 6000.0}
    fake_runs(
        monkeypatch,
        lambda name: Fake(
            {"apu.faults": 1.0, "time.kernel_ns": 1.0, "apu.fault_latency_ns.mean": lat[name.split("-")[2]]}
        ),
    )
    out = rep.REGISTRY["apu-fault-cpu-freq"](context(tmp_path, "apu-fault-cpu-freq", {"concurrency": [1]}))
    assert out == {"latency_ratio.1": 1.5}
    # Shootdowns: single 1000 ns (init 100, IOMMU 200, GPU 600, final 100), all 3000 ns.
    phases = {"single": (1000.0, 100.0, 200.0, 600.0, 100.0), "all": (3000.0, 100.0, 1000.0, 1800.0, 100.0)}

    def shootdown_run(name: str) -> Fake:
        keys = ("latency_ns", "init_ns", "iommu_ns", "gpu_ns", "final_ns")
        return Fake({f"iommu.shootdown.{k}.mean": v for k, v in zip(keys, phases[name], strict=True)})

    fake_runs(monkeypatch, shootdown_run)
    out = rep.REGISTRY["apu-shootdown"](context(tmp_path, "apu-shootdown", {}))
    assert (out["single.gpu_over_iommu"], out["all_over_single"]) == (3.0, 3.0)  # 600 / 200, 3000 / 1000
    assert out["all.iommu_ns"] == 1000.0


# --- mgpusim-tlb -------------------------------------------------------------------------------------


def test_mgpusim_tlb_sums_every_gpu_and_each_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Trace t: two GPUs replayed one at a time. Trace u: one GPU, and one tie-seed run (the cycle engine's
    # seeded same-cycle order, single-GPU traces only).
    def tlb(l1h: float, l1m: float, l1s: float, l2h: float, l2m: float, l2s: float) -> Fake:
        keys = ("l1tlb.hits", "l1tlb.misses", "l1tlb.mshr_hits", "l2tlb.hits", "l2tlb.misses", "l2tlb.mshr_hits")
        return Fake({f"gpu0.{k}": v for k, v in zip(keys, (l1h, l1m, l1s, l2h, l2m, l2s), strict=True)})

    runs = {"t-gpu1": tlb(100, 10, 1, 50, 5, 2), "t-gpu2": tlb(200, 20, 3, 60, 7, 4)}
    runs |= {"u-gpu1": tlb(300, 0, 0, 0, 0, 0), "u-tie7": tlb(310, 0, 0, 0, 0, 0)}
    calls = fake_runs(monkeypatch, runs)
    monkeypatch.setattr(rep, "traces_dir", lambda: tmp_path)
    params = {"traces": [{"name": "t", "gpus": 2}, {"name": "u", "gpus": 1, "tie_seeds": [7]}]}
    out = rep.REGISTRY["mgpusim-tlb"](context(tmp_path, "mgpusim-tlb", params))
    assert [name for name, _ in calls] == ["t-gpu1", "t-gpu2", "u-gpu1", "u-tie7"]
    assert [s["workload.trace.gpu"] for _, s in calls[:3]] == [1, 2, 1]
    assert {k: v for k, v in out.items() if k.endswith(".t")} == {
        "l1_hits.t": 300.0,  # 100 + 200
        "l1_miss_plus_mshr_hit.t": 34.0,  # (10 + 1) + (20 + 3)
        "l2_hits.t": 110.0,  # 50 + 60
        "l2_miss_plus_mshr_hit.t": 18.0,  # (5 + 2) + (7 + 4)
    }
    # The spread holds the seedless run's 300 with the tie run's 310.
    assert (out["l1_hits_tie_min.u"], out["l1_hits_tie_max.u"]) == (300.0, 310.0)


# --- uvm-driver (Allen) ------------------------------------------------------------------------------


def batch(**kw: float) -> dict[str, float]:
    """One row of a run's batches table: `kw` over zeros."""
    cols = ("batch", "fetched", "fetch_merged", "reads", "writes", "prefetches", "unique", "flushed", "va_blocks")
    cols += ("start_ns", "end_ns", "push_ns", "copy_ns", "bytes_h2d", "unmap_ns", "tracker_ns", "transfer_ns")
    return {**dict.fromkeys(cols, 0.0), **kw}


def test_vecadd_probe_counts_reads_before_the_first_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = [batch(fetched=5, reads=3), batch(fetched=4, reads=4), batch(fetched=3, reads=2, writes=1)]
    pre = [batch(fetched=7, reads=7)]
    fake_runs(monkeypatch, {"vecadd": Fake(batches=plain), "vecadd-prefetch": Fake(batches=pre)})
    out = rep.REGISTRY["allen-vecadd-probe"](context(tmp_path, "allen-vecadd-probe", {}))
    # The first write is in batch 2: the reads before it are 3 + 4 = 7, in 2 batches.
    assert out == {
        "first_batch_faults": 5,
        "reads_before_first_write": 7,
        "batches_before_first_write": 2,
        "first_batch_faults_prefetch": 7,
    }


def test_per_sm_per_batch_counts_by_hand() -> None:
    batches = [batch(fetched=10, fetch_merged=2), batch(fetched=6)]
    # 2 SMs, 2 batches: (10 - 2 + 6) / 2 / 2 = 3.5 after merging, (10 + 6) / 2 / 2 = 4 fetched.
    assert rep._coalesced_per_sm(batches, 2) == 3.5
    assert rep._per_sm_per_batch(batches, 2, lambda b: b["fetched"]) == 4.0
    assert math.isnan(rep._per_sm_per_batch([], 2, lambda b: b["fetched"]))


def test_batch_composition_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 4 SMs, 2 batches each run: 12 + 4 fetched, 2 merged, 6 + 2 unique pages, 3 + 6 VA blocks.
    rows = [batch(fetched=12, fetch_merged=2, unique=6, va_blocks=3), batch(fetched=4, unique=2, va_blocks=6)]
    fake_runs(monkeypatch, lambda name: Fake(batches=rows, config={"gpu": {"sms": 4}}))
    params = {"threads": 1, "threads_per_cta": 1, "sensitivity_threads": 1, "sensitivity_ctas": []}
    params["info_cases"] = [{"name": "dup", "set": {"workload.kind": "stream"}}]
    out = rep.REGISTRY["allen-batch-composition"](context(tmp_path, "allen-batch-composition", params))
    assert out["regular.faults_per_sm_per_batch"] == 1.75  # (10 + 4) / 2 / 4
    assert out["dup.fetched_per_sm_per_batch"] == 2.0  # (12 + 4) / 2 / 4
    assert out["dup.unique_per_sm_per_batch"] == 1.0  # (6 + 2) / 2 / 4
    assert out["random.va_blocks_per_batch"] == 4.5  # (3 + 6) / 2 batches


def test_base_cost_fetch_share_is_of_the_batches_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = {"time.kernel_ns": 500_000.0, "uvm.time_ns": 200_000.0, "uvm.stage.fetch_ns": 50_000.0, "uvm.batches": 3}
    calls = fake_runs(monkeypatch, lambda name: Fake(m))
    out = rep.REGISTRY["allen-base-cost"](context(tmp_path, "allen-base-cost", {"sizes_kib": [2, 8]}))
    # 50 µs of fetch in 200 µs of batches (not in the 500 µs kernel); 2 KiB is one page, 8 KiB two.
    assert out == {"kernel_us.2KiB": 500.0, "fetch_share.2KiB": 0.25, "kernel_us.8KiB": 500.0, "fetch_share.8KiB": 0.25}
    assert [s["workload.regular.threads"] for _, s in calls] == [1, 2]


def test_batch_size_checks_take_the_worst_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Kernel ns by (n, batch size): n = 1 is 0.8x at 1024 over 256 and 6% faster at 6144 than 1024;
    # n = 2 is 0.9x and 2% slower.
    times = {(1, 256): 1250.0, (1, 1024): 1000.0, (1, 6144): 940.0, (2, 256): 1000.0, (2, 1024): 900.0}
    times[(2, 6144)] = 918.0

    def run(name: str) -> Fake:
        n, b = (int(x) for x in name.removeprefix("n").split("-batch-"))
        m = {"time.kernel_ns": times[(n, b)], "uvm.faults.unique": 12.0, "uvm.batches": 4.0}
        return Fake({**m, "uvm.faults.duplicate": 0.0})

    fake_runs(monkeypatch, run)
    params = {"kernel": "k", "sizes": [1, 2], "size_key": "workload.x.n", "batch_sizes": [256, 1024, 6144]}
    out = rep.REGISTRY["allen-batch-size"](context(tmp_path, "allen-batch-size", params))
    assert out["time_ratio.1024_over_256"] == pytest.approx(0.9)  # max(0.8, 0.9)
    assert out["time_change.6144_vs_1024"] == pytest.approx(0.06)  # max(|0.94 - 1|, |1.02 - 1|)
    assert out["time_change.6144_vs_1024.n2"] == pytest.approx(0.02)
    assert out["unique_per_batch.256.n1"] == 3.0  # 12 unique faults over 4 batches


def transfer_run(rows: list[dict[str, float]]) -> Callable[[str], Fake]:
    # Per push 1 µs, per page 0.05 µs (the defaults); 2 SMs.
    config = {"gpu": {"sms": 2}, "uvm": {"copy_push_us": 1.0, "copy_push_per_page_us": 0.05}}
    return lambda name: Fake(batches=rows, config=config)


def test_transfer_share_fractions_and_medians(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Four 10 µs batches, no pages: push shares 0.1, 0.25, 0.3, 0.2; link shares 0, 0.5, 0.1, 0.24.
    pushes, copies = (1000, 2500, 3000, 2000), (0, 5000, 1000, 2400)
    rows = [
        batch(batch=i, end_ns=10_000, push_ns=p, copy_ns=c, fetched=4, fetch_merged=i, va_blocks=i)
        for i, (p, c) in enumerate(zip(pushes, copies, strict=True))
    ]
    fake_runs(monkeypatch, transfer_run(rows))
    params = {"n_key": "workload.x.n", "n": 1}
    out = rep.REGISTRY["allen-transfer-share"](context(tmp_path, "allen-transfer-share", params))
    assert out["batches_under_25pct_transfer"] == 0.5  # 0.1 and 0.2 are under 0.25; 0.25 is not
    assert out["median_transfer_share"] == 0.25  # sorted 0.1, 0.2, 0.25, 0.3: the upper median
    assert out["batches_under_25pct_link"] == 0.75  # 0, 0.1, 0.24
    assert out["median_link_share"] == 0.24  # sorted 0, 0.1, 0.24, 0.5
    assert out["faults_per_sm_per_batch"] == 1.25  # (4 * 4 - (0 + 1 + 2 + 3)) / 4 batches / 2 SMs
    assert out["fetched_per_sm_per_batch"] == 2.0
    assert out["va_blocks_per_batch"] == 1.5
    # Under 0.9 at any per-page cost (the pages are none): no bound.
    assert math.isnan(out["push_per_page_us_bound"])


def test_transfer_share_per_page_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One batch, 100 pages, one push: 1000 + 100 * 50 = 6000 ns of push in 18 µs (12 µs besides the push).
    # At a per-page cost of x ns its share is (1000 + 100x) / (12000 + 1000 + 100x), under 0.25 while
    # 1000 + 100x < 4000, i.e. x < 30 ns: the bound is 0.02 µs (at 0.03 µs the share is 4000 / 16000 = 0.25).
    row = batch(end_ns=18_000, push_ns=6000, copy_ns=1000, bytes_h2d=100 * 4096, fetched=1)
    fake_runs(monkeypatch, transfer_run([row]))
    params = {"n_key": "workload.x.n", "n": 1}
    out = rep.REGISTRY["allen-transfer-share"](context(tmp_path, "allen-transfer-share", params))
    assert out["push_per_page_us_bound"] == 0.02
    assert out["batches_under_25pct_transfer"] == 0.0  # 6000 / 18000
    # Nine batches that push nothing and one always over: exactly 0.9 under meets the check at every cost.
    rows = [batch(batch=i, end_ns=10_000) for i in range(9)] + [batch(batch=9, end_ns=10_000, push_ns=6000)]
    fake_runs(monkeypatch, transfer_run(rows))
    out = rep.REGISTRY["allen-transfer-share"](context(tmp_path, "allen-transfer-share", params))
    assert (out["batches_under_25pct_transfer"], out["push_per_page_us_bound"]) == (0.9, 1.0)


def test_prefetch_reduction_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    none = {"uvm.faults.fetched": 400, "uvm.faults.unique": 200, "uvm.va_blocks": 50, "uvm.batches": 20}
    density = {"uvm.faults.fetched": 100, "uvm.faults.unique": 150, "uvm.va_blocks": 10, "uvm.batches": 5}
    density |= {"uvm.prefetch.pages": 0, "uvm.prefetch.used": 0}
    fake_runs(monkeypatch, {"k-none": Fake(none), "k-density": Fake(density)})
    params = {"cases": [{"name": "k", "set": {}}]}
    out = rep.REGISTRY["allen-prefetch-reduction"](context(tmp_path, "allen-prefetch-reduction", params))
    assert out == {
        "fault_reduction_pct.k": 75.0,  # 1 - 100 / 400
        "faults_without.k": 400,
        "faults_with.k": 100,
        "unique_fault_reduction_pct.k": 25.0,  # 1 - 150 / 200
        "faults_per_va_block_per_batch.k": 8.0,  # 400 faults over the demand run's 50 VA blocks
        "batch_reduction_pct.k": 75.0,  # 1 - 5 / 20
    }


def test_oversub_onset_growth_and_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = [30764, 33836, 38444, 47660]
    evicted = dict(zip(sizes, (0.0, 10.0, 40.0, 100.0), strict=True))
    # Kernel time 2 n^3 at the smallest size, 4 n^3 at the others: rate ratio 1, then 0.5.
    scale = 32

    def run(name: str) -> Fake:
        n = int(name.removeprefix("sgemm-"))
        ns = round(n / scale)
        t = (2 if n == sizes[0] else 4) * ns**3
        m = {"uvm.faults.fetched": 100.0, "uvm.pages_evicted": evicted[n], "uvm.evictions": evicted[n]}
        return Fake({**m, "time.kernel_ns": t})

    calls = fake_runs(monkeypatch, lambda name: run(name) if name.startswith("sgemm-") else Fake())
    params = {"scale": scale, "sizes": sizes, "n_key": "workload.x.n"}
    params |= {"published_faults": [1] * 4, "published_evicted": [1] * 4}
    spec = rep.load_spec("allen-oversub")
    out = rep.REGISTRY["allen-oversub"](context(tmp_path, "allen-oversub", params))
    # The first size that evicts; growth from it (0.1 per fault) to the largest at most 38,444 (0.4 per fault).
    assert out["onset_n"] == 33836
    assert out["evicted_per_fault_growth"] == pytest.approx(4.0)
    assert [out[f"rate_ratio.{n}"] for n in sizes] == [1.0, 0.5, 0.5, 0.5]
    # The memory is the preset's scaled by 1/32 in each of the two dimensions.
    memory = rep._bytes(rep.uvmsim.resolve(preset=spec.preset)["uvm"]["gpu_memory_bytes"]) // (scale * scale)
    assert {s["uvm.gpu_memory_bytes"] for _, s in calls} == {memory}
    assert [s["workload.x.n"] for _, s in calls] == [961, 1057, 1201, 1489]


def test_async_unmap_best_and_worst(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    times = {"0.0": (100.0, 90.0, 80.0, 95.0), "1.5": (200.0, 200.0, 190.0, 180.0)}
    trackers = {"default": 10.0, "sync-allocation": 10.0, "async-allocation": 8.0, "async-space": 5.0}

    def run(name: str) -> Fake:
        _, ratio, config = name.split("-", 2)
        t = times[ratio][list(rep.UNMAP_CONFIGS).index(config)]
        m = {"uvm.time_ns": t, "uvm.batches": 1, **{f"uvm.unmap.{k}": 0 for k in ("on_demand", "sync", "async")}}
        return Fake({**m, "uvm.unmap.waits": 0}, batches=[batch(tracker_ns=trackers[config])])

    fake_runs(monkeypatch, run)
    out = rep.REGISTRY["allen-async-unmap"](context(tmp_path, "allen-async-unmap", {"ratios": [0.0, 1.5]}))
    # Best async: 80 / 100 = 0.8 at 0, 180 / 200 = 0.9 at 1.5.
    assert out["reduction_pct.0.0"] == pytest.approx(20.0)
    assert out["reduction_pct.1.5"] == pytest.approx(10.0)
    assert out["max_reduction_pct"] == pytest.approx(20.0)
    assert out["worst_async_ratio"] == pytest.approx(0.9)
    assert out["tracker_ratio.async-space.0.0"] == 0.5  # 5 / 10
    assert out["uvm_time_ratio.async-allocation.1.5"] == 0.95


# --- zheng (suite means) -----------------------------------------------------------------------------


def test_means_and_walker_utilization_by_hand() -> None:
    assert rep._mean({"a": 1.0, "b": 4.0}) == 2.5
    assert rep._geomean({"a": 1.0, "b": 4.0}) == pytest.approx(2.0)  # sqrt(1 * 4)
    m = {"gpu0.walker.utilization": 0.2, "gpu1.walker.utilization": 0.4, "host_mmu.walker.utilization": 0.9}
    m |= {"iommu.walker.utilization": 0.7, "gpu0.walker.walks": 5.0}
    assert rep.walker_utilization(m) == pytest.approx((0.3, 0.9))  # the GPUs' (0.2 + 0.4) / 2, the host's
    assert rep.walker_utilization({}) == (0.0, 0.0)


def slowdowns(
    table: Mapping[str, Mapping[str, float]], key: str = "baseline.slowdown_vs_copy"
) -> Callable[[str], Fake]:
    """Runs named WORKLOAD-TAG with the slowdown table[TAG][WORKLOAD]."""

    def run(name: str) -> Fake:
        w, tag = name.split("-", 1)
        return Fake({key: table[tag][w]})

    return run


def test_zheng_blocking_and_pcie_util_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite(monkeypatch, ["a", "b"])
    table = {"20us": {"a": 1.0, "b": 9.0}, "5us": {"a": 2.0, "b": 2.0}}
    calls = fake_runs(monkeypatch, slowdowns(table))
    out = rep.REGISTRY["zheng-blocking"](context(tmp_path, "zheng-blocking", {"latencies_us": [20.0, 5.0]}))
    assert out == {
        "mean_slowdown.20us": 5.0,  # (1 + 9) / 2
        "max_slowdown.20us": 9.0,
        "geomean_slowdown.20us": pytest.approx(3.0),  # sqrt(1 * 9)
        "mean_slowdown.5us": 2.0,
        "max_slowdown.5us": 2.0,
        "geomean_slowdown.5us": pytest.approx(2.0),
    }
    assert [s["uvm.fault_latency_us"] for _, s in calls] == [20.0, 20.0, 5.0, 5.0]
    # Link utilisation in percent, averaged over the workloads: (25 + 75) / 2.
    util = {"a": 0.25, "b": 0.75}
    fake_runs(monkeypatch, lambda name: Fake({"link.h2d.utilization": util[name]}))
    out = rep.REGISTRY["zheng-pcie-util"](context(tmp_path, "zheng-pcie-util", {}))
    assert out == {"mean_utilization_pct": 50.0, "utilization_pct.a": 25.0, "utilization_pct.b": 75.0}


def test_zheng_replayable_mshr_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite(monkeypatch, ["a", "b", "c"])
    table = {"mshr1": {"a": 3.0, "b": 4.0, "c": 5.0}, "mshr4": {"a": 2.0, "b": 3.0, "c": 4.0}}
    table["mshr16"] = {"a": 2.0, "b": 1.0, "c": 3.0}
    fake_runs(monkeypatch, slowdowns(table))
    out = rep.REGISTRY["zheng-replayable-mshr"](context(tmp_path, "zheng-replayable-mshr", {"mshrs": [1, 4, 16]}))
    assert out["mean_slowdown.16"] == 2.0
    assert out["mshr4_over_mshr16"] == 1.5  # mean 3 over mean 2
    assert out["workloads_at_least_2x.16"] == 2  # 2.0 counts, as does 3.0
    assert out["max_slowdown.16"] == 3.0
    # The spec's published 16-workload means; 13 workloads unmodelled here: (16 * P - sum) / 13.
    published = {c.metric: c.published for c in rep.load_spec("zheng-replayable-mshr").checks}
    assert out["unmodelled_mean_needed.16"] == pytest.approx((16 * published["mean_slowdown.16"] - 6.0) / 13)


def test_zheng_prefetch_derived_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite(monkeypatch, ["a", "b"])
    # Geomeans (sqrt of the product): random 2, sequential 1, locality 0.5, oracle 0.25; none's 4.
    pairs = {"none": (2.0, 8.0), "random": (1.0, 4.0), "sequential": (0.5, 2.0), "locality": (0.25, 1.0)}
    pairs["oracle"] = (0.125, 0.5)
    table = {p: {"a": x, "b": y} for p, (x, y) in pairs.items()}
    fake_runs(monkeypatch, slowdowns(table))
    out = rep.REGISTRY["zheng-prefetch"](context(tmp_path, "zheng-prefetch", {"policies": list(pairs)}))
    assert out["geomean_slowdown.locality"] == pytest.approx(0.5)
    assert out["mean_slowdown.locality"] == pytest.approx(0.625)
    assert out["ranking_matches"] == 1.0
    assert out["locality_speedup_pct"] == pytest.approx(50.0)
    assert out["policies_beating_legacy"] == 2.0  # locality and oracle; sequential's 1.0 does not beat it
    assert out["locality_over_oracle_pct"] == pytest.approx(100.0)  # 0.5 / 0.25
    assert out["worst_best_gap_pct"] == pytest.approx(700.0)  # 2 / 0.25
    # The seed's order broken (random better than sequential): no match.
    table["random"] = {"a": 0.25, "b": 4.0}  # geomean 1, sequential's 1 is not below it
    table["sequential"] = {"a": 1.0, "b": 4.0}  # geomean 2
    out = rep.REGISTRY["zheng-prefetch"](context(tmp_path, "zheng-prefetch", {"policies": list(pairs)}))
    assert out["ranking_matches"] == 0.0


def test_zheng_prefetch_blocking_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite(monkeypatch, ["a"])
    slow = {"blocking": 1.5, "replayable": 0.75}

    def run(name: str) -> Fake:
        mode = name.split("-", 1)[1]
        m = {"baseline.slowdown_vs_copy": slow[mode], "baseline.slowdown_vs_ideal": 2 * slow[mode]}
        return Fake({**m, "baseline.ideal_overlap_ns": 600.0, "baseline.copy_then_execute_ns": 1000.0})

    fake_runs(monkeypatch, run)
    params = {"modes": ["blocking", "replayable"], "fault_limits": {"blocking": 1, "replayable": 16}}
    out = rep.REGISTRY["zheng-prefetch-blocking"](context(tmp_path, "zheng-prefetch-blocking", params))
    assert out["blocking_slowdown_pct"] == pytest.approx(50.0)
    assert out["replayable_speedup_pct"] == pytest.approx(25.0)
    assert out["blocking_over_replayable"] == pytest.approx(2.0)
    assert out["geomean_over_ideal.replayable"] == pytest.approx(1.5)
    assert out["geomean_ideal_over_copy"] == pytest.approx(0.6)


def test_zheng_latency_sensitivity_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite(monkeypatch, ["a", "b"])
    total = {"base": {"a": 100.0, "b": 100.0}, "scaled": {"a": 110.0, "b": 110.0}, "fixed_set": {"a": 150.0}}
    total["fixed_set"]["b"] = 150.0
    calls = fake_runs(monkeypatch, slowdowns(total, "time.total_ns"))
    params = {"base_latency_us": 20.0, "latency_us": 30.0, "base_set_pages": 80}
    out = rep.REGISTRY["zheng-latency-sensitivity"](context(tmp_path, "zheng-latency-sensitivity", params))
    assert out["slowdown_pct"] == pytest.approx(10.0)
    assert out["slowdown_pct.fixed_set"] == pytest.approx(50.0)
    assert out["set_pages.scaled"] == 120.0  # 80 pages * 30 / 20 µs
    assert {s["uvm.prefetch.transfer_set_pages"] for n, s in calls if n.endswith("-fixed_set")} == {80}


def test_zheng_eviction_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite(monkeypatch, ["xsbench", "b"])
    table = {
        "random-stop": {"xsbench": 5.0, "b": 3.0},  # mean 4
        "random-locality": {"xsbench": 3.0, "b": 2.0},  # mean 2.5
        "lru-stop": {"xsbench": 4.0, "b": 2.0},  # mean 3
        "lru-locality": {"xsbench": 2.0, "b": 1.0},  # mean 1.5
    }
    fake_runs(monkeypatch, slowdowns(table))
    params = {"evictions": ["random", "lru"], "when_full": ["stop", "locality"]}
    out = rep.REGISTRY["zheng-eviction"](context(tmp_path, "zheng-eviction", params))
    assert out["xsbench.random_over_lru"] == 1.25
    assert out["random_prefetch_gain"] == 1.6  # 4 / 2.5
    assert out["lru_gain.stop"] == pytest.approx(4 / 3)
    assert out["lru_gain.locality"] == pytest.approx(2.5 / 1.5)
    assert out["apps_random_within_25pct_of_lru"] == 1.0  # xsbench's 5 = 1.25 * 4 counts; b's 3 > 2.5 does not
    assert out["lru_locality_is_best"] == 1.0


def test_zheng_oversub_sweep_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite(monkeypatch, ["s", "o"])
    table = {"fit": {"s": 1.0, "o": 2.0}, "95pct": {"s": 2.0, "o": 2.0}, "50pct": {"s": 4.0, "o": 3.0}}
    fake_runs(monkeypatch, slowdowns(table))
    params = {"fractions": [0.5, 0.95], "streaming": ["s"]}
    out = rep.REGISTRY["zheng-oversub-sweep"](context(tmp_path, "zheng-oversub-sweep", params))
    assert out["loss_vs_fit.50"] == 2.75  # (4 / 1 + 3 / 2) / 2
    assert out["streaming_loss.50"] == 4.0  # s only: 4 / 1
    assert out["mean_slowdown_monotone"] == 1.0  # 95%: 2, then 50%: 3.5 as less fits
    # Equal means at 95% and 50% are still monotone (not falling).
    table["50pct"] = {"s": 2.0, "o": 2.0}
    out = rep.REGISTRY["zheng-oversub-sweep"](context(tmp_path, "zheng-oversub-sweep", params))
    assert out["mean_slowdown_monotone"] == 1.0


# --- li (multi-GPU) ----------------------------------------------------------------------------------


def test_li_least_tlb_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = {"a-base": 100.0, "a-least": 50.0, "a-ideal": 25.0, "b-base": 100.0, "b-least": 100.0, "b-ideal": 50.0}

    def run(name: str) -> Fake:
        m = {"time.kernel_ns": kernel[name], "iommu.tlb.hit_rate": 0.5, "iommu.walker.walks": 1.0}
        m |= {f"multi.least_tlb.{k}": 1.0 for k in ("remote_hits", "false_positive_rate")}
        return Fake({**m, "multi.least_tlb.false_positives": 1.0, "multi.least_tlb.absent_tests": 4.0})

    fake_runs(monkeypatch, run)
    params = {"workloads": [{"name": "a", "set": {}}, {"name": "b", "set": {}}]}
    out = rep.REGISTRY["li-least-tlb"](context(tmp_path, "li-least-tlb", params))
    assert out["mean_speedup"] == 1.5  # (2 + 1) / 2, without the ideal runs' 4 and 2
    assert out["geomean_speedup"] == pytest.approx(math.sqrt(2))
    assert out["mean_ideal_speedup"] == 3.0
    assert out["apps_faster"] == 1.0  # b's 1.0 is not faster
    assert out["false_positive_rate"] == 0.25  # 2 false positives in 8 absent tests


def test_least_tlb_mixes_read_each_gpus_alone_ipc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Alone IPC by (app, GPU): x 2 at GPU 0, 4 at GPU 1; y 1 at GPU 0, 5 at GPU 1. In both mixes every app
    # runs at IPC 1 in the baseline and 2 with Least-TLB.
    alone = {("x", 0): 2.0, ("x", 1): 4.0, ("y", 0): 1.0, ("y", 1): 5.0}

    def run(name: str) -> Fake:
        if name.startswith("alone-"):
            _, kind, gpu = name.split("-")
            g = int(gpu.removeprefix("gpu"))
            return Fake({f"app{g}.ipc": alone[(kind, g)], "app0.ipc": 99.0 if g else alone[(kind, g)]})
        ipc = 2.0 if name.endswith("-least") else 1.0
        rates = ("iommu.tlb_hit_rate", "iommu.remote_hit_rate", "l2tlb.hit_rate")
        return Fake({f"app{g}.{k}": v for g in (0, 1) for k, v in (("ipc", ipc), *((r, 0.5) for r in rates))})

    calls = fake_runs(monkeypatch, run)
    params = {"workloads": [], "mixes": [{"name": "m1", "apps": ["x", "y"]}, {"name": "m2", "apps": ["y", "x"]}]}
    out = rep._least_tlb_mixes(context(tmp_path, "li-least-tlb", params))
    assert sorted(n for n, _ in calls if n.startswith("alone-")) == ["alone-x-gpu0", "alone-x-gpu1"] + [
        "alone-y-gpu0",
        "alone-y-gpu1",
    ]
    # m1: WS base 1/2 + 1/5 = 0.7, Least-TLB 1.4: +100%. m2 the same in ratio: +100% whatever the alone IPCs.
    assert out["ws_improvement_pct.m1"] == pytest.approx(100.0)
    assert out["mean_ws_improvement_pct"] == pytest.approx(100.0)
    table = (tmp_path / "mixes.csv").read_text().splitlines()
    head = table[0].split(",")
    rows = [dict(zip(head, line.split(","), strict=True)) for line in table[1:]]
    assert [(r["mix"], r["app"], r["alone_ipc"], r["base_ws"]) for r in rows] == [
        ("m1", "x", "2", "0.7"),
        ("m1", "y", "5", "0.7"),
        ("m2", "y", "1", "1.25"),  # 1/1 + 1/4
        ("m2", "x", "4", "1.25"),
    ]


def test_weighted_speedup_needs_applications() -> None:
    with pytest.raises(ValueError, match="same applications"):
        rep.weighted_speedup({}, {})


def test_li_idyll_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Kernel ns per scheme: directory and lazy both 80 (25% better), both 50, zero latency 40.
    kernel = {"base": 100.0, "directory": 80.0, "lazy": 80.0, "both": 50.0, "zero_latency": 40.0}
    sent = {"base": 100.0, "directory": 40.0, "lazy": 100.0, "both": 30.0, "zero_latency": 100.0}

    def run(name: str) -> Fake:
        k = name.split("-", 1)[1]
        m = {"time.kernel_ns": kernel[k], "multi.invalidations.sent": sent[k], "gpu0.walker.utilization": 0.5}
        m |= {"multi.invalidations.unnecessary": 10.0 if k == "directory" else 20.0}
        return Fake({**m, "multi.idyll.irmb.hits": 0.0, "multi.idyll.irmb.merges": 0.0})

    fake_runs(monkeypatch, run)
    out = rep.REGISTRY["li-idyll"](context(tmp_path, "li-idyll", {"workloads": [{"name": "a", "set": {}}]}))
    assert out["mean_improvement_pct.both"] == pytest.approx(100.0)  # 100 / 50 - 1
    assert out["mean_improvement_pct.directory"] == pytest.approx(25.0)
    assert out["ordering"] == 0.0  # directory = lazy: not strictly ordered
    assert out["unnecessary_fraction.directory"] == 0.25  # the directory runs' 10 of 40 sent


def test_translated_l2_misses_may_be_none() -> None:
    # As many ATS requests as far faults (10 + 5 duplicates): no translated miss, and no error.
    m = {"iommu.ats_requests": 15, "multi.far_faults": 10, "multi.far_faults.duplicate": 5}
    assert rep.translated_l2_misses(m) == 0


def test_li_mpki_scales_gcn3_and_counts_only_counted_classes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Traced runs: 1000 model instructions for the apps' 4000 GCN3 ones (4 each); large runs: 2000 instructions,
    # so 8000 GCN3. Translated misses: ATS requests minus the 4 far faults.
    translated = {"A-traced": 8.0, "A": 4.0, "B-traced": 80.0, "B": 160.0}

    def run(name: str) -> Fake:
        m = {"multi.insts": 1000.0 if name.endswith("-traced") else 2000.0, "multi.gpus": 2}
        m |= {"iommu.ats_requests": translated[name] + 4, "multi.far_faults": 4.0, "multi.far_faults.duplicate": 0.0}
        return Fake({**m, "gpu0.l2tlb.misses": 1.0, "gpu1.l2tlb.misses": 2.0})

    fake_runs(monkeypatch, run)
    apps = [{"name": a, "traced": {}, "set": {}, "gcn3_insts": 4000} for a in ("A", "B")]
    params = {"workloads": apps, "published": {"A": 0.5, "B": 50.0}, "counted": ["A"], "sizes": "large"}
    out = rep.REGISTRY["li-mpki"](context(tmp_path, "li-mpki", params))
    # A: traced 1000 * 8 / 4000 = 2 (H); large 1000 * 4 / 8000 = 0.5 (M), the published 0.5's class (M).
    # B: traced 1000 * 80 / 4000 = 20; large 1000 * 160 / 8000 = 20 (H), published 50 (H), but not counted.
    assert out == {"traced_mpki.A": 2.0, "mpki.A": 0.5, "traced_mpki.B": 20.0, "mpki.B": 20.0, "class_matches": 1.0}
    # At the traced inputs (no large runs) A's MPKI is 2 (H), not the published 0.5's class: no match.
    params["sizes"] = "traced"
    out = rep.REGISTRY["li-mpki"](context(tmp_path, "li-mpki", params))
    assert (out["mpki.A"], out["class_matches"]) == (2.0, 0.0)


def test_li_transfw_means_and_rates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two applications: MT 4x faster with Trans-FW, A 1x; every other scheme 1x.
    def run(name: str) -> Fake:
        app, scheme = name.split("-", 1)
        t = 25.0 if (app, scheme) == ("MT", "transfw") else 100.0
        m = {"time.kernel_ns": t, "multi.far_faults": 1.0, "multi.far_faults_pki": 1.0}
        prt = {"lookups": 10.0, "skipped_walks": 0.0, "false_positives": 2.0, "untrusted": 6.0}
        m |= {f"multi.transfw.prt.{k}": v for k, v in prt.items()}
        fw = ("host_queue_mean", "forwarded", "remote_hits", "host_walks_removed")
        m |= {f"multi.transfw.fw.{k}": 0.0 for k in fw}
        util = {"A": 0.2, "MT": 0.6}[app]
        return Fake({**m, "gpu0.walker.utilization": util, "gpu1.walker.utilization": util})

    fake_runs(monkeypatch, run)
    workloads = [{"name": n, "set": {}} for n in ("A", "MT")]
    out = rep.REGISTRY["li-transfw"](context(tmp_path, "li-transfw", {"workloads": workloads}))
    assert out["mean_speedup"] == 2.5  # (1 + 4) / 2
    assert out["geomean_speedup"] == pytest.approx(2.0)  # sqrt(1 * 4)
    assert out["mt_highest"] == 1.0
    # 2 false positives per app over 10 - 6 = 4 trusted lookups each: 4 / 8.
    assert out["prt_false_positive_rate"] == 0.5
    assert out["base_gmmu_walker_utilization"] == pytest.approx(0.4)
    assert out["base_gmmu_walker_utilization_max"] == pytest.approx(0.6)
