"""Regression table of the bad-input sweep (scripts/bad_input_sweep.py): each input that once panicked, hung,
crashed or was accepted, and a sample of those that were always refused well. Bad input ends with exit code 2 and
one line naming the key (or file); never a panic, a traceback or a hang."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import uvmsim
from uvmsim.sweep import load_sweep

ACCELSIM = Path(__file__).resolve().parent / "data" / "accelsim" / "kernelslist.g"
TINY = ["--preset", "titan-v", "--set", "workload.kind=stride", "--set", "workload.stride.accesses=200"]
MANAGED = [*TINY, "--set", "workload.managed=true"]
CSV = "time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,64\n20,1,1,0,W,0x2000,64\n"
# A case that once allocated tens of GB must fail quickly here rather than take the machine's memory.
MEMORY_LIMIT = 4 << 30
TIMEOUT_S = 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def uvmsim_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uvmsim", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        preexec_fn=_limit_memory,
        check=False,
    )


def sets(*kv: str) -> list[str]:
    return [a for s in kv for a in ("--set", s)]


# (arguments after `uvmsim`, words the one-line message must contain). Before the fix, where there was a bug.
BAD = [
    # Bugs the sweep found.
    pytest.param(
        ["run", *TINY, *sets("workload.kind=btree", "workload.btree.fanout=0")],
        ["workload.btree.fanout", "got 0"],
        id="btree-fanout-0-panicked",  # division by zero in the footprint, computed before the range check
    ),
    pytest.param(
        ["run", *TINY, *sets("workload.kind=miniamr", "workload.miniamr.blocks_x=4294967295")],
        ["workload.miniamr.blocks_x", "between 1 and 256"],
        id="miniamr-blocks-hung",  # the footprint counted ~2^40 blocks before the range check
    ),
    pytest.param(
        ["run", *TINY, *sets("workload.kind=fault-burst", "workload.fault_burst.faults=0")],
        ["workload.fault_burst.faults", "got 0"],
        id="fault-burst-0-wrapped",  # "the parameters ask for 340282366920938463463374607431768207364 bytes"
    ),
    pytest.param(
        ["run", *TINY, *sets("workload.kind=im2col", "workload.im2col.height=0")],
        ["workload.im2col.height", "got 0"],
        id="im2col-height-0-wrapped",
    ),
    pytest.param(
        ["run", *TINY, *sets("gpu.l1tlb.latency_cycles=4294967295")],
        ["gpu.l1tlb.latency_cycles", "at most 1 ms"],
        id="tlb-latency-hung",  # the DRAM channels' timelines held a bucket per ns up to the far arrival
    ),
    pytest.param(
        ["run", *TINY, *sets("gpu.l2d.latency_cycles=4294967295")],
        ["gpu.l2d.latency_cycles", "at most 1 ms"],
        id="cache-latency-hung",
    ),
    pytest.param(
        ["run", *TINY, *sets("gpu.core_mhz=1", "gpu.vmem.transit_cycles=1000000", "gpu.vmem.backpressure=true")],
        ["gpu.vmem.transit_cycles", "1000 cycles at gpu.core_mhz = 1"],
        id="slow-clock-latency-took-1.6GB",  # 10^6 cycles were accepted at any clock: 1 s at 1 MHz
    ),
    pytest.param(
        ["run", *MANAGED, *sets("uvm.fault_buffer_entries=4294967295", "uvm.batch_size=4294967295")],
        ["uvm.fault_buffer_entries", "between 1 and 1048576"],
        id="fault-buffer-allocated-137GB",
    ),
    pytest.param(
        ["run", *MANAGED, *sets("uvm.access_counters.notify_us=1e30")],
        ["uvm.access_counters.notify_us", "between 0 and 1000000"],
        id="notify-1e30-accepted",
    ),
    pytest.param(
        ["run", *TINY, *sets("gpu.l1tlb.entries=16777216", "gpu.l1tlb.ways=16")],
        ["gpu.l1tlb.entries", "in all"],
        id="l1-tlbs-allocated-20GB",  # 2^24 entries is the bound of one TLB; titan-v has 40 µTLBs
    ),
    pytest.param(
        ["run", *TINY, *sets("gpu.l1d.size_bytes=2GiB")],
        ["gpu.l1d.size_bytes", "in all"],
        id="l1-caches-allocated-200GB",
    ),
    pytest.param(
        ["run", *MANAGED, *sets("uvm.advise.policy=read-mostly", "uvm.advise.buffers=[99]")],
        ["uvm.advise.buffers", "allocation 99 does not exist"],
        id="advice-for-a-missing-allocation-ignored",
    ),
    pytest.param(
        ["run", *MANAGED, *sets('uvm.advise.per_buffer=["none", "read-mostly"]')],
        ["uvm.advise.per_buffer", "1 managed allocation"],
        id="more-hints-than-allocations-ignored",
    ),
    pytest.param(
        ["run", "--preset", "mgpusim-r9nano", "--trace", "t.csv", *sets("workload.trace.gpu=2")],
        ["t.csv", "workload.trace.gpu", "no record of GPU 2"],
        id="trace-gpu-without-records-ran-empty",
    ),
    pytest.param(
        ["run", "--preset", "mgpusim-r9nano", "--trace", "t.csv", *sets("workload.trace.engine=cycle")],
        ["workload.trace.engine", "mgpusim-r9nano"],
        id="unknown-trace-engine",
    ),
    pytest.param(
        [
            "run",
            "--preset",
            "mgpusim-r9nano",
            "--trace",
            "t.csv",
            *sets("workload.trace.engine=mgpusim-r9nano", "workload.trace.gpu=2"),
        ],
        ["workload.trace.gpu", "GPU 1 of a single-GPU trace"],
        id="cycle-engine-on-another-gpu",
    ),
    pytest.param(
        [
            "run",
            "--preset",
            "mgpusim-r9nano",
            "--trace",
            "t.csv",
            *sets("workload.trace.engine=mgpusim-r9nano", "gpu.l1tlb.mshrs=32"),
        ],
        ["gpu.l1tlb.mshrs", "is not read with workload.trace.engine"],
        id="cycle-engine-ignores-the-gpu-model",
    ),
    pytest.param(
        ["run", "--preset", "mgpusim-r9nano", "--trace", "t.csv", *sets("workload.trace.tie_seed=3")],
        ["workload.trace.tie_seed", "read only by workload.trace.engine"],
        id="tie-seed-ignored-by-the-event-model",
    ),
    pytest.param(
        ["run", "--preset", "titan-v", "--trace", "t.csv", *sets("workload.managed=true")],
        ["workload.managed", "timed trace", "warp trace"],
        id="managed-timed-trace-ran-unmanaged",  # identity-mapped: nothing faulted, and nothing said so
    ),
    pytest.param(
        ["run", "--preset", "kaveri-apu", "--trace", str(ACCELSIM)],
        [str(ACCELSIM), "32-lane warps", "gpu.warp_size is 64"],
        id="accelsim-on-64-lane-gpu-named-a-temporary-file",
    ),
    pytest.param(
        ["run", "--preset", "titan-v", *sets("workload.kind=warp-trace", "workload.warp_trace.path=../w.uvmt")],
        ["../w.uvmt", "cannot read", "relative path is taken from the current directory"],
        id="relative-trace-path-said-not-where-it-looked",  # config and sweep files keep the current directory
    ),
    pytest.param(["plot", "runtime-bars", "damaged"], ["damaged/runs/x.parquet"], id="damaged-sweep-internal-error"),
    pytest.param(
        ["plot", "batch-time-vs-bytes", "nesting.toml"],
        ["nesting.toml", "is not a directory"],
        id="plot-of-a-file-was-an-unwritable-output",  # exit 1, "nesting.toml/batch-time-vs-bytes.png: cannot write"
    ),
    # Refused well before: a sample of the sweep's table.
    pytest.param(["run", *TINY, *sets("gpu.l1tlb.entires=3")], ["did you mean `gpu.l1tlb.entries`"], id="typo"),
    pytest.param(["run", *TINY, *sets("gpu.core_mhz=nan")], ["gpu.core_mhz", "NaN"], id="nan"),
    pytest.param(
        ["run", *TINY, *sets("link.bandwidth_gbps=-inf")], ["link.bandwidth_gbps", "got -inf"], id="minus-inf"
    ),
    pytest.param(["run", *TINY, *sets("gpu.sms=18446744073709551616")], ["gpu.sms", "out of range"], id="beyond-u64"),
    pytest.param(["run", *TINY, *sets("gpu.sms={a = 1}")], ["gpu.sms", "not a section"], id="table-for-a-value"),
    pytest.param(
        ["run", *TINY, *sets("uvm.gpu_memory_bytes=12 parsecs")],
        ["uvm.gpu_memory_bytes", "unit `parsecs`"],
        id="bad-unit",
    ),
    pytest.param(
        ["run", *TINY, *sets("uvm.replay_policy=sometimes")], ["uvm.replay_policy", "`sometimes`"], id="unknown-variant"
    ),
    pytest.param(
        ["run", *TINY, *sets("workload.kind=regulr")],
        ["workload.kind", "`regulr`; did you mean `regular`?"],
        id="misspelt-variant",
    ),
    pytest.param(["run", *TINY, *sets("gpu.scheduler=1")], ["gpu.scheduler", "not a name"], id="number-for-an-enum"),
    pytest.param(["run", *TINY, *sets("multi.gpus=33")], ["multi.gpus", "between 1 and 32"], id="33-gpus"),
    pytest.param(
        ["run", "--preset", "li-4gpu-gmmu", *sets("multi.gpus_per_switch=0")],
        ["multi.gpus_per_switch", "between 1 and 32"],
        id="switch-of-no-gpus",
    ),
    pytest.param(["run", *TINY, *sets("uvm.batch_size=8192")], ["uvm.batch_size", "got 8192"], id="batch-above-buffer"),
    pytest.param(["run", *TINY, *sets("gpu.l1tlb.ways=64")], ["gpu.l1tlb.ways", "got 64"], id="ways-above-entries"),
    pytest.param(
        ["run", *TINY, *sets("uvm.gpu_memory_bytes=1MiB")], ["uvm.gpu_memory_bytes", "2 MiB chunk"], id="below-a-chunk"
    ),
    pytest.param(
        ["run", "--preset", "kaveri-apu", *sets("translation.managed_large_ptes=true")],
        ["translation.managed_large_ptes", "gmmu"],
        id="large-ptes-on-an-iommu",
    ),
    # Was accepted and ignored: the PPR path maps pages in place (a debug-build stress run's invariant check).
    pytest.param(
        ["run", "--preset", "mgpusim-r9nano", *sets("workload.managed=true", "uvm.oversubscription=2")],
        ["uvm.oversubscription", "gmmu"],
        id="oversubscription-on-an-iommu",
    ),
    pytest.param(["run", "nesting.toml"], ["nesting.toml", "did you mean `gpu.sms`"], id="key-at-the-wrong-level"),
    pytest.param(["trace", "info", "short.csv"], ["short.csv:2", "size"], id="truncated-trace-line"),
    # Found by the adversarial audit of 2026-12-03.
    pytest.param(
        ["trace", "info", "zeros.csv"],
        ["zeros.csv:1", "a line longer than 64 KiB"],
        id="line-without-breaks-read-whole",  # 4x the file in memory (1.2 GB for 300 MB), quoted whole in the error
    ),
    pytest.param(
        ["run", "--preset", "titan-v", "--trace", "zacc/kernelslist.g"],
        ["zacc/kernel-1.traceg:1", "a line longer than 64 KiB"],
        id="accelsim-kernel-without-breaks-read-whole",
    ),
    pytest.param(
        ["trace", "info", "zlist/kernelslist.g"],
        ["zlist/kernelslist.g:1", "a line longer than 64 KiB"],
        id="kernelslist-without-breaks-quoted-whole",
    ),
    pytest.param(
        ["trace", "info", "bom.csv"],
        ["bom.csv:1", "byte-order mark"],
        id="bom-header-said-header-is-the-expected-one",  # "header is `time_ns,...`, expected `time_ns,...`"
    ),
    pytest.param(
        ["run", *TINY, *sets("gpu.sms=-1")],
        ["gpu.sms", "-1 is out of range: expected a non-negative integer"],
        id="negative-count-said-expected-u32",
    ),
    pytest.param(
        ["run", *TINY, *sets("gpu.sms=4294967296")],
        ["gpu.sms", "4294967296 is out of range: expected an integer of at most 4294967295"],
        id="count-beyond-u32-said-expected-u32",
    ),
    pytest.param(
        ["run", *TINY, *sets("multi.model_one_gpu=true")],
        ["translation.page_size", "multi.model_one_gpu = true", "in conflict with `multi.model_one_gpu` from --set"],
        id="model-one-gpu-page-size-blamed-multi-gpus",  # "must be 4KiB with multi.gpus > 1", of multi.gpus = 1
    ),
    pytest.param(
        ["run", *TINY, "--set", "gpu.scheduler=\udcff"],
        ["`gpu.scheduler=\\xff` is not UTF-8"],
        id="non-utf8-argument-internal-error",  # exit 1, "internal error: UnicodeEncodeError"
    ),
    pytest.param(
        ["trace", "info", "\udcff.csv"],
        ["`\\xff.csv` is not UTF-8"],
        id="non-utf8-file-name-internal-error",
    ),
    pytest.param(
        ["run", "--preset", "./damaged"],
        ["preset file `./damaged` is a directory, not a file"],
        id="preset-directory-said-does-not-exist",
    ),
    # A FIFO with no writer: opening it waited forever (in the core, deaf to SIGTERM); a pipe with one lost its
    # first bytes to the format check ("header is `avefront,kind,...`").
    pytest.param(["trace", "info", "fifo.csv"], ["fifo.csv", "not a regular file"], id="fifo-trace-info-hung"),
    pytest.param(
        ["run", "--preset", "mgpusim-r9nano", "--trace", "fifo.csv"],
        ["fifo.csv", "not a regular file"],
        id="fifo-trace-run-hung",
    ),
    pytest.param(
        ["run", "--preset", "mgpusim-r9nano", *sets("workload.kind=trace", "workload.trace.path=fifo.csv")],
        ["fifo.csv", "not a regular file"],
        id="fifo-trace-by-set-hung",
    ),
    pytest.param(
        ["run", "--preset", "titan-v", *sets("workload.kind=warp-trace", "workload.warp_trace.path=fifo.csv")],
        ["fifo.csv", "not a regular file"],
        id="fifo-warp-trace-hung",
    ),
    pytest.param(
        ["run", "--preset", "titan-v", *sets("workload.kind=accelsim", "workload.accelsim.path=fifo.g")],
        ["fifo.g", "not a regular file"],
        id="fifo-kernelslist-hung",  # read for its kernel files (no output over an input) before the core
    ),
    # Session 59: the audit's leftovers.
    pytest.param(["run", *TINY, "-o", ""], ["'-o' / '--out'", "an empty path"], id="empty-out-wrote-cwd"),
    # Blanks only: a directory named "  " is no more what the user meant than `.` (a check of `not value` let it by).
    pytest.param(["run", *TINY, "-o", "  "], ["'-o' / '--out'", "an empty path"], id="blank-out"),
    pytest.param(["trace", "info", ""], ["an empty path"], id="empty-trace-said-dot-is-a-directory"),
    pytest.param(["trace", "record", *TINY, ""], ["an empty path"], id="empty-record-out"),
    pytest.param(
        ["trace", "info", "damaged.uvmt"],
        ["damaged.uvmt", "byte 0", "no UVMTRACE magic"],
        id="damaged-magic-read-as-csv",  # "line 1: ... stream did not contain valid UTF-8"
    ),
    pytest.param(
        ["run", "--preset", "titan-v", "--trace", "damaged.uvmt"],
        ["damaged.uvmt", "no UVMTRACE magic"],
        id="damaged-magic-replayed-as-csv",
    ),
]


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    (tmp_path / "t.csv").write_text(CSV)
    (tmp_path / "short.csv").write_text(CSV.splitlines()[0] + "\n10,1,0,0,R,0x1000\n")
    (tmp_path / "nesting.toml").write_text("sms = 4\n")
    (tmp_path / "damaged" / "runs").mkdir(parents=True)
    (tmp_path / "damaged" / "runs" / "x.parquet").write_bytes(b"junk")
    (tmp_path / "zeros.csv").write_bytes(bytes(100_000))  # no line break: a zero-filled file
    (tmp_path / "zacc").mkdir()
    (tmp_path / "zacc" / "kernelslist.g").write_text("kernel-1.traceg\n")
    (tmp_path / "zacc" / "kernel-1.traceg").write_bytes(bytes(100_000))
    (tmp_path / "zlist").mkdir()
    (tmp_path / "zlist" / "kernelslist.g").write_bytes(bytes(100_000))
    (tmp_path / "bom.csv").write_text("\ufeff" + CSV)
    (tmp_path / "\udcff.csv").write_text(CSV)  # a file name of byte 0xff, not UTF-8
    # A binary trace whose first byte is damaged (0xff): it used to be taken for CSV text.
    (tmp_path / "damaged.uvmt").write_bytes(b"\xffVMTRACE" + bytes(4096))
    os.mkfifo(tmp_path / "fifo.csv")
    os.mkfifo(tmp_path / "fifo.g")
    return tmp_path


@pytest.mark.parametrize(("args", "expected"), BAD)
def test_bad_input_exits_2_with_one_line_naming_it(inputs: Path, args: list[str], expected: list[str]) -> None:
    p = uvmsim_cli(inputs, *args, *(["-q"] if args[0] == "run" else []))
    assert "panicked" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("uvmsim: error: "), p.stderr
    for word in expected:
        assert word in lines[0], lines[0]
    assert not (inputs / "uvmsim-out").exists()


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(["gpu.l1tlb.mshrs=4294967295", "gpu.l2tlb.mshrs=4294967295"], id="mshrs-allocated-34GB"),
        pytest.param(["gmmu.walker.queue_depth=4294967295"], id="walker-queue-u32-max"),
        pytest.param(["gpu.l1tlb.latency_cycles=1000000", "gpu.l2d.latency_cycles=1000000"], id="latency-edges"),
        pytest.param(["uvm.fault_buffer_entries=1048576", "uvm.batch_size=1048576"], id="fault-buffer-edge"),
    ],
)
def test_hostile_but_valid_values_run_and_finish(inputs: Path, extra: list[str]) -> None:
    # Values inside their ranges that once crashed (out of memory) or, in release builds, silently wrapped (the walker
    # queue: threads + queue_depth in u32; the Rust unit test catches that one): they run.
    p = uvmsim_cli(inputs, "run", *MANAGED, *sets(*extra), "-q", "-o", "out")
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert uvmsim.load(inputs / "out").metrics["gpu0.warp_mem_insts"] > 0


def test_an_unwritable_timeline_fails_before_the_run(inputs: Path) -> None:
    # Was: the run, then "[Errno 17] File exists: 'file'" (exit 1) with OUT already written.
    (inputs / "file").write_text("")
    p = uvmsim_cli(inputs, "run", *TINY, "--timeline", "file/t.json", "-q", "-o", "out")
    assert p.returncode == 1, p.stderr
    assert p.stderr == "uvmsim: error: file/t.json: cannot write: Not a directory\n", p.stderr
    assert not (inputs / "out").exists()
    # Missing directories above it are still created.
    p = uvmsim_cli(inputs, "run", *TINY, "--timeline", "new/dir/t.json", "-q", "-o", "out")
    assert p.returncode == 0 and (inputs / "new" / "dir" / "t.json").is_file(), p.stderr


def test_a_damaged_sweep_run_file_is_bad_input_naming_it(inputs: Path) -> None:
    with pytest.raises(uvmsim.ConfigError, match=r"x\.parquet: not a readable Parquet table .* --resume"):
        load_sweep(inputs / "damaged")


def test_a_long_value_is_clipped_in_the_message(inputs: Path) -> None:
    # Was: the 5,000-character value echoed whole, twice over the terminal.
    long = "9" * 5000
    p = uvmsim_cli(inputs, "run", *TINY, *sets(f"gpu.sms={long}"), "-q")
    assert p.returncode == 2, p.stderr
    line = p.stderr.strip()
    assert "gpu.sms" in line and "out of range" in line and "[4,860 characters]" in line, line
    assert len(line) < 500, len(line)


def test_an_output_through_a_symbolic_link_writes_its_target(inputs: Path) -> None:
    # Was: the rename replaced the link with a regular file and left the file it named unchanged.
    (inputs / "real.uvmt").write_text("old")
    (inputs / "link.uvmt").symlink_to("real.uvmt")
    (inputs / "dangling.uvmt").symlink_to("made.uvmt")
    for link in ("link.uvmt", "dangling.uvmt"):
        p = uvmsim_cli(inputs, "trace", "convert", "t.csv", link)
        assert p.returncode == 0, p.stderr
        assert (inputs / link).is_symlink()
    assert (inputs / "real.uvmt").read_bytes().startswith(b"UVMTRACE")
    assert (inputs / "made.uvmt").read_bytes().startswith(b"UVMTRACE")
    # The Python writers (summary.json, timelines, plots) do the same.
    (inputs / "t.json").write_text("old")
    (inputs / "tl.json").symlink_to("t.json")
    p = uvmsim_cli(inputs, "run", *MANAGED, "--timeline", "tl.json", "-q", "-o", "out")
    assert p.returncode == 0, p.stderr
    assert (inputs / "tl.json").is_symlink() and (inputs / "t.json").read_text().startswith("{")
