"""Trace import and replay: `uvmsim trace info`, `workload.kind = "trace"`, and the
cross-check against MGPUSim's own TLB statistics on its traces."""

from __future__ import annotations

import csv
import gzip
import json
import random
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import uvmsim
from conftest import Cli, load_script
from uvmsim import reproduce as rep

HEADER = "time_ns,gpu,cu,wavefront,kind,vaddr,size\n"


def write_trace(path: Path, rows: list[str], gz: bool = False) -> Path:
    text = HEADER + "".join(r + "\n" for r in rows)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_trace_info_counts_a_small_gzip_trace(cli: Cli, tmp_path: Path) -> None:
    rows = [f"{10 + i},1,{i % 3},{i % 5},{'W' if i % 4 == 0 else 'R'},{hex(0x1000 + 64 * i)},64" for i in range(200)]
    write_trace(tmp_path / "t.csv.gz", rows, gz=True)
    p = cli("trace", "info", "t.csv.gz", "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert (info["accesses"], info["writes"], info["cus"], info["wavefronts"]) == (200, 50, 3, 5)
    assert (info["unique_lines_64b"], info["unique_pages_4k"], info["sizes"]) == (200, 4, [[64, 200]])
    assert cli("trace", "info", "t.csv.gz").stdout.count("200") >= 2


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (["10,1,0,0,R,0x1000"], "t.csv:2: missing field `size`"),
        (["10,1,0,0,R,0x1000,64", "5,1,0,0,R,0x1000,64"], "t.csv:3: time goes backwards"),
        (["10,1,0,0,X,0x1000,64"], "t.csv:2: kind `X`"),
    ],
)
def test_malformed_traces_exit_2_naming_file_and_line(cli: Cli, tmp_path: Path, rows: list[str], expected: str) -> None:
    write_trace(tmp_path / "t.csv", rows)
    for args in (
        ["trace", "info", "t.csv"],
        ["run", "--preset", "mgpusim-r9nano", "--set", "workload.kind=trace", "--set", "workload.trace.path=t.csv"],
    ):
        p = cli(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert expected in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_replay_through_run(tmp_path: Path) -> None:
    # Two CUs read the same page; CU 1 misses its own L1 TLB but hits the shared L2 TLB.
    t = write_trace(tmp_path / "t.csv", ["100,1,0,0,R,0x1000,64", "2000,1,1,1,R,0x1040,64", "3000,1,0,0,W,0x1080,64"])
    r = uvmsim.run(preset="mgpusim-r9nano", set={"workload.kind": "trace", "workload.trace.path": str(t)})
    m = r.metrics
    assert (m["gpu0.l1tlb.hits"], m["gpu0.l1tlb.misses"], m["gpu0.l2tlb.hits"], m["gpu0.l2tlb.misses"]) == (1, 2, 1, 1)
    assert m["gpu0.warp_mem_insts"] == 3 and m["time.kernel_ns"] > 2900


def test_order_only_trace_replays_with_a_configurable_gap(tmp_path: Path) -> None:
    # The same accesses with a sequence number instead of a time: order k issues at k x gap_ns.
    t = tmp_path / "o.csv"
    t.write_text(
        "order,gpu,cu,wavefront,kind,vaddr,size\n0,1,0,0,R,0x1000,64\n1,1,1,1,R,0x1040,64\n2,1,0,0,W,0x1080,64\n"
    )

    def kernel_ns(gap: float) -> float:
        sets = {"workload.kind": "trace", "workload.trace.path": str(t), "workload.trace.gap_ns": gap}
        return uvmsim.run(preset="mgpusim-r9nano", set=sets).metrics["time.kernel_ns"]

    near, far = kernel_ns(1.0), kernel_ns(10_000.0)
    assert far > 20_000 > near, (near, far)  # the last access issues at 20 µs with a 10 µs gap
    with pytest.raises(uvmsim.ConfigError, match="gap_ns"):
        kernel_ns(-1.0)


def mgpusim_traces() -> Path | None:
    try:
        return rep.traces_dir()
    except uvmsim.ConfigError:
        return None


TRACES = mgpusim_traces()
needs_traces = pytest.mark.skipif(TRACES is None, reason="shared/traces/mgpusim not found (set UVMSIM_TRACE_DIR)")


@needs_traces
def test_every_mgpusim_trace_replays(tmp_path: Path) -> None:
    assert TRACES is not None
    files = sorted(TRACES.glob("*.csv.gz"))
    assert len(files) >= 19
    for f in files:
        info = uvmsim.trace_info(f)
        m = uvmsim.run(preset="mgpusim-r9nano", set={"workload.kind": "trace", "workload.trace.path": str(f)}).metrics
        # Every access of GPU 1 is looked up once in an L1 TLB.
        if info["gpus"] == 1:
            assert m["gpu0.l1tlb.accesses"] == info["accesses"], f.name
        assert m["gpu0.l1tlb.accesses"] > 0, f.name


@needs_traces
def test_mgpusim_tlb_comparison(tmp_path: Path) -> None:
    rows = rep.reproduce("mgpusim-tlb", tmp_path)
    by = {r.metric: r for r in rows}
    # Predictions that hold (docs/validation.md): these traces meet both targets.
    for t in ("fir", "kmeans", "pagerank", "aes", "stencil2d", "simpleconvolution", "atax", "kmeans-4gpu"):
        assert by[f"l1_hits.{t}"].passed, by[f"l1_hits.{t}"]
        assert by[f"l1_miss_plus_mshr_hit.{t}"].passed, by[f"l1_miss_plus_mshr_hit.{t}"]
    assert by["l1_hits.kmeans"].simulated == 162176
    with (tmp_path / "tlb.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 9


@needs_traces
@pytest.mark.parametrize(
    ("trace", "counts"),
    [
        ("kmeans", (162176, 2176, 8320)),
        # Exact since the PCIe network's port (session 53); the fixed 293-cycle leg gave 86,901 / 1,424 / 17,659.
        ("stencil2d", (86894, 1424, 17666)),
    ],
)
def test_the_cycle_engine_counts_as_mgpusim_did(trace: str, counts: tuple[int, int, int]) -> None:
    """The cycle-stepped port of MGPUSim's R9 Nano path (workload.trace.engine) on the traces MGPUSim made:
    REFERENCE.md's L1 vector TLB counts for those runs, each access answered once."""
    f = TRACES / f"{trace}.csv.gz"
    sets = {"workload.kind": "trace", "workload.trace.path": str(f), "workload.trace.engine": "mgpusim-r9nano"}
    m = uvmsim.run(preset="mgpusim-r9nano", set=sets).metrics
    assert (m["gpu0.l1tlb.hits"], m["gpu0.l1tlb.misses"], m["gpu0.l1tlb.mshr_hits"]) == counts
    assert m["gpu0.l1tlb.accesses"] == uvmsim.trace_info(f)["accesses"] == m["gpu0.line_accesses"]


# --- binary traces (.uvmt): record, replay, convert; Accel-Sim traces ------------------------------------

WALL_CLOCK = uvmsim.WALL_CLOCK_METRICS
DATA = Path(__file__).resolve().parent / "data"
ACCELSIM = DATA / "accelsim" / "kernelslist.g"


@pytest.mark.parametrize(
    "sets",
    [
        ["workload.kind=stream", "workload.stream.elements=50000", "workload.stream.threads=4096"],
        ["workload.kind=regular", "workload.managed=true", "workload.regular.threads=4096"],
        ["workload.kind=gather", "workload.gather.lookups=4096", "workload.gather.threads=1024"],
        ["workload.kind=stride", "workload.stride.work_items=64", "workload.stride.accesses=200"],
        # The host program's set-up is recorded with it (before 2026-11-30 a replay ran without it).
        [
            "workload.kind=stream",
            "workload.stream.elements=100000",
            "workload.managed=true",
            "workload.prefetch_inputs=true",
        ],
        [
            "workload.kind=stream",
            "workload.stream.elements=100000",
            "workload.managed=true",
            "workload.host_init=false",
        ],
        ["workload.kind=stream", "workload.stream.elements=100000", "workload.managed=true", "workload.host_threads=8"],
    ],
)
def test_record_then_replay_gives_the_generators_metrics(cli: Cli, tmp_path: Path, sets: list[str]) -> None:
    flags = [a for s in sets for a in ("--set", s)]
    p = cli("trace", "record", "--preset", "titan-v", *flags, "w.uvmt")
    assert p.returncode == 0, p.stderr
    assert "wrote w.uvmt" in p.stdout
    direct = uvmsim.run(preset="titan-v", set=sets).metrics
    replay = uvmsim.run(
        preset="titan-v", set={"workload.kind": "warp-trace", "workload.warp_trace.path": str(tmp_path / "w.uvmt")}
    ).metrics
    assert {k: v for k, v in direct.items() if k not in WALL_CLOCK} == {
        k: v for k, v in replay.items() if k not in WALL_CLOCK
    }
    info = uvmsim.trace_info(tmp_path / "w.uvmt")
    assert info["format"] == "uvmt-warps"
    # Far faults re-execute instructions: a managed run issues more than the trace holds.
    if direct.get("uvm.faults.raw", 0) == 0:
        assert info["mem_insts"] == direct["gpu0.warp_mem_insts"]
    else:
        assert info["mem_insts"] < direct["gpu0.warp_mem_insts"]


def test_a_version_1_recording_replays_with_the_generators_metrics(cli: Cli, tmp_path: Path) -> None:
    # Recorded before 2026-11-30 (format version 1: no header CRC, no host set-up fields): still read, and
    # replayed as the defaults (host-initialised managed allocations, one host thread) make it.
    p = cli("run", "--preset", "titan-v", "--trace", str(DATA / "v1-stream.uvmt"), "-o", "out")
    assert p.returncode == 0, p.stderr
    replay = uvmsim.load(tmp_path / "out").metrics
    sets = ["workload.kind=stream", "workload.stream.elements=4096", "workload.stream.threads=512"]
    direct = uvmsim.run(preset="titan-v", set=[*sets, "workload.managed=true"]).metrics
    assert replay["uvm.faults.unique"] > 0
    assert {k: v for k, v in direct.items() if k not in WALL_CLOCK} == {
        k: v for k, v in replay.items() if k not in WALL_CLOCK
    }


def test_replay_time_keys_act_on_a_recording_as_on_the_generator(cli: Cli, tmp_path: Path) -> None:
    # README: a plain recording (no copies) replayed on managed memory with uvm.baselines compares it with its
    # copy-then-execute form, as the generator run does: the recording holds its input bytes and the baseline
    # replay adds the copies (until 2026-11-30 it copied nothing: slowdown_vs_copy was slowdown_vs_ideal).
    gen = ["workload.kind=stream", "workload.stream.elements=200000"]
    assert (
        cli("trace", "record", "--preset", "titan-v", *[a for s in gen for a in ("--set", s)], "s.uvmt").returncode == 0
    )
    # The replays without the key under test: each key must change its replay, or the comparison below would
    # hold for a key the replay ignores.
    bases = {
        "plain": uvmsim.run(preset="titan-v", trace=tmp_path / "s.uvmt").metrics,
        "managed": uvmsim.run(preset="titan-v", trace=tmp_path / "s.uvmt", set=["workload.managed=true"]).metrics,
    }
    for more in (
        ["workload.managed=true", "uvm.baselines=true"],
        ["workload.managed=true", "workload.prefetch_inputs=true"],
        ["workload.managed=true", "workload.host_init=false"],
        # Apart from host_init = false: host threads count only for the pages they initialised (none then).
        ["workload.managed=true", "workload.host_threads=8"],
        ["workload.memcpy_inputs=true", "workload.memcpy_outputs=true"],
    ):
        direct = uvmsim.run(preset="titan-v", set=[*gen, *more]).metrics
        replay = uvmsim.run(preset="titan-v", trace=tmp_path / "s.uvmt", set=more).metrics
        differ = sorted(
            k for k in direct.keys() | replay.keys() if k not in WALL_CLOCK and direct.get(k) != replay.get(k)
        )
        assert not differ, (more, differ[:5])
        base = bases["managed" if "workload.managed=true" in more else "plain"]
        assert any(replay.get(k) != base.get(k) for k in replay.keys() | base.keys() if k not in WALL_CLOCK), more
        if "uvm.baselines=true" in more:
            assert 0 < replay["baseline.slowdown_vs_copy"] < replay["baseline.slowdown_vs_ideal"], replay


def test_two_records_to_the_same_out_at_once_both_write_it_whole(tmp_path: Path) -> None:
    # Each writes its own temporary file beside OUT and renames it over OUT (until 2026-11-30 both wrote
    # OUT.part: one failed with exit code 2, the other reported success over a corrupt OUT).
    sets = ["--set", "workload.kind=stream", "--set", "workload.stream.elements=67108864"]
    cmd = [sys.executable, "-m", "uvmsim", "trace", "record", *sets, "w.uvmt"]
    procs = [
        subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert sorted(f.name for f in tmp_path.iterdir()) == ["w.uvmt"]
    info = uvmsim.trace_info(tmp_path / "w.uvmt")
    assert info["warps"] > 0
    assert uvmsim.trace_info(tmp_path / "w.uvmt") == info


def test_an_out_that_cannot_be_written_is_an_os_error(cli: Cli, tmp_path: Path) -> None:
    # Not bad input: the API raises OSError (the CLI exits with code 1), naming OUT.
    with pytest.raises(OSError, match=r"no/x\.uvmt: cannot write"):
        uvmsim.trace_record(tmp_path / "no" / "x.uvmt", set=["workload.kind=stream", "workload.stream.elements=1000"])
    p = cli("trace", "record", "--set", "workload.kind=stream", "no/x.uvmt")
    assert p.returncode == 1 and "no/x.uvmt: cannot write" in p.stderr, p.stderr


# A file size limit (RLIMIT_FSIZE) makes a write past it fail with EFBIG, as a full disk would, in any directory
# and for any user; Python starts with SIGXFSZ ignored, so the write fails rather than the process being killed.
FSIZE_LIMIT = 16 << 10


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))


def _big_accelsim(directory: Path, insts: int = 7500) -> Path:
    """A kernelslist.g of one warp with `insts` loads of 32 scattered lanes each: its .uvmt passes the converter's
    1 MiB write buffer, so that a write fails while the instructions are converted, not at the end."""
    head = (ACCELSIM.parent / "kernel-1.traceg").read_text().split("#BEGIN_TB")[0]
    head = head.replace("grid dim = (2,1,1)", "grid dim = (1,1,1)").replace(
        "block dim = (64,1,1)", "block dim = (32,1,1)"
    )
    rng = random.Random(1)
    body = "".join(
        f"{16 * i:04x} ffffffff 1 R4 LDG.E 1 R2 4 0 "
        + " ".join(hex(0x7F0000000000 + 4 * rng.getrandbits(32)) for _ in range(32))
        + "\n"
        for i in range(insts)
    )
    (directory / "kernel-1.traceg").write_text(
        f"{head}#BEGIN_TB\nthread block = 0,0,0\nwarp = 0\ninsts = {insts}\n{body}#END_TB\n"
    )
    (directory / "kernelslist.g").write_text("kernel-1.traceg\n")
    return directory / "kernelslist.g"


def test_a_conversion_whose_out_fails_mid_way_exits_1_and_a_malformed_in_exits_2(tmp_path: Path) -> None:
    # Every write failure of `trace convert` used to be reported as bad input (exit code 2); it is an output that
    # cannot be written (exit code 1, as for `trace record`), and it leaves neither OUT nor its temporary file.
    rng = random.Random(1)  # scattered addresses: a .uvmt of ordered ones is tiny
    write_trace(
        tmp_path / "big.csv", [f"{i},1,{i % 4},{i % 7},R,{hex(64 * rng.getrandbits(30))},64" for i in range(20000)]
    )
    (tmp_path / "acc").mkdir()
    _big_accelsim(tmp_path / "acc")
    assert uvmsim.trace_convert(tmp_path / "big.csv", tmp_path / "big.uvmt")["records"] == 20000
    inputs = sorted(f.name for f in tmp_path.iterdir())

    def convert(src: str, out: str) -> subprocess.CompletedProcess[str]:  # under the file-size limit
        cmd = [sys.executable, "-m", "uvmsim", "trace", "convert", src, out]
        kw: dict[str, Any] = {"cwd": tmp_path, "capture_output": True, "text": True, "timeout": 120}
        return subprocess.run(cmd, preexec_fn=_limit_file_size, check=False, **kw)

    for src, out in [
        ("big.csv", "o.uvmt"),
        ("big.uvmt", "o.csv"),
        ("big.uvmt", "o.csv.gz"),
        ("acc/kernelslist.g", "w.uvmt"),
    ]:
        p = convert(src, out)
        assert p.returncode == 1, (src, p.stderr)
        assert p.stderr == f"uvmsim: error: {out}: cannot write: File too large (os error 27)\n", p.stderr
        assert sorted(f.name for f in tmp_path.iterdir()) == inputs  # no OUT, no temporary file
    # The same limit, a malformed IN: bad input naming its line.
    write_trace(tmp_path / "bad.csv", ["10,1,0,0,R,0x1000,64", "20,1,0,0,Q,0x1000,64"])
    p = convert("bad.csv", "o.uvmt")
    assert p.returncode == 2 and "bad.csv:3: kind `Q`" in p.stderr, p.stderr
    # From Python: an OSError for OUT, a ConfigError for IN.
    with pytest.raises(OSError, match=r"no/o\.uvmt: cannot write"):
        uvmsim.trace_convert(tmp_path / "big.csv", tmp_path / "no" / "o.uvmt")
    with pytest.raises(uvmsim.ConfigError, match=r"bad\.csv:3: kind `Q`"):
        uvmsim.trace_convert(tmp_path / "bad.csv", tmp_path / "o.uvmt")


def _stress_workloads() -> dict[str, list[str]]:
    # The stress script's small inputs, one per generator (scripts/stress_configs.py).
    mod = load_script("stress_configs")
    return {k: v for k, v in mod.WORKLOADS.items() if k not in ("accelsim", "trace")}


# Host accesses and the APU shootdown workload have no warp-trace form (record refuses them).
_UNRECORDABLE = {"ping-pong", "shootdown"}
# On managed memory srad's host reads its image between iterations (a host access): recorded without it.
_MANAGED_RECORDABLE = {"srad": ["workload.srad.roi_rows=0"]}


# Host settings of a managed program, recorded with it (before 2026-11-30 a replay ran without them).
_HOST = {
    "prefetch": ["workload.managed=true", "workload.prefetch_inputs=true", "workload.host_threads=4"],
    "gpu-first-touch": ["workload.managed=true", "workload.host_init=false", "workload.memcpy_outputs=true"],
}


@pytest.mark.parametrize(
    ("preset", "host"),
    [("titan-v", None), ("li-4gpu-gmmu", None), ("titan-v", "prefetch"), ("titan-v", "gpu-first-touch")],
)
def test_every_generator_replays_with_its_own_metrics(tmp_path: Path, preset: str, host: str | None) -> None:
    # The round-trip guarantee for every generator, on one GPU with 128-byte lines and on four with 64
    # (a multi-GPU replay and xsbench's 96-byte lanes on 64-byte lines both failed until 2026-11-29), and
    # on one GPU with the host settings of a managed program.
    kinds = _stress_workloads()
    assert len(kinds) > 40
    for kind, params in sorted(kinds.items()):
        if kind in _UNRECORDABLE:
            continue
        sets = [f"workload.kind={kind}", *params, *(_HOST[host] if host else [])]
        if host:
            sets += _MANAGED_RECORDABLE.get(kind, [])
        out = tmp_path / f"{kind}.uvmt"
        uvmsim.trace_record(out, preset=preset, set=sets)
        direct = uvmsim.run(preset=preset, set=sets).metrics
        replay = uvmsim.run(preset=preset, trace=out).metrics
        differ = sorted(
            k for k in direct.keys() | replay.keys() if k not in WALL_CLOCK and direct.get(k) != replay.get(k)
        )
        assert not differ, f"{kind}: {differ[:5]}"


def test_a_host_access_cannot_be_recorded_and_the_message_says_how_to_leave_it_out(tmp_path: Path) -> None:
    sets = ["workload.kind=srad", "workload.srad.rows=64", "workload.managed=true"]
    with pytest.raises(uvmsim.ConfigError, match=r"srad's read of a managed image: workload\.srad\.roi_rows = 0"):
        uvmsim.trace_record(tmp_path / "s.uvmt", preset="titan-v", set=sets)
    assert not (tmp_path / "s.uvmt").exists()


def test_a_recording_replays_on_four_gpus(cli: Cli, tmp_path: Path) -> None:
    sets = ["workload.kind=stream", "workload.stream.elements=100000"]
    flags = [a for s in sets for a in ("--set", s)]
    assert cli("trace", "record", "--preset", "li-4gpu-gmmu", *flags, "w.uvmt").returncode == 0
    p = cli("run", "--preset", "li-4gpu-gmmu", "--trace", "w.uvmt", "-o", "out")
    assert p.returncode == 0, p.stderr
    replay = uvmsim.load(tmp_path / "out").metrics
    direct = uvmsim.run(preset="li-4gpu-gmmu", set=sets).metrics
    assert replay["gpu3.warp_mem_insts"] > 0
    assert {k: v for k, v in direct.items() if k not in WALL_CLOCK} == {
        k: v for k, v in replay.items() if k not in WALL_CLOCK
    }


def test_a_device_memory_recording_replays_on_managed_memory(cli: Cli, tmp_path: Path) -> None:
    gen = ["workload.kind=stream", "workload.stream.elements=50000", "workload.stream.threads=4096"]
    flags = [a for s in [*gen, "workload.memcpy_inputs=true"] for a in ("--set", s)]
    assert cli("trace", "record", "--preset", "titan-v", *flags, "w.uvmt").returncode == 0
    p = cli("run", "--preset", "titan-v", "--trace", "w.uvmt", "--set", "workload.managed=true", "-o", "out")
    assert p.returncode == 0, p.stderr
    m = uvmsim.load(tmp_path / "out").metrics
    # The recorded copy is dropped and the pages fault in: the generator's managed run, metric for metric.
    assert m["uvm.faults.unique"] > 0 and m["host.memcpy_bytes"] == 0
    direct = uvmsim.run(preset="titan-v", set=[*gen, "workload.managed=true"]).metrics
    # The API's `trace=` is the CLI's --trace.
    api = uvmsim.run(preset="titan-v", trace=tmp_path / "w.uvmt", set={"workload.managed": True}).metrics
    assert {k: v for k, v in api.items() if k not in WALL_CLOCK} == {k: v for k, v in m.items() if k not in WALL_CLOCK}
    assert {k: v for k, v in direct.items() if k not in WALL_CLOCK} == {
        k: v for k, v in m.items() if k not in WALL_CLOCK
    }


def test_converting_a_csv_or_timed_trace_refuses_a_bad_set_as_an_accelsim_one_does(cli: Cli, tmp_path: Path) -> None:
    # Only an Accel-Sim conversion reads the config: for CSV and timed .uvmt the core never resolved --set, so a
    # misspelt key or a bad value was accepted (exit 0) while `uvmsim config` promises "unknown keys are errors".
    write_trace(tmp_path / "t.csv", ["10,1,0,0,R,0x1000,64"])
    assert cli("trace", "convert", "t.csv", "t.uvmt").returncode == 0
    for src, out in (("t.csv", "x.uvmt"), ("t.uvmt", "x.csv")):
        for bad, words in (("gpu.smss=3", "unknown key; did you mean `gpu.sms`?"), ("gpu.sms=abc", "`gpu.sms`")):
            p = cli("trace", "convert", src, out, "--set", bad)
            assert p.returncode == 2 and p.stderr.startswith("uvmsim: error: --set: key ") and words in p.stderr
            assert p.stderr.count("\n") == 1 and not (tmp_path / out).exists()
        p = cli("trace", "convert", src, out, "--preset", "titan-v", "--set", "gpu.sms=4")  # valid: accepted, unused
        assert p.returncode == 0, p.stderr
        (tmp_path / out).unlink()
    with pytest.raises(uvmsim.ConfigError, match="gpu.smss"):
        uvmsim.trace_convert(tmp_path / "t.csv", tmp_path / "y.uvmt", set={"gpu.smss": 3})


def test_csv_and_binary_convert_both_ways_and_replay_alike(cli: Cli, tmp_path: Path) -> None:
    rows = [f"{10 + i},1,{i % 3},{i % 5},{'W' if i % 4 == 0 else 'R'},{hex(0x1000 + 64 * i)},64" for i in range(300)]
    write_trace(tmp_path / "t.csv", rows)
    assert cli("trace", "convert", "t.csv", "t.uvmt").returncode == 0
    p = cli("trace", "convert", "t.uvmt", "back.csv.gz")
    assert p.returncode == 0, p.stderr
    assert gzip.decompress((tmp_path / "back.csv.gz").read_bytes()).decode() == (tmp_path / "t.csv").read_text()
    # The suffix is read without regard to case, as the name checks read it (`.CSV.GZ` was written plain).
    assert cli("trace", "convert", "t.uvmt", "BACK.CSV.GZ").returncode == 0
    assert gzip.decompress((tmp_path / "BACK.CSV.GZ").read_bytes()) == (tmp_path / "t.csv").read_bytes()
    a, b = uvmsim.trace_info(tmp_path / "t.csv"), uvmsim.trace_info(tmp_path / "t.uvmt")
    assert (a["format"], b["format"]) == ("csv", "uvmt-timed")
    assert {k: v for k, v in a.items() if k not in ("format", "source")} == {
        k: v for k, v in b.items() if k not in ("format", "source")
    }
    run = {
        f: uvmsim.run(preset="mgpusim-r9nano", set={"workload.kind": "trace", "workload.trace.path": str(tmp_path / f)})
        for f in ("t.csv", "t.uvmt")
    }
    ma, mb = (run[f].metrics for f in ("t.csv", "t.uvmt"))
    assert {k: v for k, v in ma.items() if k not in WALL_CLOCK} == {k: v for k, v in mb.items() if k not in WALL_CLOCK}


def test_a_zstd_trace_reads_as_its_csv(cli: Cli, tmp_path: Path) -> None:
    # tests/data/two-frames.csv.zst: the CSV of the test above, written by the zstd command line tool as two frames
    # (`zstd -19` of the first half, `zstd -1 --no-check` of the rest, concatenated), as `zstd` output can be.
    rows = [f"{10 + i},1,{i % 3},{i % 5},{'W' if i % 4 == 0 else 'R'},{hex(0x1000 + 64 * i)},64" for i in range(300)]
    write_trace(tmp_path / "t.csv", rows)
    zst = DATA / "two-frames.csv.zst"
    info = uvmsim.trace_info(zst)
    assert info == {**uvmsim.trace_info(tmp_path / "t.csv"), "source": info["source"]}
    for a, b in ((str(zst), "z.uvmt"), ("z.uvmt", "back.csv")):
        p = cli("trace", "convert", a, b)
        assert p.returncode == 0, p.stderr
    assert (tmp_path / "back.csv").read_text() == (tmp_path / "t.csv").read_text()
    cut = tmp_path / "cut.csv.zst"
    cut.write_bytes(zst.read_bytes()[:-40])
    p = cli("run", "--preset", "mgpusim-r9nano", "--trace", str(cut))
    assert p.returncode == 2 and "cut.csv.zst" in p.stderr and "truncated or corrupt" in p.stderr, p.stderr


def test_a_warp_trace_is_refused_where_a_timed_one_is_expected(cli: Cli, tmp_path: Path) -> None:
    assert (
        cli(
            "trace", "record", "--set", "workload.kind=stream", "--set", "workload.stream.elements=1000", "w.uvmt"
        ).returncode
        == 0
    )
    p = cli("run", "--preset", "mgpusim-r9nano", "--set", "workload.kind=trace", "--set", "workload.trace.path=w.uvmt")
    assert p.returncode == 2 and 'workload.kind = "warp-trace"' in p.stderr, p.stderr
    p = cli("trace", "convert", "w.uvmt", "w.csv")
    assert p.returncode == 2 and "no timed (CSV) form" in p.stderr, p.stderr


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The CLI run in this process: its exit code and stderr."""
    from uvmsim import cli as cli_mod

    with pytest.raises(SystemExit) as e:
        cli_mod.main(args)
    return int(e.value.code or 0), capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--preset", "titan-v", "my.toml"], id="preset-then-a-config"),
        pytest.param(["my.toml", "other.toml"], id="toml-out"),
        pytest.param(["--preset", "titan-v", "my.conf"], id="a-toml-file-by-content"),
    ],
)
def test_record_refuses_a_config_file_as_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    # Was: `trace record --preset titan-v my.toml` (OUT forgotten) took the config for OUT and replaced it with
    # the trace: the optional CONFIG comes first.
    config = '[workload]\nkind = "stream"\n[workload.stream]\nelements = 1000\n'
    for name in ("my.toml", "other.toml", "my.conf"):
        (tmp_path / name).write_text(config)
    monkeypatch.chdir(tmp_path)
    code, err = _main(["trace", "record", *args], capsys)
    assert code == 2, err
    out = args[-1]
    assert f"`{out}`" in err and "like a config file" in err and "uvmsim trace record " in err, err
    assert len(err.splitlines()) == 1, err
    assert (tmp_path / out).read_text() == config
    with pytest.raises(uvmsim.ConfigError, match="like a config file"):  # the Python API too
        uvmsim.trace_record(out, preset="titan-v")
    assert (tmp_path / out).read_text() == config
    # The form it suggests works.
    code, err = _main(["trace", "record", "my.toml", "my.uvmt"], capsys)
    assert code == 0 and (tmp_path / "my.uvmt").read_bytes().startswith(b"UVMTRACE"), err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["trace", "convert", "t.uvmt", "z.uvmt"], "`t.uvmt` converts to CSV text: give an output such as `z.csv`"),
        (
            ["trace", "convert", "t.csv", "x.csv"],
            "`t.csv` converts to a binary .uvmt trace: give an output such as `x.uvmt`",
        ),
        (["trace", "convert", "t.csv", "x.csv.gz"], "converts to a binary .uvmt trace"),
        (["trace", "convert", str(ACCELSIM), "x.csv"], "kernelslist.g` converts to a binary .uvmt trace"),
        (["trace", "convert", "t.uvmt", "z.csv.zst"], "zstd is read, not written"),
        (["trace", "record", "--preset", "titan-v", "x.csv"], "a recording is a binary .uvmt trace"),
    ],
)
def test_an_out_named_for_the_other_format_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    # Was: `convert t.uvmt z.uvmt` wrote CSV text into z.uvmt, `convert kernelslist.g x.csv` a binary trace into
    # x.csv: the format follows IN only, so OUT's name must agree with it.
    write_trace(tmp_path / "t.csv", ["10,1,0,0,R,0x1000,64", "20,1,1,0,W,0x2000,64"])
    uvmsim.trace_convert(tmp_path / "t.csv", tmp_path / "t.uvmt")
    monkeypatch.chdir(tmp_path)
    code, err = _main(args, capsys)
    assert code == 2, err
    assert expected in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / args[-1]).exists()
    # The Python API refuses the same names (before 2026-11-30 only the CLI did).
    with pytest.raises(uvmsim.ConfigError, match=re.escape(expected)):
        if args[1] == "convert":
            uvmsim.trace_convert(args[2], args[3])
        else:
            uvmsim.trace_record(args[-1], preset="titan-v")
    assert not (tmp_path / args[-1]).exists()
    # The names that agree convert; a name of neither format is left to the user.
    for a, b in (("t.uvmt", "z.csv"), ("t.uvmt", "z.csv.gz"), ("t.csv", "x.uvmt"), ("t.uvmt", "z.txt")):
        code, err = _main(["trace", "convert", a, b], capsys)
        assert code == 0, err


def _flip(b: bytes, i: int) -> bytes:
    """``b`` with byte ``i`` inverted (here: in the middle of the chunks)."""
    return b[:i] + bytes([b[i] ^ 0xFF]) + b[i + 1 :]


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda b: b[: len(b) - 7], "truncated: the end marker is missing"),
        (lambda b: b[:8] + b"\x07\x00\x00\x00" + b[12:], "byte 8: format version 7; this uvmsim reads versions 1 to 3"),
        (lambda b: b[:16] + b"#" + b[17:], "byte 16: bad header"),
        # A changed header byte that still parses (a kernel's thread count: 65,536 -> 65,280 replayed 2,040 of
        # 2,048 warps with exit code 0 until 2026-11-30) is refused by the header's CRC-32.
        (
            lambda b: b.replace(b'"threads":65536', b'"threads":65280', 1),
            "byte 16: bad header: bytes 8 to ",
        ),
        (lambda b: _flip(b, (16 + int.from_bytes(b[12:16], "little") + len(b)) // 2), "corrupt"),
    ],
)
def test_malformed_binary_traces_exit_2_with_the_byte_offset(cli: Cli, tmp_path: Path, damage, expected: str) -> None:
    sets = ["--set", "workload.kind=stream", "--set", "workload.stream.elements=20000"]
    sets += ["--set", "workload.stream.threads=65536"]
    assert cli("trace", "record", *sets, "good.uvmt").returncode == 0
    good = (tmp_path / "good.uvmt").read_bytes()
    (tmp_path / "bad.uvmt").write_bytes(damage(good))
    assert (tmp_path / "bad.uvmt").read_bytes() != good
    for args in (
        ["trace", "info", "bad.uvmt"],
        [
            "run",
            "--preset",
            "titan-v",
            "--set",
            "workload.kind=warp-trace",
            "--set",
            "workload.warp_trace.path=bad.uvmt",
        ],
        # --trace reads the header's mode to pick the workload kind, and leaves a bad header to the reader.
        ["run", "--preset", "titan-v", "--trace", "bad.uvmt"],
    ):
        p = cli(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert "bad.uvmt: byte " in p.stderr and expected in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_the_hand_made_accelsim_trace_runs(cli: Cli, tmp_path: Path) -> None:
    info = uvmsim.trace_info(ACCELSIM)
    assert (info["kernels"], info["warps"], info["mem_insts"], info["accesses"]) == (1, 4, 5, 83)
    assert (info["reads"], info["writes"], info["unique_pages_4k"]) == (49, 34, 3)
    sets = {"workload.kind": "accelsim", "workload.accelsim.path": str(ACCELSIM)}
    m = uvmsim.run(preset="titan-v", set=sets).metrics
    assert (m["gpu0.warp_mem_insts"], m["gpu0.warps"], m["host.memcpy_bytes"]) == (5, 4, 512)
    managed = uvmsim.run(preset="titan-v", set={**sets, "workload.managed": True}).metrics
    assert (managed["uvm.faults.unique"], managed["host.memcpy_bytes"]) == (3, 0)
    p = cli("trace", "convert", str(ACCELSIM), "a.uvmt", "--preset", "titan-v")
    assert p.returncode == 0, p.stderr
    m2 = uvmsim.run(
        preset="titan-v", set={"workload.kind": "warp-trace", "workload.warp_trace.path": str(tmp_path / "a.uvmt")}
    )
    assert {k: v for k, v in m.items() if k not in WALL_CLOCK} == {
        k: v for k, v in m2.metrics.items() if k not in WALL_CLOCK
    }


def test_a_malformed_accelsim_trace_exits_2_with_file_and_line(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "kernelslist.g").write_text("kernel-1.traceg\n")
    text = (ACCELSIM.parent / "kernel-1.traceg").read_text().replace("LDG.E 1 R2 4 1", "LDG.E 1 R2 4 9")
    (tmp_path / "kernel-1.traceg").write_text(text)
    p = cli(
        "run", "--preset", "titan-v", "--set", "workload.kind=accelsim", "--set", "workload.accelsim.path=kernelslist.g"
    )
    assert p.returncode == 2, p.stderr
    assert "kernel-1.traceg:25: address format `9`" in p.stderr and "Traceback" not in p.stderr, p.stderr


# --- uvmsim run --trace FILE -------------------------------------------------------------------------------------

ROWS = [f"{10 + 7 * i},1,{i % 3},{i % 5},{'W' if i % 4 == 0 else 'R'},{hex(0x1000 + 64 * i)},64" for i in range(300)]


def _traces(cli: Cli, tmp_path: Path) -> dict[str, tuple[str, str, list[str]]]:
    """One small trace of every format: file -> (kind, path key, preset and --set of the equivalent run)."""
    write_trace(tmp_path / "t.csv", ROWS)
    write_trace(tmp_path / "t.csv.gz", ROWS, gz=True)
    assert cli("trace", "convert", "t.csv", "t.uvmt").returncode == 0
    stream = ["--set", "workload.kind=stream", "--set", "workload.stream.elements=20000"]
    assert cli("trace", "record", "--preset", "titan-v", *stream, "w.uvmt").returncode == 0
    timed = ["--preset", "mgpusim-r9nano"]
    return {
        "t.csv": ("trace", "workload.trace.path", timed),
        "t.csv.gz": ("trace", "workload.trace.path", timed),
        "t.uvmt": ("trace", "workload.trace.path", timed),
        "w.uvmt": ("warp-trace", "workload.warp_trace.path", ["--preset", "titan-v"]),
        str(ACCELSIM): ("accelsim", "workload.accelsim.path", ["--preset", "titan-v"]),
    }


def _summary(tmp_path: Path, out: str) -> dict[str, Any]:
    return json.loads((tmp_path / out / "summary.json").read_text())


def test_run_trace_equals_the_set_form_for_every_format(cli: Cli, tmp_path: Path) -> None:
    for i, (file, (kind, key, base)) in enumerate(_traces(cli, tmp_path).items()):
        assert uvmsim.trace_workload(file if "/" in file else tmp_path / file)["workload.kind"] == kind
        p = cli("run", *base, "--trace", file, "-q", "-o", f"a{i}")
        assert p.returncode == 0, (file, p.stderr)
        p = cli("run", *base, "--set", f"workload.kind={kind}", "--set", f"{key}={file}", "-q", "-o", f"b{i}")
        assert p.returncode == 0, (file, p.stderr)
        a, b = _summary(tmp_path, f"a{i}"), _summary(tmp_path, f"b{i}")
        assert a["config"] == b["config"], file  # the same workload kind and path, nothing else changed
        assert a["config"]["workload"]["kind"] == kind
        ma, mb = ({k: v for k, v in s["metrics"].items() if k not in WALL_CLOCK} for s in (a, b))
        assert ma == mb and ma["gpu0.warp_mem_insts"] > 0, file


def test_run_trace_layers_under_an_explicit_set(cli: Cli, tmp_path: Path) -> None:
    write_trace(tmp_path / "one.csv", ROWS[:1])
    write_trace(tmp_path / "all.csv", ROWS)
    base = ["--preset", "mgpusim-r9nano", "-q"]
    # A CONFIG naming another workload: --trace replaces it; --set over --trace wins.
    (tmp_path / "c.toml").write_text('[workload]\nkind = "stride"\n')
    assert cli("run", "c.toml", *base, "--trace", "one.csv", "-o", "one").returncode == 0
    p = cli("run", "c.toml", *base, "--trace", "one.csv", "--set", "workload.trace.path=all.csv", "-o", "all")
    assert p.returncode == 0, p.stderr
    one, all_ = _summary(tmp_path, "one"), _summary(tmp_path, "all")
    assert one["config"]["workload"]["kind"] == all_["config"]["workload"]["kind"] == "trace"
    assert (one["metrics"]["gpu0.warp_mem_insts"], all_["metrics"]["gpu0.warp_mem_insts"]) == (1, len(ROWS))
    p = cli("run", *base, "--trace", "one.csv", "--set", "workload.kind=stride", "-o", "stride")
    assert p.returncode == 0, p.stderr
    assert _summary(tmp_path, "stride")["config"]["workload"]["kind"] == "stride"


def test_run_trace_alone_uses_the_defaults(cli: Cli, tmp_path: Path) -> None:
    write_trace(tmp_path / "t.csv", ROWS)
    p = cli("run", "--trace", "t.csv", "-q")
    assert p.returncode == 0, p.stderr
    assert _summary(tmp_path, "uvmsim-out")["metrics"]["gpu0.warp_mem_insts"] == len(ROWS)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: None, "trace `absent.csv` does not exist"),
        (lambda d: (d / "absent.csv").mkdir(), "trace `absent.csv` is a directory, not a file"),
    ],
)
def test_run_trace_missing_file_exits_2_naming_it(cli: Cli, tmp_path: Path, make, expected: str) -> None:
    make(tmp_path)
    p = cli("run", "--preset", "mgpusim-r9nano", "--trace", "absent.csv")
    assert p.returncode == 2, p.stderr
    assert p.stderr == f"uvmsim: error: {expected}\n", p.stderr
    assert not (tmp_path / "uvmsim-out").exists()
