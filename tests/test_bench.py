"""`uvmsim bench --quick` runs every bench workload and reports sane throughput."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

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


def fake_runs(monkeypatch: pytest.MonkeyPatch, walls: list[float]) -> list[dict[str, Any]]:
    """Stand in for ``uvmsim.run``: run i takes ``walls[i]`` seconds and does (i + 1) units of work (so the
    row shows which run was picked); returns each run's settings."""
    calls: list[dict[str, Any]] = []

    def run(*, preset: str, set: dict[str, Any]) -> SimpleNamespace:
        n = len(calls) + 1
        calls.append(dict(set))
        metrics = {"sim.wall_s": walls[n - 1], "sim.events": 1000 * n, "gpu0.translations": 7 * n}
        return SimpleNamespace(metrics=metrics | {"gpu0.warp_mem_insts": 10 * n, "gpu1.warp_mem_insts": 1})

    monkeypatch.setattr(uvmsim, "run", run)
    return calls


def test_repeat_reports_the_lower_middle_run_by_time(monkeypatch: pytest.MonkeyPatch) -> None:
    w = next(w for w in bench.WORKLOADS if w.name == "stride-iommu")
    calls = fake_runs(monkeypatch, [0.4, 0.1, 0.3, 0.2])
    r = bench.run_one(w, quick=True, repeat=4)
    # By time: 0.1 (run 2), 0.2 (run 4), 0.3, 0.4: the lower middle of four is run 4, 0.2 s, with 4000 events,
    # 40 + 1 warp memory instructions (two GPUs) and 28 translations: 20000, 205 and 140 a second.
    assert (r.wall_s, r.events, r.warp_mem_insts) == (0.2, 4000, 41)
    assert (r.events_per_s, r.warp_mem_insts_per_s, r.translations_per_s) == pytest.approx((20000, 205, 140))
    assert r.wall_s_runs == (0.4, 0.1, 0.3, 0.2)  # in the order they ran
    assert calls == [w.set | w.quick_set] * 4
    fake_runs(monkeypatch, [0.5])
    assert bench.run_one(w, quick=False).wall_s_runs == (0.5,)
    calls = fake_runs(monkeypatch, [0.0])
    r = bench.run_one(w, quick=False)  # a run too short for the clock: no rate, not a ZeroDivisionError
    assert calls == [w.set] and math.isnan(r.events_per_s) and math.isnan(r.translations_per_s)


def test_a_replay_records_its_trace_once_and_runs_it_with_the_non_workload_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w = next(w for w in bench.WORKLOADS if w.name == "warp-trace-replay")
    recorded: list[tuple[str, str, dict[str, Any]]] = []
    monkeypatch.setattr(uvmsim, "trace_record", lambda path, *, preset, set: recorded.append((path, preset, set)))
    calls = fake_runs(monkeypatch, [0.1, 0.1])
    bench.run_one(w, quick=True, repeat=2)
    assert [(p, s) for _, p, s in recorded] == [("titan-v", w.set | w.quick_set)]
    path = recorded[0][0]
    expected = {"workload.kind": "warp-trace", "workload.warp_trace.path": path, "translation.page_size": "2MiB"}
    assert calls == [expected] * 2


def test_run_all_refuses_an_unknown_workload() -> None:
    with pytest.raises(ValueError, match="unknown bench workload `stride-iomu`"):
        bench.run_all(quick=True, only=["stride-iommu", "stride-iomu"])


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the peak RSS from /proc")
def test_peak_rss_is_in_kib() -> None:
    # The kernel's own peak (VmHWM, in kB) and getrusage's agree to well within a factor of 2 (a wrong
    # unit is off by 1024).
    hwm = int(re.search(r"^VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M).group(1))
    assert hwm / 2 < bench.peak_rss_kib() < hwm * 2


def test_format_table_columns_units_and_spread() -> None:
    rows = [
        bench.BenchRow("stream", 1234567, 2345, 0.5, 2469134.0, 4690.0, 98.6, 123456, (0.6, 0.5, 0.4)),
        bench.BenchRow("x", 5, 6, 2.25, 2.2, 2.7, 0.4, 2048, (2.25, 2.5, 2.0)),
    ]
    # Every value in its column at its precision (rates to whole numbers: 98.6 -> 99, 2.7 -> 3), thousands
    # separated; the runs' min-max (0.4 and 0.6 of 0.6, 0.5, 0.4); names left-aligned, numbers right-aligned.
    assert bench.format_table(rows) == (
        """\
workload  warp mem insts  events  wall s    min-max s  warp mem insts/s  events/s  translations/s  peak RSS KiB
stream         1,234,567   2,345   0.500  0.400-0.600         2,469,134     4,690              99       123,456
x                      5       6   2.250  2.000-2.500                 2         3               0         2,048"""
    )
    one = [bench.BenchRow("stream", 1, 2, 0.5, 2.0, 4.0, 3.0, 10, (0.5,))]
    assert "min-max" not in bench.format_table(one)
