"""Machine-independent throughput: CPU instructions per simulated unit of `uvmsim bench`'s workloads.

Wall-clock rates move with the VM (docs/performance.md: the same code ran 1.6-1.9x slower on one EPYC than
on one Xeon), so a change of code and a change of machine look alike. Instructions executed do not: this
script runs each bench workload through the `run` example under valgrind's callgrind, counting only inside
the simulation loop (`--toggle-collect` on `uvmsim::sim::run`, the part `sim.wall_s` times: no config
parsing, no start-up), and reports instructions per warp memory instruction and per event. Needs valgrind
(Debian: `apt-get install valgrind`); a release build of the example, whose symbols valgrind names.

    cargo build --release --example run
    python scripts/count_instructions.py target/release/examples/run                 # quick sizes, every workload
    python scripts/count_instructions.py target/release/examples/run --only stream-tlb-hits --full
    python scripts/count_instructions.py target/release/examples/run --json > counts.json

Under callgrind a run is about 50x slower than natively: the quick sizes (`uvmsim bench --quick`'s) take
about a minute in all. Replay workloads record their trace first through the `uvmsim` package (not counted).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from uvmsim.bench import WORKLOADS, Workload  # noqa: E402

# The simulation loop (generic over the model: the pattern takes every instance).
TOGGLE = "uvmsim::sim::run*"


def toml_literal(v: Any) -> str:
    """`v` as the TOML value of a `key=value` argument of the `run` example."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string: the same escapes for what the bench uses
    raise TypeError(f"no TOML literal for {v!r}")


def collected(callgrind_stderr: str) -> int:
    """The instructions callgrind counted while collection was on (its `Collected :` line)."""
    m = re.search(r"Collected\s*:\s*([0-9,]+)", callgrind_stderr)
    if m is None:
        raise ValueError("no `Collected :` line in callgrind's output")
    return int(m.group(1).replace(",", ""))


def metrics(stdout: str) -> dict[str, float]:
    """The `run` example's `key = value` lines (numbers only)."""
    out: dict[str, float] = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            try:
                out[key.strip()] = float(value)
            except ValueError:
                pass
    return out


def all_gpus(m: dict[str, float], name: str) -> int:
    """Metric `gpuN.name` summed over the GPUs (as `uvmsim bench` counts)."""
    pattern = re.compile(rf"gpu\d+\.{re.escape(name)}")
    return int(sum(v for k, v in m.items() if pattern.fullmatch(k)))


class CountError(Exception):
    """A workload that could not be counted: its simulation failed, or callgrind collected nothing."""


def count(binary: Path, w: Workload, full: bool, tmp: Path) -> dict[str, Any]:
    sets = {**w.set, **({} if full else w.quick_set)}
    if w.record:
        import uvmsim

        path = tmp / f"{w.name}.uvmt"
        uvmsim.trace_record(str(path), preset=w.preset, set=sets)
        sets = {
            "workload.kind": "warp-trace",
            "workload.warp_trace.path": str(path),
            **{k: v for k, v in sets.items() if not k.startswith("workload.")},
        }
    out = tmp / f"{w.name}.callgrind"
    cmd = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        "--collect-atstart=no",
        f"--toggle-collect={TOGGLE}",
        str(binary),
        str(ROOT / "presets" / f"{w.preset}.toml"),
        *(f"{k}={toml_literal(v)}" for k, v in sets.items()),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        # The simulation's own message, not valgrind's summary lines (`==PID==`) that follow it.
        own = [ln for ln in p.stderr.strip().splitlines() if not ln.startswith("==")]
        raise CountError(f"{w.name}: exit {p.returncode}: {own[-1] if own else 'no message'}")
    try:
        instructions = collected(p.stderr)
    except ValueError as e:
        raise CountError(f"{w.name}: {e}") from None
    if instructions == 0:
        raise CountError(f"{w.name}: nothing collected: is `{TOGGLE}` a symbol of {binary}?")
    m = metrics(p.stdout)
    insts, events = all_gpus(m, "warp_mem_insts"), int(m.get("sim.events", 0))
    return {
        "name": w.name,
        "instructions": instructions,
        "warp_mem_insts": insts,
        "events": events,
        "per_warp_mem_inst": instructions / insts if insts else None,
        "per_event": instructions / events if events else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", type=Path, help="the `run` example (cargo build --release --example run)")
    ap.add_argument("--only", action="append", default=[], metavar="NAME", help="this bench workload (repeatable)")
    ap.add_argument("--full", action="store_true", help="the bench's full sizes (default: its quick sizes)")
    ap.add_argument("--json", action="store_true", help="one JSON list instead of a table")
    a = ap.parse_args(argv)
    names = {w.name for w in WORKLOADS}
    unknown = sorted(set(a.only) - names)
    if unknown:
        choices = ", ".join(sorted(names))
        print(f"count_instructions: unknown workload `{unknown[0]}` (one of: {choices})", file=sys.stderr)
        return 2
    if not a.binary.is_file():
        print(f"count_instructions: {a.binary}: no such file (cargo build --release --example run)", file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None:
        print("count_instructions: valgrind not found (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="uvmsim-count-") as d:
        for w in WORKLOADS:
            if a.only and w.name not in a.only:
                continue
            try:
                rows.append(count(a.binary, w, a.full, Path(d)))
            except CountError as e:
                print(f"count_instructions: {e}", file=sys.stderr)
                return 1
            if not a.json:
                r = rows[-1]
                per_inst = f"{r['per_warp_mem_inst']:,.0f}" if r["per_warp_mem_inst"] else "-"
                per_event = f"{r['per_event']:,.0f}" if r["per_event"] else "-"
                print(
                    f"{r['name']:<28} {r['instructions']:>15,} instructions  {r['warp_mem_insts']:>11,} warp mem insts"
                    f"  {r['events']:>11,} events  {per_inst:>7} per warp mem inst  {per_event:>7} per event",
                    flush=True,
                )
    if a.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
