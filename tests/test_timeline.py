"""``uvmsim run --timeline``: Chrome/Perfetto trace-event JSON of kernels, UVM batches and their stages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import uvmsim
from conftest import Cli
from uvmsim import ConfigError
from uvmsim import timeline as tl

# A small managed run: about 17 driver batches.
UVM_RUN = [
    "run",
    "--preset",
    "titan-v",
    "--set",
    "workload.kind=regular",
    "--set",
    "workload.managed=true",
    "--set",
    "workload.regular.threads=4096",
    "-q",
    "-o",
    "out",
]


def load_trace(path: Path) -> dict[str, Any]:
    """The timeline, checked against the trace-event format: every event has ph, ts, pid, tid and name;
    complete events ("X") a non-negative ts and dur; metadata events ("M") a name argument."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(doc["traceEvents"], list) and doc["displayTimeUnit"] == "ns"
    for ev in doc["traceEvents"]:
        assert {"ph", "ts", "pid", "tid", "name"} <= set(ev), ev
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int) and isinstance(ev["name"], str)
        assert ev["ph"] in ("X", "M"), ev
        if ev["ph"] == "X":
            assert isinstance(ev["ts"], int | float) and isinstance(ev["dur"], int | float)
            assert ev["ts"] >= 0 and ev["dur"] >= 0, ev
        else:
            assert ev["name"] in ("process_name", "thread_name") and ev["args"]["name"]
    return doc


def spans(doc: dict[str, Any], cat: str) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and e.get("cat") == cat]


def test_uvm_timeline_spans_match_the_batch_records(cli: Cli, tmp_path: Path) -> None:
    p = cli(*UVM_RUN, "--timeline", "t.json")
    assert p.returncode == 0, p.stderr
    doc = load_trace(tmp_path / "t.json")
    result = uvmsim.load(tmp_path / "out")
    batches = result.tables["batches"].to_dict(orient="records")
    assert len(batches) > 5
    assert doc["otherData"]["batches_total"] == doc["otherData"]["batches_shown"] == len(batches)

    (kernel,) = spans(doc, "kernel")
    assert kernel["dur"] == pytest.approx(result.metrics["time.kernel_ns"] / 1e3, abs=1e-6)
    batch_spans = {e["args"]["batch"]: e for e in spans(doc, "batch")}
    stage_spans = spans(doc, "stage")
    assert sorted(batch_spans) == [int(b["batch"]) for b in batches]
    for b in batches:
        n = int(b["batch"])
        span = batch_spans[n]
        assert span["ts"] == pytest.approx(b["start_ns"] / 1e3, abs=1e-6)
        assert span["dur"] == pytest.approx((b["end_ns"] - b["start_ns"]) / 1e3, abs=1e-6)
        mine = [s for s in stage_spans if s["args"]["batch"] == n]
        # Each stage span is the recorded stage time; together they fill the batch, nested inside it, in order.
        recorded = {s: b[f"{s}_ns"] / 1e3 for s in tl.STAGES if b[f"{s}_ns"] > 0}
        assert [s["name"] for s in mine] == list(recorded)
        for s in mine:
            assert s["dur"] == pytest.approx(recorded[s["name"]], abs=1e-5)
            assert span["ts"] - 1e-6 <= s["ts"] and s["ts"] + s["dur"] <= span["ts"] + span["dur"] + 1e-6
        assert sum(s["dur"] for s in mine) == pytest.approx(span["dur"], abs=1e-5)
        assert all(a["ts"] + a["dur"] <= z["ts"] + 1e-6 for a, z in zip(mine, mine[1:], strict=False))
    assert sum(s["dur"] for s in stage_spans) == pytest.approx(result.metrics["uvm.time_ns"] / 1e3, rel=1e-6)


