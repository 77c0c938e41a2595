"""`uvmsim bench --quick` runs every bench workload and reports sane throughput."""

from __future__ import annotations

import json

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
