"""`uvmsim bench --quick` runs every bench workload and reports sane throughput."""

from __future__ import annotations

import json

import uvmsim
from conftest import Cli
from uvmsim import bench


def test_bench_quick_json(cli: Cli) -> None:
    p = cli("bench", "--quick", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert [r["name"] for r in rows] == [w.name for w in bench.WORKLOADS]
    for r in rows:
        assert r["warp_mem_insts"] > 0 and r["wall_s"] > 0, r
        assert r["warp_mem_insts_per_s"] > 0 and r["peak_rss_kib"] > 0, r


def test_format_table_aligns_columns() -> None:
    rows = [
        bench.BenchRow("a", 10, 20, 0.5, 20.0, 40.0, 5.0, 1000),
        bench.BenchRow("bbbb", 1, 2, 1.0, 1.0, 2.0, 3.0, 2000),
    ]
    lines = bench.format_table(rows).splitlines()
    assert len(lines) == 3 and len({len(line) for line in lines}) == 1
    assert lines[0].startswith("workload")


def test_repeat_reports_the_median_run_of_the_chosen_workloads(cli: Cli) -> None:
    rows = bench.run_all(quick=True, repeat=3, only=["faults-apu", "stride-iommu"])
    # The bench's order, not the order asked for.
    assert [r.name for r in rows] == ["stride-iommu", "faults-apu"]
    for r in rows:
        assert len(r.wall_s_runs) == 3
        assert r.wall_s == sorted(r.wall_s_runs)[1]
        assert r.events_per_s == r.events / r.wall_s
    table = bench.format_table(rows).splitlines()
    assert "min-max s" in table[0] and len({len(line) for line in table}) == 1
    p = cli("bench", "--quick", "--only", "stride-iomu")
    assert p.returncode == 2 and "did you mean `stride-iommu`" in p.stderr, p.stderr


def test_rates_count_every_gpu_of_a_multi_gpu_run() -> None:
    m = {"gpu0.warp_mem_insts": 3, "gpu1.warp_mem_insts": 4, "gpu12.warp_mem_insts": 1, "gpu0.l1tlb.hits": 9}
    assert bench._all_gpus(m | {"multi.warp_mem_insts": 100, "gpu1.warp_mem_insts_x": 50}, "warp_mem_insts") == 8
    w = next(w for w in bench.WORKLOADS if w.name == "multi-gpu-pagerank")
    row = bench.run_one(w, quick=True)
    metrics = uvmsim.run(preset=w.preset, set=w.set | w.quick_set).metrics
    per_gpu = [metrics[f"gpu{g}.warp_mem_insts"] for g in range(4)]
    assert row.warp_mem_insts == sum(per_gpu) and min(per_gpu) > 0