def test_uvm_timeline_transfer_spans_add_up_to_the_transfer_stage(cli: Cli, tmp_path: Path) -> None:
    p = cli(*UVM_RUN, "--timeline", "t.json")
    assert p.returncode == 0, p.stderr
    doc = load_trace(tmp_path / "t.json")
    result = uvmsim.load(tmp_path / "out")
    copies = result.tables["migrations"]
    transfers = spans(doc, "transfer")
    # One span per copy, on its copy engine's track, named by direction and cause.
    assert len(transfers) == len(copies) > 0
    tracks = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["pid"] == tl.LINK_PID}
    assert {"Link", "copy engine 0"} <= tracks
    assert {t["name"] for t in transfers} == {"h2d demand"}
    assert sum(t["args"]["bytes"] for t in transfers) == result.metrics["link.h2d.bytes"]
    # Each batch's copies lie inside it and add up to its copies' time on the link (copy_ns).
    matched = 0
    for b in result.tables["batches"].to_dict(orient="records"):
        mine = [t for t in transfers if t["args"]["batch"] == b["batch"]]
        assert sum(t["dur"] for t in mine) == pytest.approx(b["copy_ns"] / 1e3, abs=1e-5)
        for t in mine:
            assert b["start_ns"] / 1e3 - 1e-6 <= t["ts"] and t["ts"] + t["dur"] <= b["end_ns"] / 1e3 + 1e-6
        matched += len(mine)
    # Every copy was checked against its batch (a batch id matching none would leave the loop checking 0 == 0).
    assert matched == len(transfers)


