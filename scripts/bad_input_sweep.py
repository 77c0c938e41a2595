#!/usr/bin/env python3
"""A systematic bad-input sweep of the ``uvmsim`` command line (not part of CI: 10 to 25 minutes on 2 cores).

The project's contract (DESIGN.md): bad input ends with exit code 2 and one line ``uvmsim: error: ...`` naming the
file, key or line and what is accepted; never a Rust panic, a Python traceback or a hang. This script tries to break
it and tabulates what happens.

How to run it (from the repository, with the package installed, e.g. in a venv)::

    python scripts/bad_input_sweep.py                      # every part, 2 jobs, report on stdout
    python scripts/bad_input_sweep.py --part keys --only uvm.prefetch --jobs 1
    python scripts/bad_input_sweep.py --report sweep.md --all-rows

What it checks, each case in its own ``python -m uvmsim`` subprocess (a 20 s timeout, a 6 GiB address-space limit):

- ``keys``: every config key ``uvmsim config --json`` lists, on a tiny run in a context where the key matters
  (a ``workload.<kind>.*`` key runs that kind; ``uvm.*`` managed memory; ``iommu.*`` the Kaveri APU; ``multi.*``
  both four-GPU presets), given hostile values by type: 0, -1, 2^32, 2^63-1, 2^64, 1e30, nan, inf, an empty string,
  the wrong type (a string for a number, a number for a string, a table for a scalar, an array), a bad unit
  ("12 parsecs", "4KB") and an unknown enum variant. Every run gets ``sim.max_events`` as a budget, so most hostile
  values that ask for a legitimately long run stop with "event budget reached" (exit 1, reported as ``budget``).
  A run whose events are few (TLB hits resolve without one) or whose build is long can still time out: those
  checked by hand to be legitimately long are listed in ``KNOWN_LONG``.
- ``combos``: contradictory combinations (batch larger than the buffer, ways above entries, zero or 33 GPUs, GPU
  memory smaller than one chunk, ...).
- ``cli``: every subcommand with missing, extra and bad arguments and files: a missing file, a directory for a
  file, an empty file, a TOML syntax error, a key at the wrong nesting level, an unwritable output.
- ``bounds`` (with ``keys``): each key at the edges of the range its error message gave in the first pass.
- ``traces``: malformed and truncated traces (CSV, gzip, .uvmt, Accel-Sim) through ``trace info``, ``run`` and
  ``trace convert``.

Verdicts: ``good`` (exit 2, one line naming the key or file), ``ok`` (exit 0: the value is accepted), ``budget``
(the event budget stopped a long run), ``long`` (a timeout listed in ``KNOWN_LONG``: a legitimately long run whose
work is in the event loop or the build, not a hang), ``expected`` (a CLI case with the exit code its row
expects), and the bugs:
``PANIC`` (a Rust panic or exit 101), ``TRACEBACK``, ``CRASH`` (killed by a signal: out of memory, abort),
``HANG`` (the timeout), ``INTERNAL`` (exit 1 "internal error": an uncaught Python exception), ``NO-KEY`` (exit 2
whose message does not name the key), ``MULTILINE``, ``SIMFAIL`` (exit 1 "simulation failed" for a bad value:
bad input the validation missed), ``EXIT-n`` (any other exit code), ``NAN-METRIC`` (accepted, but a metric is NaN or
infinite) and ``ACCEPTED?`` (exit 0 for a value no key should accept: NaN, an infinity, 1e30).
Bugs are listed first; the exit status is 1 if there is any.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

TIMEOUT_S = 20.0
MEMORY_LIMIT = 6 << 30  # address space per case: an allocation beyond it aborts (verdict CRASH)
EVENT_BUDGET = "sim.max_events=3000000"
BUG_VERDICTS = (
    "PANIC",
    "TRACEBACK",
    "CRASH",
    "HANG",
    "INTERNAL",
    "NO-KEY",
    "MULTILINE",
    "SIMFAIL",
    "NAN-METRIC",
    "ACCEPTED?",
)

# The base of each key's tiny run (uvmsim arguments before the hostile --set).
STRIDE = ["--set", "workload.kind=stride", "--set", "workload.stride.accesses=200"]
BASE_GPU = ["--preset", "titan-v", *STRIDE, "--set", "workload.managed=true"]
BASE_APU = ["--preset", "kaveri-apu", *STRIDE, "--set", "workload.managed=true"]
BASES_MULTI = [
    ["--preset", "li-4gpu-gmmu", "--set", "workload.kind=fir", "--set", "workload.fir.length=8192"],
    ["--preset", "li-4gpu-ats", "--set", "workload.kind=fir", "--set", "workload.fir.length=8192"],
]
# Workload kinds that need another preset, or a trace file (created in the work directory by `fixtures`).
KIND_BASE = {
    "shootdown": ["--preset", "kaveri-apu", "--set", "workload.shootdown.count=20"],
    "trace": ["--preset", "mgpusim-r9nano", "--set", "workload.trace.path=t.csv"],
    "warp-trace": ["--preset", "titan-v", "--set", "workload.warp_trace.path=w.uvmt"],
    "accelsim": ["--preset", "titan-v", "--set", "workload.accelsim.path=accelsim/kernelslist.g"],
}

# Hostile values, written as --set takes them (TOML; anything that is not TOML is a bare string).
INT_VALUES = [
    "0",
    "-1",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551616",
    "1e30",
    "nan",
    "inf",
    '""',
    '"abc"',
    "1.5",
    "true",
    "{a = 1}",
    "[1]",
    "12 parsecs",
]
FLOAT_VALUES = [
    "0",
    "-1",
    "1e30",
    "1e-300",
    "nan",
    "inf",
    "-inf",
    '""',
    '"abc"',
    "true",
    "{a = 1}",
    "[1.0]",
    "12 parsecs",
]
BOOL_VALUES = ["0", "1", '"yes"', '""', "{a = 1}", "nan"]
ENUM_VALUES = ['""', '"bogus"', '"GTO"', "1", "true", "{a = 1}", "[]"]
SIZE_VALUES = [
    "0",
    "-1",
    "3",
    '""',
    '"12 parsecs"',
    '"4KB"',
    '"-4KiB"',
    '"1e30"',
    "1e30",
    "1.5",
    '"18446744073709551616"',
    '"16777216TiB"',
    "9223372036854775807",
    "true",
    "{a = 1}",
]
PATH_VALUES = ['""', '"missing.csv"', '"."', '"empty.csv"', '"garbage.bin"', "1", "{a = 1}"]
LIST_VALUES = ['"x"', "1", '["bogus"]', "[{a = 1}]", "[-1]", "[99]", "[1.5]", '[""]', "[[1]]", "{a = 1}"]
# Accepted for any key, a value among these is a bug: a float range check is missing.
NEVER_VALID = {"nan", "inf", "-inf", "1e30", '"1e30"'}

SIZE_RE = re.compile(r"^\d+(B|KiB|MiB|GiB|TiB)$")


@dataclass
class Case:
    """One invocation: its arguments, what its message must name, and the exit codes that are fine."""

    part: str
    name: str
    args: list[str]
    names: str | None = None  # a word the error message must contain (the key or file)
    ok_codes: tuple[int, ...] = (0, 2)
    value: str | None = None
    kind: str = ""  # keys: the value's type (int, float, size, ...)
    base: str = ""  # keys: the preset of the base run, when the key is tried on several


@dataclass
class Outcome:
    case: Case
    code: int | None
    seconds: float
    stderr: str
    verdict: str = ""
    notes: list[str] = field(default_factory=list)


def uvmsim_cmd() -> list[str]:
    return [sys.executable, "-m", "uvmsim"]


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def value_kind(key: str, default: object) -> str:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, list):
        return "list"
    if isinstance(default, str):
        if key.endswith(".path"):
            return "path"
        return "size" if SIZE_RE.match(default) else "enum"
    return "other"


VALUES = {
    "int": INT_VALUES,
    "float": FLOAT_VALUES,
    "bool": BOOL_VALUES,
    "enum": ENUM_VALUES,
    "size": SIZE_VALUES,
    "path": PATH_VALUES,
    "list": LIST_VALUES,
}


def bases_for(key: str) -> list[list[str]]:
    """The tiny runs in which `key` matters."""
    parts = key.split(".")
    if parts[0] == "workload" and len(parts) == 3:
        kind = parts[1].replace("_", "-")
        return [KIND_BASE.get(kind, ["--preset", "titan-v"]) + ["--set", f"workload.kind={kind}"]]
    if parts[0] == "iommu":
        return [BASE_APU]
    if parts[0] == "multi":
        return BASES_MULTI
    return [BASE_GPU]


def key_cases(only: str | None) -> list[Case]:
    ref = json.loads(subprocess.run([*uvmsim_cmd(), "config", "--json"], capture_output=True, check=True).stdout)
    cases = []
    for p in ref:
        key = p["key"]
        if only and not key.startswith(only):
            continue
        kind = value_kind(key, p["default"])
        for bi, base in enumerate(bases_for(key)):
            budget = [] if key == "sim.max_events" else ["--set", EVENT_BUDGET]
            for v in VALUES.get(kind, []):
                tag = base[1] if bi else ""
                name = f"{key}={v}" + (f" [{tag}]" if tag else "")
                args = ["run", *base, *budget, "--set", f"{key}={v}", "-q"]
                cases.append(Case("keys", name, args, names=key, value=v, kind=kind, base=tag))
    return cases


BOUND_RE = re.compile(
    r"(?:between|from) (-?[0-9][0-9.e+]*) (?:and|to) (-?[0-9][0-9.e+]*)|at most (-?[0-9][0-9.e+]*)"
    r"|: ([0-9]+) cycles at gpu\.core_mhz"
)


def bound_cases(outcomes: Sequence[Outcome]) -> list[Case]:
    """The extremes each key accepts, read from its range message in the first pass: a value at the edge of the
    range must run (or fail only by the event budget) as promptly as any other."""
    seen: set[tuple[str, str, str]] = set()
    cases = []
    for o in outcomes:
        c = o.case
        if c.part != "keys" or o.verdict != "good" or c.names is None:
            continue
        for m in BOUND_RE.finditer(o.stderr):
            for raw in m.groups():
                if raw is None:
                    continue
                try:
                    v = float(raw)
                except ValueError:
                    continue
                text = str(int(v)) if v.is_integer() and c.kind in ("int", "size") else repr(v)
                if (c.names, text, c.base) in seen:
                    continue
                seen.add((c.names, text, c.base))
                args = [a if a != f"{c.names}={c.value}" else f"{c.names}={text}" for a in c.args]
                name = f"{c.names}={text}" + (f" [{c.base}]" if c.base else "")
                # At the edge a value may contradict another key of the preset: any key may be named.
                cases.append(Case("bounds", name, args, names="key `", value=text, kind=c.kind, base=c.base))
    return cases


def combo_cases() -> list[Case]:
    """Contradictory combinations: each must run (exit 0) or be refused naming one of its keys."""
    rows: list[tuple[str, list[str], str]] = [
        ("batch larger than the fault buffer", ["uvm.batch_size=8192"], "uvm.batch_size"),
        ("fault buffer of one entry", ["uvm.fault_buffer_entries=1", "uvm.batch_size=1"], "uvm."),
        ("huge fault buffer", ["uvm.fault_buffer_entries=4294967295"], "uvm.fault_buffer_entries"),
        ("L1 TLB ways above entries", ["gpu.l1tlb.ways=64"], "gpu.l1tlb"),
        ("L1 TLB entries not a multiple of ways", ["gpu.l1tlb.entries=48"], "gpu.l1tlb"),
        ("three-set L1 TLB", ["gpu.l1tlb.entries=96"], "gpu.l1tlb"),
        ("L2 TLB 24 entries 16 ways", ["gpu.l2tlb.entries=24"], "gpu.l2tlb"),
        ("L2 TLB removed", ["gpu.l2tlb.entries=0"], "gpu.l2tlb"),
        ("L1 cache not whole lines", ["gpu.l1d.size_bytes=100"], "gpu.l1d"),
        ("L1 cache of one line, 4 ways", ["gpu.l1d.size_bytes=128"], "gpu.l1d"),
        ("line as large as the L1", ["gpu.line_bytes=4096", "gpu.l1d.size_bytes=4KiB", "gpu.l1d.ways=1"], "gpu."),
        ("µTLB shared by more SMs than exist", ["gpu.sms_per_l1tlb=1000"], "gpu.sms_per_l1tlb"),
        ("µTLB sharing not a divisor", ["gpu.sms_per_l1tlb=3"], "gpu.sms_per_l1tlb"),
        ("CTA not whole warps", ["workload.threads_per_cta=33"], "workload.threads_per_cta"),
        ("CTA above the warp slots", ["gpu.max_warps_per_sm=1"], "workload.threads_per_cta"),
        ("back-pressure without an L1 cache", ["gpu.vmem.backpressure=true", "gpu.l1d.size_bytes=0"], "gpu.vmem"),
        ("GPU memory below one chunk", ["uvm.gpu_memory_bytes=1MiB"], "uvm.gpu_memory_bytes"),
        ("GPU memory of one 4 KiB page", ["uvm.gpu_memory_bytes=4096"], "uvm.gpu_memory_bytes"),
        ("GPU memory of one chunk, 64-chunk PMA batches", ["uvm.gpu_memory_bytes=2MiB"], "uvm."),
        ("1 GiB pages in 2 MiB of GPU memory", ["translation.page_size=1GiB", "uvm.gpu_memory_bytes=2MiB"], "uvm."),
        ("oversubscription and a memory size", ["uvm.oversubscription=2", "uvm.gpu_memory_bytes=2MiB"], "uvm."),
        ("oversubscription of unmanaged memory", ["workload.managed=false", "uvm.oversubscription=2"], "uvm."),
        ("prefetch of unmanaged memory", ["workload.managed=false", "workload.prefetch_inputs=true"], "workload."),
        (
            "thrashing threshold above the pin threshold",
            ["uvm.thrashing.threshold=7", "uvm.thrashing.pin_threshold=1"],
            "uvm.thrashing",
        ),
        ("IOMMU mode on a discrete GPU preset", ["translation.mode=iommu"], "translation.mode"),
        ("zero GPUs", ["multi.gpus=0"], "multi.gpus"),
        ("33 GPUs", ["multi.gpus=33"], "multi.gpus"),
        ("4 GPUs on a one-GPU preset", ["multi.gpus=4"], "multi."),
        ("walker with no page-walk-cache ways", ["gmmu.walker.pwc_ways=0"], "gmmu.walker.pwc_ways"),
        ("walker with an empty queue", ["gmmu.walker.queue_depth=0"], "gmmu.walker.queue_depth"),
        ("L1 TLB with no MSHRs", ["gpu.l1tlb.mshrs=0"], "gpu.l1tlb.mshrs"),
        ("advice for buffer 99", ["uvm.advise.policy=read-mostly", "uvm.advise.buffers=[99]"], "uvm.advise"),
        (
            "per-buffer advice and a policy",
            ["uvm.advise.policy=read-mostly", 'uvm.advise.per_buffer=["none"]'],
            "uvm.advise",
        ),
        (
            "replay wait longer than the replay",
            ["uvm.fetch_after_replay_wait=true", "uvm.replay_latency_ns=1e6"],
            "uvm.",
        ),
        ("µTLB limit above the buffer", ["uvm.utlb_fault_limit=100000", "uvm.fault_buffer_entries=256"], "uvm."),
    ]
    multi_rows: list[tuple[str, list[str], str]] = [
        ("five apps on four GPUs", ['multi.apps=["fir","fir","fir","fir","fir"]'], "multi.apps"),
        ("first app GPU past the last", ['multi.apps=["fir"]', "multi.apps_first_gpu=4"], "multi.apps"),
        ("an unknown app", ['multi.apps=["nope"]'], "multi.apps"),
        ("one GPU in a four-GPU preset", ["multi.gpus=1"], "multi."),
        ("zero GPUs", ["multi.gpus=0"], "multi.gpus"),
        ("33 GPUs", ["multi.gpus=33"], "multi.gpus"),
        ("host MMU ways above entries", ["multi.host_mmu.tlb_ways=4096"], "multi.host_mmu"),
        ("Trans-FW forwarding without a PRT", ["multi.transfw.forwarding=true"], "multi.transfw"),
        ("IDYLL lazy without a directory", ["multi.idyll.lazy=true"], "multi.idyll"),
        ("Least-TLB spill without Least-TLB", ["multi.least_tlb.spill=true"], "multi.least_tlb"),
    ]
    cases = []
    for title, sets, names in rows:
        args = ["run", *BASE_GPU, "--set", EVENT_BUDGET]
        for s in sets:
            args += ["--set", s]
        cases.append(Case("combos", title, [*args, "-q"], names=names))
    for title, sets, names in multi_rows:
        for base in BASES_MULTI:
            args = ["run", *base, "--set", EVENT_BUDGET]
            for s in sets:
                args += ["--set", s]
            cases.append(Case("combos", f"{title} [{base[1]}]", [*args, "-q"], names=names))
    return cases


def cli_cases() -> list[Case]:
    """Each subcommand with missing, extra and bad arguments and files (files made by `fixtures`)."""
    run = ["run", "--preset", "titan-v", *STRIDE]
    c: list[tuple[str, list[str], str | None, tuple[int, ...]]] = [
        ("no command", [], None, (0,)),
        ("unknown command", ["frobnicate"], "frobnicate", (2,)),
        ("run with nothing", ["run"], "CONFIG", (2,)),
        ("run missing config", ["run", "missing.toml"], "missing.toml", (2,)),
        ("run a directory as config", ["run", "adir"], "adir", (2,)),
        ("run an empty config", ["run", "empty.toml", *STRIDE[2:], "-q"], None, (0,)),
        ("run a TOML syntax error", ["run", "syntax.toml"], "syntax.toml", (2,)),
        ("run a key at the wrong level", ["run", "nesting.toml"], "nesting.toml", (2,)),
        ("run a section at the wrong level", ["run", "nesting2.toml"], "nesting2.toml", (2,)),
        ("run a binary config", ["run", "garbage.bin"], "garbage.bin", (2,)),
        ("run a Latin-1 config", ["run", "latin1.toml"], "latin1.toml", (2,)),
        ("run a config with a duplicate key", ["run", "dup.toml"], "dup.toml", (2,)),
        ("run two configs", ["run", "empty.toml", "empty.toml"], None, (2,)),
        ("run an empty preset name", ["run", "--preset", ""], "preset", (2,)),
        ("run a missing preset file", ["run", "--preset", "missing.toml"], "missing.toml", (2,)),
        ("run a directory as preset", ["run", "--preset", "adir"], "adir", (2,)),
        ("run a preset with a syntax error", ["run", "--preset", "syntax.toml"], "syntax.toml", (2,)),
        ("run a missing trace", ["run", "--preset", "mgpusim-r9nano", "--trace", "missing.csv"], "missing.csv", (2,)),
        ("run a directory as trace", ["run", "--preset", "mgpusim-r9nano", "--trace", "adir"], "adir", (2,)),
        ("run an empty trace", ["run", "--preset", "mgpusim-r9nano", "--trace", "empty.csv"], "empty.csv", (2,)),
        ("run a garbage trace", ["run", "--preset", "mgpusim-r9nano", "--trace", "garbage.bin"], "garbage.bin", (2,)),
        ("run --set without =", [*run, "--set", "gpu.sms"], "gpu.sms", (2,)),
        ("run --set empty key", [*run, "--set", "=3"], "empty key", (2,)),
        ("run --set double dot", [*run, "--set", "gpu..sms=3"], "gpu..sms", (2,)),
        ("run --set empty value", [*run, "--set", "gpu.sms="], "gpu.sms", (2,)),
        ("run --set unknown section", [*run, "--set", "gpux.sms=3"], "gpux", (2,)),
        ("run --set below a value", [*run, "--set", "gpu.sms.x=3"], "gpu.sms", (2,)),
        ("run --set a table at the root", [*run, "--set", "gpu={sms = 3}"], "gpu", (0, 2)),
        ("run -o an existing file", [*run, "-o", "empty.toml", "-q"], "empty.toml", (1,)),
        ("run -o below a file", [*run, "-o", "empty.toml/out", "-q"], "empty.toml/out", (1,)),
        ("run -o in /proc", [*run, "-o", "/proc/uvmsim-out", "-q"], "/proc/uvmsim-out", (1, 2)),
        ("run --timeline to a directory", [*run, "--timeline", "adir", "-q"], "adir", (1, 2)),
        (
            "run --timeline onto its trace",
            ["run", "--preset", "mgpusim-r9nano", "--trace", "t.csv", "--timeline", "t.csv", "-q"],
            "t.csv",
            (2,),
        ),
        ("run --timeline below a file", [*run, "--timeline", "empty.toml/t.json", "-q"], "t.json", (1, 2)),
        ("run --timeline-max-batches 0", [*run, "--timeline", "t.json", "--timeline-max-batches", "0"], "0", (2,)),
        ("run --timeline-max-batches x", [*run, "--timeline", "t.json", "--timeline-max-batches", "x"], "x", (2,)),
        ("run an unknown option", [*run, "--frobnicate"], "--frobnicate", (2,)),
        ("run -o with no value", [*run, "-o"], "-o", (2,)),
        ("config missing file", ["config", "missing.toml"], "missing.toml", (2,)),
        ("config --markdown --json", ["config", "--markdown", "--json"], "--markdown", (2,)),
        ("config --resolved bad --set", ["config", "--resolved", "--set", "gpu.smss=3"], "gpu.smss", (2,)),
        ("config --resolved unknown preset", ["config", "--resolved", "--preset", "nope"], "nope", (2,)),
        ("presets unknown", ["presets", "nope"], "nope", (2,)),
        ("presets empty name", ["presets", ""], "preset", (2,)),
        ("presets a directory", ["presets", "adir"], "adir", (2,)),
        ("presets a missing file", ["presets", "missing.toml"], "missing.toml", (2,)),
        ("presets two names", ["presets", "titan-v", "r9nano"], None, (2,)),
        ("workloads unknown", ["workloads", "nope"], "nope", (2,)),
        ("workloads empty name", ["workloads", ""], "workload", (2,)),
        ("reproduce unknown", ["reproduce", "nope"], "nope", (2,)),
        ("reproduce empty id", ["reproduce", ""], "experiment", (2,)),
        ("reproduce --all with an id", ["reproduce", "--all", "li-mpki"], "--all", (2,)),
        ("reproduce --markdown --quick", ["reproduce", "li-mpki", "--quick", "--markdown", "x.md"], "--quick", (2,)),
        ("reproduce --markdown missing file", ["reproduce", "li-mpki", "--markdown", "missing.md"], "missing.md", (2,)),
        ("reproduce --markdown a directory", ["reproduce", "li-mpki", "--markdown", "adir"], "adir", (2,)),
        (
            "reproduce --markdown without markers",
            ["reproduce", "li-mpki", "--markdown", "empty.csv"],
            "empty.csv",
            (2,),
        ),
        (
            "reproduce --set unknown key",
            ["reproduce", "apu-tlb-miss-latency", "--quick", "--set", "gpu.smss=3"],
            "gpu.smss",
            (2,),
        ),
        (
            "reproduce --set bad value",
            ["reproduce", "modern-presets", "--quick", "--set", "uvm.batch_size=x"],
            "uvm.batch_size",
            (2,),
        ),
        (
            "reproduce --set without =",
            ["reproduce", "apu-tlb-miss-latency", "--quick", "--set", "gpu.sms"],
            "gpu.sms",
            (2,),
        ),
        ("reproduce --set a section", ["reproduce", "apu-tlb-miss-latency", "--quick", "--set", "gpu=3"], "gpu", (2,)),
        (
            "reproduce --set a key no run reads",
            ["reproduce", "apu-fault-latency", "--quick", "--set", "uvm.batch_size=512"],
            "uvm.batch_size",
            (2,),
        ),
        (
            "reproduce -o a file",
            ["reproduce", "apu-tlb-miss-latency", "--quick", "-o", "empty.toml"],
            "empty.toml",
            (1,),
        ),
        ("sweep with nothing", ["sweep"], "SPEC", (2,)),
        ("sweep without -o", ["sweep", "spec.toml"], "--out", (2,)),
        ("sweep missing spec", ["sweep", "missing.toml", "-o", "sw"], "missing.toml", (2,)),
        ("sweep a directory as spec", ["sweep", "adir", "-o", "sw"], "adir", (2,)),
        ("sweep an empty spec", ["sweep", "empty.toml", "-o", "sw"], "empty.toml", (0, 2)),
        ("sweep a spec syntax error", ["sweep", "syntax.toml", "-o", "sw"], "syntax.toml", (2,)),
        ("sweep a spec with an unknown key", ["sweep", "spec-unknown.toml", "-o", "sw"], "gird", (2,)),
        ("sweep a grid of a bad key", ["sweep", "spec-badkey.toml", "-o", "sw"], "gpu.smss", (2,)),
        ("sweep a grid of bad values", ["sweep", "spec-badvalue.toml", "-o", "sw"], "gpu.sms", (1, 2)),
        ("sweep an empty grid axis", ["sweep", "spec-emptyaxis.toml", "-o", "sw"], "gpu.sms", (2,)),
        ("sweep a grid axis not a list", ["sweep", "spec-scalaraxis.toml", "-o", "sw"], "gpu.sms", (2,)),
        ("sweep grid and runs", ["sweep", "spec-both.toml", "-o", "sw"], "runs", (2,)),
        ("sweep runs not tables", ["sweep", "spec-runs-scalar.toml", "-o", "sw"], "runs", (2,)),
        ("sweep preset not a string", ["sweep", "spec-preset-int.toml", "-o", "sw"], "preset", (2,)),
        ("sweep a missing config", ["sweep", "spec-missing-config.toml", "-o", "sw"], "nothere.toml", (2,)),
        ("sweep set not a table", ["sweep", "spec-set-scalar.toml", "-o", "sw"], "set", (2,)),
        ("sweep a bad base --set value", ["sweep", "spec-badset.toml", "-o", "sw"], "gpu.sms", (2,)),
        ("sweep --jobs 0", ["sweep", "spec.toml", "-o", "sw", "--jobs", "0"], "--jobs", (2,)),
        ("sweep --engine bogus", ["sweep", "spec.toml", "-o", "sw", "--engine", "bogus"], "bogus", (2,)),
        ("sweep --address without ray", ["sweep", "spec.toml", "-o", "sw", "--address", "x"], "--address", (2,)),
        ("sweep -o a file", ["sweep", "spec.toml", "-o", "empty.toml"], "empty.toml", (1, 2)),
        (
            "sweep --resume into a run dir",
            ["sweep", "spec.toml", "-o", "runforresume", "--resume"],
            "runforresume",
            (0, 1, 2),
        ),
        ("trace with nothing", ["trace"], None, (0, 2)),
        ("trace unknown subcommand", ["trace", "nope"], "nope", (2,)),
        ("trace info missing", ["trace", "info", "missing.csv"], "missing.csv", (2,)),
        ("trace info a directory", ["trace", "info", "adir"], "adir", (2,)),
        ("trace info no file", ["trace", "info"], "FILE", (2,)),
        ("trace record nothing", ["trace", "record"], "OUT", (2,)),
        ("trace record three args", ["trace", "record", "a", "b", "c"], "at most", (2,)),
        ("trace record no workload", ["trace", "record", "o.uvmt"], "CONFIG", (2,)),
        ("trace record bad --set", ["trace", "record", "--set", "gpu.smss=1", "o.uvmt"], "gpu.smss", (2,)),
        ("trace record a missing config", ["trace", "record", "missing.toml", "o.uvmt"], "missing.toml", (2,)),
        ("trace record to a directory", ["trace", "record", "--preset", "titan-v", *STRIDE, "adir"], "adir", (1,)),
        ("trace record onto a config", ["trace", "record", "--preset", "titan-v", "empty.toml"], "empty.toml", (2,)),
        ("trace record below a file", ["trace", "record", "--preset", "titan-v", *STRIDE, "empty.toml/x"], "x", (1, 2)),
        (
            "trace record a trace workload",
            [
                "trace",
                "record",
                "--preset",
                "mgpusim-r9nano",
                "--set",
                "workload.kind=trace",
                "--set",
                "workload.trace.path=t.csv",
                "o.uvmt",
            ],
            "trace",
            (0, 2),
        ),
        ("trace convert missing", ["trace", "convert", "missing.csv", "o.uvmt"], "missing.csv", (2,)),
        ("trace convert one arg", ["trace", "convert", "t.csv"], "OUT", (2,)),
        ("trace convert a directory", ["trace", "convert", "adir", "o.uvmt"], "adir", (2,)),
        ("trace convert to itself", ["trace", "convert", "t.csv", "t.csv"], "t.csv", (2,)),
        ("trace convert to the other format's name", ["trace", "convert", "t.csv", "o.csv"], "o.csv", (2,)),
        ("trace convert a warp trace", ["trace", "convert", "w.uvmt", "o.csv"], "w.uvmt", (2,)),
        (
            "trace convert bad --set",
            ["trace", "convert", "accelsim/kernelslist.g", "o.uvmt", "--set", "gpu.smss=1"],
            "gpu.smss",
            (2,),
        ),
        ("bench unknown option", ["bench", "--bogus"], "--bogus", (2,)),
        ("bench extra argument", ["bench", "x"], "x", (2,)),
        ("plot unknown kind", ["plot", "nope", "adir"], "nope", (2,)),
        ("plot no directory", ["plot", "batch-time-vs-bytes"], "DIR", (2,)),
        ("plot a missing directory", ["plot", "batch-time-vs-bytes", "missing"], "missing", (2,)),
        ("plot an empty directory", ["plot", "batch-time-vs-bytes", "adir"], "adir", (2,)),
        ("plot a file", ["plot", "batch-time-vs-bytes", "empty.toml"], "empty.toml", (2,)),
        ("plot a broken summary", ["plot", "batch-time-vs-bytes", "brokenrun"], "summary.json", (2,)),
        ("plot a summary without metrics", ["plot", "batch-time-vs-bytes", "emptyrun"], "summary.json", (2,)),
        ("plot a sweep with a damaged run file", ["plot", "runtime-bars", "damagedsweep"], "parquet", (2,)),
        ("plot a run with a damaged table", ["plot", "batch-time-vs-bytes", "damagedrun"], "batches", (2,)),
        ("plot --format bogus", ["plot", "batch-time-vs-bytes", "adir", "--format", "gif"], "gif", (2,)),
        ("plot a run needing batches", ["plot", "batch-time-vs-bytes", "notasweep"], "batch", (2,)),
        ("plot a sweep kind on a run", ["plot", "runtime-bars", "notasweep"], "sweep", (2,)),
        ("plot --list with a kind", ["plot", "--list", "runtime-bars"], "--list", (2,)),
        ("diff with one directory", ["diff", "notasweep"], "NEW", (2,)),
        ("diff a missing directory", ["diff", "missing", "notasweep"], "missing", (2,)),
        ("diff an empty directory", ["diff", "adir", "notasweep"], "adir", (2,)),
        ("diff a file that is no result", ["diff", "empty.toml", "notasweep"], "empty.toml", (2,)),
        ("diff a broken summary", ["diff", "brokenrun", "notasweep"], "summary.json", (2,)),
        ("diff a damaged sweep", ["diff", "damagedsweep", "damagedsweep"], "parquet", (2,)),
        ("diff a damaged result.json", ["diff", "badresult", "notasweep"], "result.json", (2,)),
        ("diff --tolerance -1", ["diff", "notasweep", "notasweep", "--tolerance", "-1"], "--tolerance", (2,)),
        ("diff --tolerance nan", ["diff", "notasweep", "notasweep", "--tolerance", "nan"], "--tolerance", (2,)),
        ("diff --rows -1", ["diff", "notasweep", "notasweep", "--rows", "-1"], "--rows", (2,)),
        ("diff a fingerprint of another version", ["diff", "fp-v9.json", "notasweep"], "fp-v9.json", (2,)),
        ("diff a damaged fingerprint", ["diff", "fp-damaged.json", "notasweep"], "fp-damaged.json", (2,)),
        ("diff --metric with a fingerprint", ["diff", "fp.json", "notasweep", "--metric", "x"], "--metric", (2,)),
        ("diff two unlike fingerprints", ["diff", "fp.json", "fp-other.json"], "fingerprint", (2,)),
        ("fingerprint with nothing", ["fingerprint"], "DIR", (2,)),
        ("fingerprint a missing directory", ["fingerprint", "missing"], "missing", (2,)),
        ("fingerprint an empty directory", ["fingerprint", "adir"], "adir", (2,)),
        ("fingerprint a broken summary", ["fingerprint", "brokenrun"], "summary.json", (2,)),
        ("fingerprint a damaged result.json", ["fingerprint", "badresult"], "result.json", (2,)),
        ("fingerprint -o a directory", ["fingerprint", "notasweep", "-o", "adir"], "adir", (1, 2)),
        ("fingerprint -o below a file", ["fingerprint", "notasweep", "-o", "empty.toml/fp.json"], "fp.json", (1,)),
    ]
    return [Case("cli", t, a, names=n, ok_codes=codes) for t, a, n, codes in c]


def trace_cases() -> list[Case]:
    """Malformed traces, through `trace info`, `run` and `trace convert`."""
    files = [
        ("header only", "hdr.csv", None),
        ("wrong header", "badhdr.csv", "badhdr.csv"),
        ("a short row", "short.csv", "short.csv:2"),
        ("a long row", "long.csv", "long.csv:2"),
        ("a bad address", "addr.csv", "addr.csv:2"),
        ("a negative time", "negtime.csv", "negtime.csv:2"),
        ("a zero size", "zerosize.csv", "zerosize.csv"),
        ("a huge size", "hugesize.csv", "hugesize.csv"),
        ("an address at the top of the VA", "topaddr.csv", "topaddr.csv"),
        ("a GPU 0", "gpu0.csv", "gpu0.csv:2"),  # GPUs are numbered from 1: a malformed record
        ("a huge time", "hugetime.csv", "hugetime.csv"),
        ("CRLF line ends", "crlf.csv", None),
        ("a truncated gzip", "trunc.csv.gz", "trunc.csv.gz"),
        ("gzip of garbage", "garbage.csv.gz", "garbage.csv.gz"),
        ("an empty file", "empty.csv", "empty.csv"),
        ("binary garbage", "garbage.bin", "garbage.bin"),
        ("a truncated .uvmt", "trunc.uvmt", "trunc.uvmt"),
        ("a .uvmt header cut short", "hdrcut.uvmt", "hdrcut.uvmt"),
        ("a .uvmt with a bad header", "badhdr.uvmt", "badhdr.uvmt"),
        ("a .uvmt with a huge header length", "hugehdr.uvmt", "hugehdr.uvmt"),
        ("a warp .uvmt truncated", "wtrunc.uvmt", "wtrunc.uvmt"),
        ("a warp .uvmt with a flipped byte", "wflip.uvmt", "wflip.uvmt"),
        ("a kernelslist naming a missing kernel", "ks-missing/kernelslist.g", "kernel-9.traceg"),
        ("a kernelslist with garbage", "ks-garbage/kernelslist.g", "kernelslist.g"),
        ("an Accel-Sim kernel with garbage", "ks-badkernel/kernelslist.g", "kernel-1.traceg"),
        ("an Accel-Sim kernel cut short", "ks-cut/kernelslist.g", "kernel-1.traceg"),
        ("an empty kernelslist", "ks-empty/kernelslist.g", "kernelslist.g"),  # no accesses: a run refuses it
    ]
    # Read as data, valid: `trace info` and `trace convert` accept them (a run refuses them: no accesses).
    valid_data = {"ks-empty/kernelslist.g"}
    cases = []
    for title, f, names in files:
        ok = (0, 2) if names is None or f in valid_data else (2,)
        cases.append(Case("traces", f"info: {title}", ["trace", "info", f], names=names, ok_codes=ok))
        cases.append(
            Case(
                "traces",
                f"run: {title}",
                ["run", "--preset", "mgpusim-r9nano" if not f.endswith(".g") else "titan-v", "--trace", f, "-q"],
                names=names,
                ok_codes=ok,
            )
        )
        cases.append(Case("traces", f"convert: {title}", ["trace", "convert", f, "conv.out"], names=names, ok_codes=ok))
    return cases


# --- fixtures -----------------------------------------------------------------------------------------------

CSV_HEADER = "time_ns,gpu,cu,wavefront,kind,vaddr,size\n"


def fixtures(d: Path, repo: Path) -> None:
    """The files the cases name, in the work directory `d`."""
    (d / "adir").mkdir()
    (d / "empty.toml").write_text("")
    (d / "empty.csv").write_text("")
    (d / "garbage.bin").write_bytes(bytes(range(256)) * 8)
    (d / "syntax.toml").write_text("[gpu\nsms = 1\n")
    (d / "nesting.toml").write_text("sms = 4\n")
    (d / "nesting2.toml").write_text("[l1tlb]\nentries = 4\n")
    (d / "latin1.toml").write_bytes('[workload]\nkind = "stride" # caf\xe9\n'.encode("latin-1"))
    (d / "dup.toml").write_text("[gpu]\nsms = 1\nsms = 2\n")
    rows = "".join(f"{10 + i},1,{i % 3},{i % 5},R,{hex(0x1000 + 64 * i)},64\n" for i in range(50))
    (d / "t.csv").write_text(CSV_HEADER + rows)
    (d / "hdr.csv").write_text(CSV_HEADER)
    (d / "badhdr.csv").write_text("a,b,c\n1,2,3\n")
    (d / "short.csv").write_text(CSV_HEADER + "10,1,0,0,R,0x1000\n")
    (d / "long.csv").write_text(CSV_HEADER + "10,1,0,0,R,0x1000,64,9\n")
    (d / "addr.csv").write_text(CSV_HEADER + "10,1,0,0,R,0xZZ,64\n")
    (d / "negtime.csv").write_text(CSV_HEADER + "-10,1,0,0,R,0x1000,64\n")
    (d / "zerosize.csv").write_text(CSV_HEADER + "10,1,0,0,R,0x1000,0\n")
    (d / "hugesize.csv").write_text(CSV_HEADER + "10,1,0,0,R,0x1000,18446744073709551615\n")
    (d / "topaddr.csv").write_text(CSV_HEADER + "10,1,0,0,R,0xffffffffffffffc0,64\n")
    (d / "gpu0.csv").write_text(CSV_HEADER + "10,0,0,0,R,0x1000,64\n")
    (d / "hugetime.csv").write_text(CSV_HEADER + "18446744073709551615,1,0,0,R,0x1000,64\n")
    (d / "crlf.csv").write_bytes((CSV_HEADER + rows).replace("\n", "\r\n").encode())
    gz = gzip.compress((CSV_HEADER + rows * 20).encode())
    (d / "trunc.csv.gz").write_bytes(gz[: len(gz) // 2])
    (d / "garbage.csv.gz").write_bytes(b"\x1f\x8b" + bytes(range(200)))
    cmd = uvmsim_cmd()
    subprocess.run([*cmd, "trace", "convert", "t.csv", "t.uvmt"], cwd=d, check=True, capture_output=True)
    subprocess.run(
        [*cmd, "trace", "record", "--preset", "titan-v", *STRIDE, "w.uvmt"], cwd=d, check=True, capture_output=True
    )
    timed = (d / "t.uvmt").read_bytes()
    (d / "trunc.uvmt").write_bytes(timed[: len(timed) - 7])
    (d / "hdrcut.uvmt").write_bytes(timed[:20])
    hlen = int.from_bytes(timed[12:16], "little")
    (d / "badhdr.uvmt").write_bytes(timed[:16] + b"{" * hlen + timed[16 + hlen :])
    (d / "hugehdr.uvmt").write_bytes(timed[:12] + (0xFFFFFFF0).to_bytes(4, "little") + timed[16:])
    warp = (d / "w.uvmt").read_bytes()
    (d / "wtrunc.uvmt").write_bytes(warp[: len(warp) * 2 // 3])
    flipped = bytearray(warp)
    for i in range(len(flipped) // 2, len(flipped), 97):
        flipped[i] ^= 0xFF
    (d / "wflip.uvmt").write_bytes(bytes(flipped))
    shutil.copytree(repo / "tests" / "data" / "accelsim", d / "accelsim")
    kernel = (d / "accelsim" / "kernel-1.traceg").read_text()
    for name, ks, k1 in [
        ("ks-missing", "kernel-9.traceg\n", None),
        ("ks-garbage", "\x00\x01garbage\n" * 3, None),
        ("ks-badkernel", "kernel-1.traceg\n", "-kernel name = x\nnot a trace line at all\n" * 5),
        ("ks-cut", "kernel-1.traceg\n", kernel[: len(kernel) // 2]),
        ("ks-empty", "", None),
    ]:
        (d / name).mkdir()
        (d / name / "kernelslist.g").write_text(ks)
        if k1 is not None:
            (d / name / "kernel-1.traceg").write_text(k1)
    spec = 'preset = "titan-v"\n[set]\n"workload.stride.accesses" = 100\n'
    (d / "spec.toml").write_text(spec + '[grid]\n"gpu.l1tlb.mshrs" = [16]\n')
    (d / "spec-unknown.toml").write_text(spec + '[gird]\n"gpu.sms" = [1]\n')
    (d / "spec-badkey.toml").write_text(spec + '[grid]\n"gpu.smss" = [1]\n')
    (d / "spec-badvalue.toml").write_text(spec + '[grid]\n"gpu.sms" = [0, "x", {a = 1}]\n')
    (d / "spec-emptyaxis.toml").write_text(spec + '[grid]\n"gpu.sms" = []\n')
    (d / "spec-scalaraxis.toml").write_text(spec + '[grid]\n"gpu.sms" = 4\n')
    (d / "spec-both.toml").write_text(spec + '[grid]\n"gpu.sms" = [4]\n[[runs]]\n"gpu.sms" = 2\n')
    (d / "spec-runs-scalar.toml").write_text(spec + "runs = [1, 2]\n")
    (d / "spec-preset-int.toml").write_text('preset = 3\n[grid]\n"gpu.sms" = [4]\n')
    (d / "spec-missing-config.toml").write_text('config = "nothere.toml"\n[grid]\n"gpu.sms" = [4]\n')
    (d / "spec-set-scalar.toml").write_text('preset = "titan-v"\nset = 3\n[grid]\n"gpu.sms" = [4]\n')
    (d / "spec-badset.toml").write_text(
        'preset = "titan-v"\n[set]\n"gpu.sms" = "many"\n[grid]\n"gpu.l1tlb.entries" = [16]\n'
    )
    subprocess.run([*cmd, "run", "--preset", "titan-v", *STRIDE, "-o", "notasweep", "-q"], cwd=d, check=True)
    shutil.copytree(d / "notasweep", d / "runforresume")
    (d / "brokenrun").mkdir()
    (d / "brokenrun" / "summary.json").write_text("{not json")
    (d / "emptyrun").mkdir()
    (d / "emptyrun" / "summary.json").write_text("{}")
    shutil.copytree(d / "notasweep", d / "badresult" / "runs" / "r1")
    (d / "badresult" / "result.json").write_text('{"status": "PASS", "rows": [{"simulated": 1}]}')
    subprocess.run([*cmd, "fingerprint", "notasweep", "-o", "fp.json"], cwd=d, check=True, capture_output=True)
    fp = json.loads((d / "fp.json").read_text())
    (d / "fp-v9.json").write_text(json.dumps({**fp, "version": 9}))
    (d / "fp-damaged.json").write_text(json.dumps({**fp, "runs": "none"}))
    (d / "fp-other.json").write_text(json.dumps({**fp, "digits": 5}))
    subprocess.run([*cmd, "sweep", "spec.toml", "-o", "damagedsweep", "-q"], cwd=d, check=True)
    next((d / "damagedsweep" / "runs").glob("*.parquet")).write_bytes(b"junk")
    records = ["--set", "workload.managed=true", "--set", "uvm.records=true"]
    subprocess.run([*cmd, "run", "--preset", "titan-v", *STRIDE, *records, "-o", "damagedrun", "-q"], cwd=d, check=True)
    (d / "damagedrun" / "batches.parquet").write_bytes(b"junk")


# --- running and judging ------------------------------------------------------------------------------------


def execute(case: Case, work: Path, n: int, timeout: float) -> Outcome:
    out = work / "out" / str(n)
    args = list(case.args)
    if args[:1] == ["run"] and "-o" not in args and "--out" not in args:
        args += ["-o", str(out)]
    start = time.perf_counter()
    try:
        p = subprocess.run(
            [*uvmsim_cmd(), *args],
            cwd=work,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            preexec_fn=limit_memory,
            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        )
        code: int | None = p.returncode
        stderr = p.stderr
    except subprocess.TimeoutExpired as e:
        code = None
        stderr = e.stderr.decode("utf-8", "replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    o = Outcome(case, code, time.perf_counter() - start, stderr)
    o.verdict = judge(o, out)
    shutil.rmtree(out, ignore_errors=True)
    return o


def _nan_metrics(out: Path) -> list[str]:
    summary = out / "summary.json"
    if not summary.is_file():
        return []
    metrics = json.loads(summary.read_text()).get("metrics", {})
    return [k for k, v in metrics.items() if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf")))]


# Values inside their ranges that ask for legitimately long runs: each timed out at 20 s, and a profile (perf) showed
# it in the event loop or the workload's build, at a rate measured on a smaller size (the estimate in the comment).
# A timeout of any other case is a HANG.
KNOWN_LONG = {
    "workload.stride.accesses=4294967295": "4.3e9 dependent accesses (2e7 take 1.4 s: ~5 min)",
    "workload.concurrency.accesses=4294967295": "16 work-items x 4.3e9 accesses",
    "workload.random.threads=4294967295": "a 16 TiB footprint the host initialises page by page",
    "workload.random.threads=4294967296": "a 16 TiB footprint the host initialises page by page",
    "workload.aes.length=4294967296": "4 GiB of AES (4e7 bytes take 5.4 s: ~10 min)",
    "workload.aes.length=68719476736": "64 GiB of AES",
    "workload.stride.work_items=1048576": "2^20 work-items x 10,000 accesses",
    "workload.concurrency.work_items=1048576": "2^20 work-items x 1,000 accesses",
    "workload.pointer_chase.threads=16777216": "2^24 threads x 512 hops",
    "workload.strided.repeats=65536": "65,536 passes over 65,536 threads",
    "workload.comd.cells_y=4096": "8 x 4096 x 8 cells of 16 atoms",
    "workload.comd.cells_z=4096": "8 x 8 x 4096 cells of 16 atoms",
    "workload.bfs.scale=28": "building a 2^28-vertex graph (scale 22 takes 0.8 s: ~50 s)",
    "workload.matrix_transpose.width=1048576": "a 2^20 x 2^20 matrix (8 TiB)",
    # Each warp event of the column pass has 32 lanes on 32 pages 8 MiB apart, all missing the TLBs: the 3 M-event
    # budget takes 21.8 s user on the Zen 3 VM of 2026-12-07 (n2 = 16,384: 4.6 s; 262,144: 17 s; 512 finishes).
    "workload.cufft.n2=1048576": "3 M events of uncoalesced column-pass walks (~22 s)",
}


def judge(o: Outcome, out: Path) -> str:
    err = o.stderr
    lines = [line for line in err.splitlines() if line.strip()]
    if o.code is None:
        if o.case.name in KNOWN_LONG:
            o.notes.append(KNOWN_LONG[o.case.name])
            return "long"
        return "HANG"
    if "panicked" in err or o.code == 101 or "PanicException" in err:
        return "PANIC"
    if "Traceback" in err:
        return "TRACEBACK"
    if o.code < 0:
        return "CRASH"
    if o.code == 0:
        bad = _nan_metrics(out)
        if bad:
            o.notes.append("NaN/inf: " + ", ".join(bad[:5]))
            return "NAN-METRIC"
        if o.case.part == "keys" and o.case.value in NEVER_VALID:
            return "ACCEPTED?"
        return "ok" if o.case.part in ("keys", "bounds") else ("expected" if 0 in o.case.ok_codes else "EXIT-0")
    if "internal error" in err:
        return "INTERNAL"
    if o.code == 1 and "event budget reached" in err:
        return "budget"
    if o.code == 1 and "simulation failed" in err and o.case.part in ("keys", "bounds", "combos"):
        return "SIMFAIL"
    if o.code not in o.case.ok_codes:
        return f"EXIT-{o.code}"
    if len(lines) != 1 or not lines[0].startswith("uvmsim: error: "):
        return "MULTILINE"
    if o.case.names and o.case.names not in err and not _names_it_otherwise(o.case, err):
        return "NO-KEY"
    return "good" if o.code == 2 else "expected"


def _names_it_otherwise(case: Case, err: str) -> bool:
    """A trace path's error names the file (with its line), not the key; a workload's footprint error names the
    section whose parameters multiply to it."""
    if case.kind == "path" and case.value and case.value.strip('"') and case.value.strip('"') in err:
        return True
    section = (case.names or "").rpartition(".")[0]
    return section.startswith("workload.") and f"key `{section}`: the parameters ask for" in err


def first_line(s: str) -> str:
    lines = [line for line in s.splitlines() if line.strip()]
    if not lines:
        return ""
    text = lines[0] if len(lines) == 1 else f"{lines[-1]} (+{len(lines) - 1} lines)"
    if any("panicked" in line for line in lines):
        text = next(line for line in lines if "panicked" in line)
    return text[:220]


def report(outcomes: Sequence[Outcome], all_rows: bool) -> str:
    counts = Counter(o.verdict for o in outcomes)
    parts = ["# uvmsim bad-input sweep", "", ", ".join(f"{v}: {n}" for v, n in sorted(counts.items())), ""]
    shown = [o for o in outcomes if all_rows or o.verdict in BUG_VERDICTS or o.verdict.startswith("EXIT")]
    shown.sort(key=lambda o: (o.verdict not in BUG_VERDICTS, o.case.part, o.case.name))
    parts += ["| part | case | exit | verdict | stderr |", "|---|---|---|---|---|"]
    for o in shown:
        msg = (first_line(o.stderr) + ("; " + "; ".join(o.notes) if o.notes else "")).replace("|", "\\|")
        code = "timeout" if o.code is None else str(o.code)
        parts.append(f"| {o.case.part} | `{o.case.name.replace('|', '/')}` | {code} | {o.verdict} | {msg} |")
    return "\n".join(parts) + "\n"


def run_cases(cases: Sequence[Case], work: Path, jobs: int, timeout: float, first: int = 0) -> list[Outcome]:
    outcomes: list[Outcome] = []
    with cf.ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(execute, c, work, first + i, timeout) for i, c in enumerate(cases)]
        for i, f in enumerate(cf.as_completed(futures), 1):
            o = f.result()
            outcomes.append(o)
            if o.verdict in BUG_VERDICTS:
                print(f"[{i}/{len(cases)}] {o.verdict}: {o.case.name}: {first_line(o.stderr)}", file=sys.stderr)
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=["keys", "combos", "cli", "traces", "all"], default="all")
    ap.add_argument("--only", metavar="PREFIX", help="keys: only the config keys starting with PREFIX")
    ap.add_argument("--jobs", "-j", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S)
    ap.add_argument("--report", type=Path, help="write the Markdown report here (default: stdout)")
    ap.add_argument("--all-rows", action="store_true", help="list every case, not only the bugs")
    args = ap.parse_args(argv)
    repo = Path(__file__).resolve().parent.parent
    makers: dict[str, Callable[[], list[Case]]] = {
        "keys": lambda: key_cases(args.only),
        "combos": combo_cases,
        "cli": cli_cases,
        "traces": trace_cases,
    }
    cases = [c for part, make in makers.items() if args.part in (part, "all") for c in make()]
    with tempfile.TemporaryDirectory(prefix="uvmsim-bad-input-") as tmp:
        work = Path(tmp)
        fixtures(work, repo)
        print(f"{len(cases)} cases, {args.jobs} jobs, timeout {args.timeout} s", file=sys.stderr)
        outcomes = run_cases(cases, work, args.jobs, args.timeout)
        if args.part in ("keys", "all"):
            bounds = bound_cases(outcomes)
            print(f"{len(bounds)} cases at the edges of the accepted ranges", file=sys.stderr)
            outcomes += run_cases(bounds, work, args.jobs, args.timeout, first=len(cases))
    text = report(outcomes, args.all_rows)
    if args.report:
        args.report.write_text(text)
    else:
        print(text)
    return 1 if any(o.verdict in BUG_VERDICTS or o.verdict.startswith("EXIT") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
