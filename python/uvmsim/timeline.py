"""Timelines of a run in Chrome / Perfetto trace-event JSON (``uvmsim run ... --timeline FILE``).

Open the file in https://ui.perfetto.dev (or ``chrome://tracing``). Tracks:

- **GPU 0 / kernels**: the host program, which runs its operations one after the other: the explicit
  host-to-device copies (``time.memcpy_h2d_ns``, first, as the workloads issue them), the kernels
  (``time.kernel_ns``) and the device-to-host copies of the results (``time.memcpy_d2h_ns``, ending with the
  program). A run with several kernels shows them as one span: the simulator records their total time, not each
  launch.
- **UVM driver / batches**: one span per driver batch (``start_ns`` to ``end_ns`` of the batches table, with its
  fault and byte counts as arguments) and, nested in it, one span per stage (fetch, block, fault, first_touch, unmap,
  alloc, evict, zero, push, transfer, map, tracker, replay). The stage columns are per-batch totals over the batch's VA
  blocks; they add up to the batch's duration and are drawn end to end in the driver's order.
- **Link / copy engine N**: one span per copy of the UVM driver in the migrations table (``start_ns`` to
  ``end_ns``: the copy engine's transfer and the link latency), named by direction and cause (demand, prefetch,
  eviction, hint, thrashing, prefetch-async, access-counter), with its bytes, pages and batch as arguments. A
  batch's host-to-device copies add up to its ``copy_ns`` (the batches table), which is its ``transfer`` stage only
  with synchronous copies (``uvm.async_copies = false``, less any wait for a busy engine): asynchronous copies
  overlap the later stages.
- **Page moves / GPU g** (a multi-GPU run): one span per row of the migrations table, a 4 KiB page moved into GPU
  g's memory (``start_ns``, the move issued to the host link or the peer fabric, waiting for it included, to
  ``end_ns``, the page there), named by direction (``h2d`` from the host, ``p2p`` from another GPU) and cause
  (demand, access-counter, replication), with the page, its bytes and the source GPU as arguments. The model has
  no copy engines (``copy_engine`` is 0): moves in flight together go on further lanes of their GPU
  (``GPU g (2)``, ...), so that spans on one track never overlap. At most 64 lanes per GPU (a move finding
  them all busy is left out) and 200,000 moves (beyond, every k-th); ``otherData`` records ``moves_total``,
  ``moves_shown``, ``move_stride`` and ``moves_crowded_out``.
- **Page walks (sampled) / GPU g walker**: with ``translation.walk_records_every = N``, every N-th walk of each
  walker (the walks table): from the walk starting on a walker thread to its leaf entry, with the page, the
  entries read and the queue wait before it as arguments.

Trace-event times are microseconds; spans are complete events (``"ph": "X"``) with ``ts`` and ``dur``. Large runs
are bounded by ``max_batches``: beyond it every k-th batch is kept (k = ceil(batches / max_batches)), and the
file's ``otherData`` says how many were shown out of how many.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import uvmsim
from uvmsim._core import ConfigError
from uvmsim._files import atomic_write_text, check_output_file, inputs_of, refuse_input

__all__ = ["DEFAULT_MAX_BATCHES", "STAGES", "events", "timeline", "write"]

# The driver's stages in batch order: the batches table's `STAGE_ns` columns.
STAGES = (
    "fetch",
    "block",
    "fault",
    "first_touch",
    "unmap",
    "alloc",
    "evict",
    "zero",
    "push",
    "transfer",
    "map",
    "tracker",
    "replay",
)
DEFAULT_MAX_BATCHES = 20_000
GPU_PID, UVM_PID, LINK_PID, WALK_PID, MOVE_PID = 1, 2, 3, 4, 5
# Page-move lanes per GPU before the next GPU's track numbers (a GPU's lanes are its moves in flight together).
MOVE_LANES = 1 << 20
# Bounds on the page moves drawn (a multi-GPU run can move millions of pages, hundreds at once): every k-th move
# beyond MAX_MOVES, and at most MAX_MOVE_LANES tracks per GPU (a move finding them all busy is left out).
MAX_MOVES = 200_000
MAX_MOVE_LANES = 64
KERNEL_TID, BATCH_TID = 1, 1
# Batch-table columns passed along as a batch span's arguments.
BATCH_ARGS = (
    "fetched",
    "unique",
    "duplicates",
    "fetch_merged",
    "reads",
    "writes",
    "prefetches",
    "flushed",
    "va_blocks",
    "bytes_h2d",
    "replays",
)


def _us(ns: float) -> float:
    """Nanoseconds as trace-event microseconds, to the picosecond (the simulator's resolution)."""
    return round(ns / 1000.0, 6)


def _span(name: str, pid: int, tid: int, start_ns: float, dur_ns: float, cat: str, **args: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": _us(start_ns),
        "dur": _us(dur_ns),
        "pid": pid,
        "tid": tid,
    }
    if args:
        ev["args"] = args
    return ev


def _meta(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": {"name": name}}


def _plain(v: Any) -> Any:
    """A table cell as a JSON value (numpy scalars to Python numbers)."""
    return v.item() if hasattr(v, "item") else v


def sample(n: int, max_batches: int) -> range:
    """Indices of the batches kept: all of them up to ``max_batches``, else every k-th from the first."""
    if isinstance(max_batches, bool) or not isinstance(max_batches, numbers.Integral):
        raise TypeError(f"max_batches must be a whole number of batches, not {type(max_batches).__name__}")
    if max_batches < 1:
        raise ConfigError(f"max_batches must be at least 1, got {max_batches}")
    return range(0, n, max(1, math.ceil(n / max_batches)))


def events(
    metrics: Mapping[str, Any],
    batches: Sequence[Mapping[str, Any]],
    max_batches: int = DEFAULT_MAX_BATCHES,
    migrations: Sequence[Mapping[str, Any]] = (),
    walks: Sequence[Mapping[str, Any]] = (),
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The trace events of a run (its metrics, batch rows and copies), and what was sampled (for ``otherData``)."""
    # One track for the program: a multi-GPU run's GPUs run its kernels together.
    gpus = sum(1 for k in metrics if re.fullmatch(r"gpu\d+\.kernels", k))
    evs = [
        _meta("process_name", GPU_PID, KERNEL_TID, "GPU 0" if gpus <= 1 else f"GPUs 0-{gpus - 1}"),
        _meta("thread_name", GPU_PID, KERNEL_TID, "kernels"),
    ]
    total = float(metrics.get("time.total_ns", 0.0))
    # A summary written before the copies were split by direction counts them all as inputs.
    h2d = float(metrics.get("time.memcpy_h2d_ns", metrics.get("time.memcpy_ns", 0.0)))
    d2h = float(metrics.get("time.memcpy_d2h_ns", 0.0))
    kernel = float(metrics.get("time.kernel_ns", 0.0))
    kernels = int(metrics.get("gpu0.kernels", 0))
    if h2d > 0:
        h2d_bytes = metrics.get("host.memcpy_h2d_bytes", metrics.get("host.memcpy_bytes"))
        evs.append(_span("memcpy H2D", GPU_PID, KERNEL_TID, 0.0, h2d, "host", bytes=h2d_bytes))
    if kernels:
        name = "kernel" if kernels == 1 else f"{kernels} kernels"
        start = max(0.0, total - d2h - kernel)
        evs.append(_span(name, GPU_PID, KERNEL_TID, start, kernel, "kernel", launches=kernels))
    if d2h > 0:
        d2h_bytes = metrics.get("host.memcpy_d2h_bytes")
        evs.append(_span("memcpy D2H", GPU_PID, KERNEL_TID, max(0.0, total - d2h), d2h, "host", bytes=d2h_bytes))
    keep = sample(len(batches), max_batches)
    if batches:
        evs += [
            _meta("process_name", UVM_PID, BATCH_TID, "UVM driver"),
            _meta("thread_name", UVM_PID, BATCH_TID, "batches"),
        ]
    for i in keep:
        b = batches[i]
        start, end = float(b["start_ns"]), float(b["end_ns"])
        args = {k: _plain(b[k]) for k in BATCH_ARGS if k in b}
        number = int(b.get("batch", i))
        evs.append(_span(f"batch {number}", UVM_PID, BATCH_TID, start, end - start, "batch", batch=number, **args))
        t = start
        for stage in STAGES:
            d = float(b.get(f"{stage}_ns", 0.0))
            if d > 0:
                # Clamped to the batch so that rounding never lets a stage end after its batch (bad nesting).
                evs.append(_span(stage, UVM_PID, BATCH_TID, t, max(0.0, min(d, end - t)), "stage", batch=number))
            t += d
    info = {"batches_total": len(batches), "batches_shown": len(keep), "batch_stride": keep.step}
    # The multi-GPU model's page moves (it has no copy engines), or the UVM driver's copies.
    if "multi.gpus" in metrics:
        moves, shown = _moves(migrations)
        evs += moves
        info |= shown
    else:
        evs += _transfers(batches, keep, migrations)
    evs += _walks(walks)
    info["walks_shown"] = len(walks)
    return evs, info


def _walks(walks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One span per sampled walk, on a track per (GPU, walker)."""
    tracks: dict[tuple[int, str], int] = {}
    evs: list[dict[str, Any]] = []
    for w in walks:
        key = (int(w.get("gpu", 0)), str(w.get("walker", "gmmu")))
        tid = tracks.setdefault(key, len(tracks) + 1)
        start, end = float(w["start_ns"]), float(w["end_ns"])
        args = {
            "page": _plain(w["page"]),
            "levels_read": _plain(w["levels_read"]),
            "queue_wait_ns": start - float(w["request_ns"]),
            "walk": _plain(w["walk"]),
        }
        evs.append(_span("walk", WALK_PID, tid, start, end - start, "walk", **args))
    meta = [_meta("process_name", WALK_PID, 1, "Page walks (sampled)")] if tracks else []
    meta += [_meta("thread_name", WALK_PID, tid, f"GPU {g} {name}") for (g, name), tid in tracks.items()]
    return meta + evs


def _transfers(
    batches: Sequence[Mapping[str, Any]], keep: range, migrations: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One span per copy on its copy engine's track; when batches are sampled, only the kept batches' copies
    (a copy belongs to the batch during which it starts)."""
    import bisect

    starts = [float(b["start_ns"]) for b in batches]
    kept = set(keep)
    evs: list[dict[str, Any]] = []
    engines: set[int] = set()
    for m in migrations:
        start, end = float(m["start_ns"]), float(m["end_ns"])
        i = bisect.bisect_right(starts, start) - 1
        inside = 0 <= i < len(batches) and start <= float(batches[i]["end_ns"])
        if batches and inside and i not in kept:
            continue
        engine = int(m.get("copy_engine", 0))
        engines.add(engine)
        args = {k: _plain(m[k]) for k in ("bytes", "pages", "direction", "cause") if k in m}
        if inside:
            args["batch"] = int(batches[i].get("batch", i))
        name = f"{m.get('direction', 'copy')} {m.get('cause', '')}".strip()
        evs.append(_span(name, LINK_PID, engine + 1, start, end - start, "transfer", **args))
    meta = [_meta("process_name", LINK_PID, 1, "Link")] if engines else []
    meta += [_meta("thread_name", LINK_PID, e + 1, f"copy engine {e}") for e in sorted(engines)]
    return meta + evs


def _moves(migrations: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One span per page move of a multi-GPU run, on its receiving GPU's track; a move that starts before every
    lane of that GPU is free goes on a new lane (spans on one track must not overlap). Bounded: beyond
    ``MAX_MOVES`` moves every k-th is drawn, and a move that would need more than ``MAX_MOVE_LANES`` lanes of its
    GPU is left out; ``otherData`` counts both."""
    import heapq

    ordered = sorted(migrations, key=lambda m: (float(m["start_ns"]), float(m["end_ns"])))
    keep = sample(len(ordered), MAX_MOVES)
    lanes: dict[int, list[tuple[float, int]]] = {}  # per GPU: (end of its last span, lane), a min-heap
    used: dict[int, int] = {}  # lanes per GPU
    evs: list[dict[str, Any]] = []
    crowded = 0
    for i in keep:
        m = ordered[i]
        g = int(m.get("gpu", 0))
        start, end = float(m["start_ns"]), float(m["end_ns"])
        free = lanes.setdefault(g, [])
        if free and free[0][0] <= start:
            _, lane = heapq.heappop(free)
        elif used.get(g, 0) < MAX_MOVE_LANES:
            lane = used.get(g, 0)
            used[g] = lane + 1
        else:
            crowded += 1
            continue
        heapq.heappush(free, (end, lane))
        args = {k: _plain(m[k]) for k in ("first_page", "bytes", "direction", "cause", "gpu", "src_gpu") if k in m}
        name = f"{m.get('direction', 'move')} {m.get('cause', '')}".strip()
        evs.append(_span(name, MOVE_PID, g * MOVE_LANES + lane + 1, start, end - start, "move", **args))
    meta = [_meta("process_name", MOVE_PID, 1, "Page moves")] if used else []
    for g in sorted(used):
        meta += [
            _meta("thread_name", MOVE_PID, g * MOVE_LANES + k + 1, f"GPU {g}" if k == 0 else f"GPU {g} ({k + 1})")
            for k in range(used[g])
        ]
    info = {
        "moves_total": len(ordered),
        "moves_shown": len(evs),
        "move_stride": keep.step,
        "moves_crowded_out": crowded,
    }
    return meta + evs, info


def timeline(result: uvmsim.Result, max_batches: int = DEFAULT_MAX_BATCHES) -> dict[str, Any]:
    """The trace-event JSON object of a run: ``{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}``."""
    if not isinstance(result, uvmsim.Result):
        raise TypeError(f"result must be a uvmsim.Result (from uvmsim.run or uvmsim.load), not {type(result).__name__}")
    b = result.tables.get("batches")
    rows = [] if b is None else b.to_dict(orient="records")
    m = result.tables.get("migrations")
    copies = [] if m is None else m.to_dict(orient="records")
    w = result.tables.get("walks")
    walks = [] if w is None else w.to_dict(orient="records")
    evs, info = events(result.metrics, rows, max_batches, copies, walks)
    return {"traceEvents": evs, "displayTimeUnit": "ns", "otherData": {"generator": "uvmsim", **info}}


def write(result: uvmsim.Result, path: str | os.PathLike[str], max_batches: int = DEFAULT_MAX_BATCHES) -> Path:
    """Write the run's timeline to ``path`` (atomically, compact JSON) and return the path.

    Raises:
        ConfigError: ``path`` is a file of the run: a trace its config replays (or a kernel file of an Accel-Sim
            trace), or, for a result stored in ``result.out``, its ``summary.json`` or a table's Parquet file
            (``uvmsim run --timeline`` refuses the config file and the preset's file too; a ``Result`` does not
            name them). Nothing is written then.
        OSError: ``path`` cannot be written (a directory, no permission, ...).
        TypeError: ``result`` is not a ``Result``, or ``max_batches`` not an integer (``ConfigError`` if below 1).
    """
    if not isinstance(result, uvmsim.Result):
        raise TypeError(f"result must be a uvmsim.Result (from uvmsim.run or uvmsim.load), not {type(result).__name__}")
    p = Path(path)
    inputs = inputs_of(None, None, result.config)
    if result.out is not None:
        inputs.append(("the summary of the run", result.out / uvmsim.SUMMARY_FILE))
        inputs += [(f"the `{name}` table of the run", result.out / uvmsim.table_file(name)) for name in result.tables]
    refuse_input(path, inputs, "the run")
    check_output_file(p, make_parents=True)  # an OSError naming it, not the temporary file
    atomic_write_text(p, json.dumps(timeline(result, max_batches), separators=(",", ":")) + "\n")
    return p