def test_timeline_max_batches_samples_every_kth(cli: Cli, tmp_path: Path) -> None:
    p = cli(*UVM_RUN, "--timeline", "t.json", "--timeline-max-batches", "5")
    assert p.returncode == 0, p.stderr
    doc = load_trace(tmp_path / "t.json")
    info = doc["otherData"]
    total = info["batches_total"]
    assert total > 5  # more batches than the bound: some are left out
    stride = -(-total // 5)
    assert info["batch_stride"] == stride and info["batches_shown"] == len(range(0, total, stride)) <= 5
    assert [e["args"]["batch"] for e in spans(doc, "batch")] == list(range(0, total, stride))


def test_timeline_of_a_run_without_unified_memory_has_the_kernel_only(cli: Cli, tmp_path: Path) -> None:
    p = cli("run", "--preset", "kaveri-apu", "--set", "workload.stride.accesses=200", "-q", "--timeline", "t.json")
    assert p.returncode == 0, p.stderr
    doc = load_trace(tmp_path / "t.json")
    assert [e["name"] for e in doc["traceEvents"] if e["ph"] == "X"] == ["kernel"]
    assert doc["otherData"]["batches_total"] == 0


def test_timeline_of_a_multi_gpu_run_names_all_its_gpus(cli: Cli, tmp_path: Path) -> None:
    p = cli(
        "run",
        "--preset",
        "li-4gpu-gmmu",
        "--set",
        "workload.kind=stream",
        "--set",
        "workload.stream.elements=20000",
        "-q",
        "-o",
        "out",
        "--timeline",
        "t.json",
    )
    assert p.returncode == 0, p.stderr
    doc = load_trace(tmp_path / "t.json")
    names = [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"]
    assert names[0] == "GPUs 0-3" and "Page moves" in names and "Link" not in names
    # One span per page move (the timeline turns records on), on lanes of the receiving GPU's track that
    # never overlap.
    result = uvmsim.load(tmp_path / "out")
    moves, rows, info = spans(doc, "move"), result.tables["migrations"], doc["otherData"]
    assert len(rows) > 0 and not spans(doc, "transfer")
    assert (info["moves_total"], info["moves_shown"], info["move_stride"]) == (len(rows), len(moves), 1)
    assert len(moves) + info["moves_crowded_out"] == len(rows)
    if not info["moves_crowded_out"]:
        total = result.metrics["multi.bytes_h2d"] + result.metrics["multi.bytes_p2p"]
        assert sum(s["args"]["bytes"] for s in moves) == total
    tracks = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["pid"] == tl.MOVE_PID}
    by_track: dict[int, list[dict[str, Any]]] = {}
    for s in moves:
        by_track.setdefault(s["tid"], []).append(s)
    for tid, mine in by_track.items():
        assert {s["args"]["gpu"] for s in mine} == {int(tracks[tid].split()[1])}, tracks[tid]
        mine.sort(key=lambda s: s["ts"])
        assert all(a["ts"] + a["dur"] <= z["ts"] + 1e-6 for a, z in zip(mine, mine[1:], strict=False)), tracks[tid]


def test_page_moves_are_bounded() -> None:
    def move(start: float, end: float, gpu: int = 0) -> dict[str, Any]:
        return {"start_ns": start, "end_ns": end, "gpu": gpu, "first_page": 0, "bytes": 4096, "direction": "h2d"}

    # 100 moves to GPU 0 at once: 64 lanes, 36 left out; a later move reuses a lane; GPU 1 has its own lanes.
    rows = [move(0, 10) for _ in range(100)] + [move(20, 30), move(0, 10, gpu=1)]
    evs, info = tl._moves(rows)
    lanes = {e["tid"] for e in evs if e["ph"] == "X" and e["args"]["gpu"] == 0}
    assert len(lanes) == tl.MAX_MOVE_LANES
    assert info == {"moves_total": 102, "moves_shown": 66, "move_stride": 1, "moves_crowded_out": 36}
    # Beyond MAX_MOVES, every k-th move (in time order) is drawn.
    many = [move(i, i + 1) for i in range(tl.MAX_MOVES + 1)]
    evs, info = tl._moves(many)
    assert (info["move_stride"], info["moves_shown"], info["moves_crowded_out"]) == (2, (tl.MAX_MOVES + 2) // 2, 0)


def test_sample_and_bad_bound() -> None:
    assert tl.sample(17, 5) == range(0, 17, 4)
    assert tl.sample(3, 10) == range(3)
    assert list(tl.sample(0, 5)) == []
    with pytest.raises(ConfigError, match="at least 1"):
        tl.sample(10, 0)


def test_bad_timeline_bound_exits_2(cli: Cli, tmp_path: Path) -> None:
    p = cli(*UVM_RUN, "--timeline", "t.json", "--timeline-max-batches", "0")
    assert p.returncode == 2
    assert "--timeline-max-batches" in p.stderr
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize(
    ("out", "timeline", "expected"),
    [
        ("tl", "tl", "is the run's output directory (-o tl)"),
        ("a/b", "a", "is a directory above the run's output directory"),
        ("tl", "tl/summary.json", "would replace the run's own summary.json"),
    ],
)
def test_a_timeline_where_the_run_writes_exits_2_before_simulating(
    cli: Cli, tmp_path: Path, out: str, timeline: str, expected: str
) -> None:
    # `-o tl --timeline tl` failed after the whole simulation with "[Errno 21] Is a directory: '.tl.<random>.tmp'".
    p = cli(
        "run", "--preset", "titan-v", "--set", "workload.stride.accesses=200", "-q", "-o", out, "--timeline", timeline
    )
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "--timeline" in p.stderr and expected in p.stderr and ".tmp" not in p.stderr, p.stderr
    assert not (tmp_path / out).exists()  # refused before the run made its directory


def test_sampled_walks_table_and_timeline(cli: Cli, tmp_path: Path) -> None:
    # One work-item, 200 accesses a page apart: 200 GMMU walks; every 10th is kept. 4 KiB pages: titan-v maps
    # device memory with 2 MiB pages, in which the 200 accesses make one walk and the sampling keeps it alone.
    args = ["run", "--preset", "titan-v", "--set", "workload.stride.accesses=200", "--set"]
    args += ["workload.stride.stride_bytes=4096", "--set", "translation.page_size=4KiB"]
    p = cli(*args, "--set", "translation.walk_records_every=10", "-q", "-o", "out")
    assert p.returncode == 0, p.stderr
    result = uvmsim.load(tmp_path / "out")
    walks = result.tables["walks"]
    n = int(result.metrics["gpu0.walker.walks"])
    assert n == 200, n
    assert len(walks) == -(-n // 10) and list(walks["walk"]) == list(range(0, n, 10))
    assert set(walks["walker"]) == {"gmmu"} and (walks["end_ns"] > walks["start_ns"]).all()
    assert (walks["start_ns"] >= walks["request_ns"]).all() and (walks["levels_read"] >= 1).all()
    doc = tl.timeline(result)
    walk_spans = spans(doc, "walk")
    assert len(walk_spans) == len(walks)
    assert sum(s["dur"] for s in walk_spans) == pytest.approx(((walks["end_ns"] - walks["start_ns"]) / 1e3).sum())


def test_timeline_write_refuses_a_file_of_the_run(tmp_path: Path) -> None:
    # `uvmsim run --timeline` refused these; `timeline.write` wrote over them: the trace the run replayed, and
    # the summary and tables of a stored result.
    trace = tmp_path / "t.csv"
    trace.write_text("time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,64\n20,1,1,0,W,0x2000,64\n")
    replayed = uvmsim.run(preset="mgpusim-r9nano", trace=trace)
    stored = uvmsim.run(
        preset="titan-v",
        set={"workload.kind": "regular", "workload.managed": True, "uvm.records": True},
        out=tmp_path / "r",
    )
    cases = [
        (replayed, trace, "is the trace of the run"),
        (replayed, f"{tmp_path}/./t.csv", f"is the trace `{trace}` of the run"),  # another spelling
        (stored, tmp_path / "r" / "summary.json", "is the summary of the run"),
        (uvmsim.load(tmp_path / "r"), tmp_path / "r" / "batches.parquet", "is the `batches` table of the run"),
    ]
    before = {p: p.read_bytes() for p in [trace, *(tmp_path / "r").iterdir()]}
    for result, path, words in cases:
        with pytest.raises(ConfigError, match="writing it would destroy its input") as e:
            tl.write(result, path)
        assert words in str(e.value), e.value
    assert {p: p.read_bytes() for p in before} == before
    assert load_trace(tl.write(stored, tmp_path / "r" / "timeline.json"))["traceEvents"]


def test_copies_of_inputs_come_first_and_of_results_last(cli: Cli, tmp_path: Path) -> None:
    """Copy-then-execute: the inputs' copies from time 0, the kernel, then the results' copies ending with the
    program; each span's time and bytes are its direction's metrics."""
    sets = ["workload.kind=stream", "workload.stream.elements=262144", "workload.stream.element_bytes=4"]
    sets.append("workload.memcpy_inputs=true")
    args = ["run", "--preset", "titan-v", "-q", "-o", "out", "--timeline", "t.json"]
    p = cli(*args, *(x for s in [*sets, "workload.memcpy_outputs=true"] for x in ("--set", s)))
    assert p.returncode == 0, p.stderr
    m = uvmsim.load(tmp_path / "out").metrics
    assert m["time.memcpy_h2d_ns"] > m["time.memcpy_d2h_ns"] > 0  # stream: two inputs, one result
    assert m["time.memcpy_h2d_ns"] + m["time.memcpy_d2h_ns"] == pytest.approx(m["time.memcpy_ns"])
    assert m["host.memcpy_h2d_bytes"] == 2 * m["host.memcpy_d2h_bytes"] == 2 * 262144 * 4
    assert m["host.memcpy_h2d_bytes"] + m["host.memcpy_d2h_bytes"] == m["host.memcpy_bytes"]
    doc = load_trace(tmp_path / "t.json")
    (h2d, d2h) = sorted(spans(doc, "host"), key=lambda e: e["ts"])
    (kernel,) = spans(doc, "kernel")
    assert (h2d["name"], d2h["name"]) == ("memcpy H2D", "memcpy D2H")
    assert h2d["ts"] == 0 and h2d["dur"] == pytest.approx(m["time.memcpy_h2d_ns"] / 1e3)
    assert h2d["args"]["bytes"] == m["host.memcpy_h2d_bytes"] and d2h["args"]["bytes"] == m["host.memcpy_d2h_bytes"]
    assert h2d["ts"] + h2d["dur"] <= kernel["ts"] + 1e-6
    assert kernel["ts"] + kernel["dur"] == pytest.approx(d2h["ts"])
    assert d2h["ts"] + d2h["dur"] == pytest.approx(m["time.total_ns"] / 1e3)


# --- hand-made rows: each value below is worked out from the module's rules ------------------------------------


def test_events_of_one_gpu_with_an_old_summarys_copies() -> None:
    # One GPU (gpu0.kernels), 3 launches in 5 us of a 10 us program whose copies, 2 us, predate the split by
    # direction (time.memcpy_ns, host.memcpy_bytes: all inputs). H2D from 0 for 2 us; the kernels end where the
    # (absent) D2H copies would start: at 10 - 0 - 5 = 5 us.
    metrics = {
        "time.total_ns": 10_000.0,
        "time.memcpy_ns": 2_000.0,
        "host.memcpy_bytes": 4096,
        "time.kernel_ns": 5_000.0,
        "gpu0.kernels": 3,
    }
    evs, info = tl.events(metrics, [])
    assert [(e["ph"], e["name"], e["pid"], e["tid"], e["args"]) for e in evs] == [
        ("M", "process_name", tl.GPU_PID, 1, {"name": "GPU 0"}),
        ("M", "thread_name", tl.GPU_PID, 1, {"name": "kernels"}),
        ("X", "memcpy H2D", tl.GPU_PID, 1, {"bytes": 4096}),
        ("X", "3 kernels", tl.GPU_PID, 1, {"launches": 3}),
    ]
    assert [(e["ts"], e["dur"]) for e in evs if e["ph"] == "X"] == [(0.0, 2.0), (5.0, 5.0)]
    assert info == {"batches_total": 0, "batches_shown": 0, "batch_stride": 1, "walks_shown": 0}


def test_stage_spans_are_clamped_to_their_batch_and_named_by_its_number() -> None:
    # Batch 7 (the table's number, not its row index 0) from 1 to 2 us; its stages add up to 1.1 us (rounding, or
    # a stage overlapping the next batch): fetch 0.3 us from 1 us, then transfer from 1.3 us, cut at the batch's
    # end to 0.7 us so that it nests in the batch.
    batch = {"batch": 7, "start_ns": 1_000.0, "end_ns": 2_000.0, "fetch_ns": 300.0, "transfer_ns": 800.0, "unique": 5}
    evs, info = tl.events({}, [batch])
    drawn = [(e["name"], e["ts"], e["dur"], e["args"]) for e in evs if e["ph"] == "X"]
    assert drawn == [
        ("batch 7", 1.0, 1.0, {"batch": 7, "unique": 5}),
        ("fetch", 1.0, 0.3, {"batch": 7}),
        ("transfer", 1.3, 0.7, {"batch": 7}),
    ]
    assert (info["batches_total"], info["batches_shown"], info["batch_stride"]) == (1, 1, 1)


def test_copies_belong_to_the_batch_during_which_they_start() -> None:
    batches = [
        {"batch": 0, "start_ns": 1_000.0, "end_ns": 2_000.0},
        {"batch": 1, "start_ns": 3_000.0, "end_ns": 4_000.0},
    ]

    def copy(start: float, engine: int, direction: str, cause: str) -> dict[str, Any]:
        return {
            "start_ns": start,
            "end_ns": start + 100.0,
            "copy_engine": engine,
            "direction": direction,
            "cause": cause,
        }

    copies = [
        copy(3_000.0, 1, "h2d", "demand"),  # at batch 1's start
        copy(2_000.0, 0, "h2d", "prefetch"),  # at batch 0's end: still batch 0's
        copy(5_000.0, 0, "d2h", "eviction"),  # after both
    ]
    evs = tl._transfers(batches, range(2), copies)
    drawn = [(e["name"], e["tid"], e["args"].get("batch")) for e in evs if e["ph"] == "X"]
    # Engine e's track is tid e + 1, the track its thread_name names.
    assert drawn == [("h2d demand", 2, 1), ("h2d prefetch", 1, 0), ("d2h eviction", 1, None)]
    tracks = {e["tid"]: e["args"]["name"] for e in evs if e["name"] == "thread_name"}
    assert tracks == {1: "copy engine 0", 2: "copy engine 1"}
    # Only batch 0 kept (every 2nd): batch 1's copy is left out with it; a copy in no batch is always drawn.
    evs = tl._transfers(batches, range(0, 2, 2), copies)
    assert [e["name"] for e in evs if e["ph"] == "X"] == ["h2d prefetch", "d2h eviction"]


def test_page_moves_reuse_a_lane_free_at_their_start_in_time_order() -> None:
    def move(start: float, end: float) -> dict[str, Any]:
        return {"start_ns": start, "end_ns": end, "gpu": 0, "bytes": 4096, "direction": "h2d", "cause": "demand"}

    # In time order: a (0-10) takes lane 1; c (5-15) overlaps it, lane 2; b starts at 10, when a ends: lane 1.
    rows = [move(5, 15), move(10, 20), move(0, 10)]
    evs, info = tl._moves(rows)
    lanes = {e["ts"] * 1000: e["tid"] for e in evs if e["ph"] == "X"}
    assert lanes == {0: 1, 5: 2, 10: 1}
    names = [e["args"]["name"] for e in evs if e["name"] == "thread_name"]
    assert names == ["GPU 0", "GPU 0 (2)"]
    assert info == {"moves_total": 3, "moves_shown": 3, "move_stride": 1, "moves_crowded_out": 0}


def test_walk_spans_have_their_queue_wait_and_a_track_per_walker() -> None:
    def walk(walker: str, n: int) -> dict[str, Any]:
        # Asked for at 100 ns, started at 150 (50 ns in the queue), done at 400.
        return {
            "gpu": 0,
            "walker": walker,
            "request_ns": 100.0,
            "start_ns": 150.0,
            "end_ns": 400.0,
            "page": 5,
            "levels_read": 4,
            "walk": n,
        }

    evs = tl._walks([walk("gmmu", 0), walk("iommu", 0), walk("gmmu", 10)])
    drawn = [(e["tid"], e["dur"], e["args"]["queue_wait_ns"], e["args"]["walk"]) for e in evs if e["ph"] == "X"]
    assert drawn == [(1, 0.25, 50.0, 0), (2, 0.25, 50.0, 0), (1, 0.25, 50.0, 10)]
    tracks = {e["tid"]: e["args"]["name"] for e in evs if e["name"] == "thread_name"}
    assert tracks == {1: "GPU 0 gmmu", 2: "GPU 0 iommu"}


def test_timeline_write_makes_the_directories_above_its_file(tmp_path: Path) -> None:
    # As `uvmsim run --timeline a/b/t.json` does: the missing directories are made, not a FileNotFoundError.
    result = uvmsim.run(preset="kaveri-apu", set={"workload.stride.accesses": 200})
    path = tl.write(result, tmp_path / "a" / "b" / "t.json")
    assert path == tmp_path / "a" / "b" / "t.json" and [e["name"] for e in spans(load_trace(path), "kernel")]


def test_timeline_is_reachable_as_an_attribute_after_import_uvmsim() -> None:
    """docs/experiments.md: "From Python: `uvmsim.timeline.write(result, "t.json")`" after a plain `import uvmsim`,
    as `uvmsim.sweep` and `uvmsim.plot` are (in a fresh interpreter: another test may have imported it already)."""
    import subprocess
    import sys

    code = "import uvmsim; print(uvmsim.timeline.write.__name__)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "write"
