"""What does unified (managed) memory cost a kernel, and which change would help?

Runs one workload on managed memory as it is, then with each of the usual remedies a
programmer can apply (cudaMemPrefetchAsync, cudaMemAdvise hints, GPU-side initialisation)
and two driver settings, and prints one row per variant: runtime, its slowdown against
copy-then-execute on device memory (the same workload with cudaMemcpy first) and the
driver's work (batches, far faults, bytes moved, time in the fault handler).

    python examples/managed_remedies.py                                  # sgemm, A100 over PCIe 4
    python examples/managed_remedies.py --preset h100-pcie5 --set workload.kind=stream
    python examples/managed_remedies.py --preset titan-v --trace traces/kernelslist.g  # your kernel

A trace is an Accel-Sim/NVBit `kernelslist.g` (its arrays become managed) or a warp `.uvmt`
recorded with `workload.managed = true`; a timed CSV trace has no allocations to manage.

Every row is a simulation of the same kernel; nothing is estimated. docs/experiments.md
("What would fix my kernel?") shows a run and how to read it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import uvmsim

# Each variant's overrides, laid over the base (managed memory, baselines on).
REMEDIES: dict[str, dict[str, Any]] = {
    "managed, as is": {},
    "cudaMemPrefetchAsync before the kernel": {"workload.prefetch_inputs": True},
    "cudaMemAdvise SetReadMostly": {"uvm.advise.policy": "read-mostly"},
    "cudaMemAdvise SetPreferredLocation(CPU)": {"uvm.advise.policy": "preferred-location-host"},
    "data initialised on the GPU": {"workload.host_init": False},
    "driver: prefetch threshold 1": {"uvm.prefetch.policy": "density", "uvm.prefetch.threshold": 1},
    "driver: no prefetching": {"uvm.prefetch.policy": "none"},
}

# (column title, metric, scale, format)
COLUMNS: tuple[tuple[str, str, float, str], ...] = (
    ("time ms", "time.total_ns", 1e-6, "{:.3f}"),
    ("x copy", "baseline.slowdown_vs_copy", 1.0, "{:.2f}"),
    ("batches", "uvm.batches", 1.0, "{:,.0f}"),
    ("faults", "uvm.faults.unique", 1.0, "{:,.0f}"),
    ("MiB in", "uvm.bytes_h2d", 1.0 / (1 << 20), "{:,.1f}"),
    ("UVM ms", "uvm.time_ns", 1e-6, "{:.3f}"),
)


def as_set(overrides: dict[str, Any]) -> list[str]:
    """``key=value`` strings, values as TOML (what ``--set`` takes)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        return f'"{v}"' if isinstance(v, str) else str(v)

    return [f"{k}={value(v)}" for k, v in overrides.items()]


def run(preset: str, base: dict[str, Any], sets: Sequence[str] = ()) -> list[tuple[str, dict[str, float]]]:
    """One simulation per remedy (the user's ``sets`` last, so they win); returns (variant, metrics)
    in REMEDIES' order."""
    rows = []
    for name, extra in REMEDIES.items():
        overrides = as_set({**base, "workload.managed": True, "uvm.baselines": True, **extra}) + list(sets)
        rows.append((name, uvmsim.run(preset=preset, set=overrides).metrics))
    return rows


def table(rows: list[tuple[str, dict[str, float]]]) -> str:
    head = ("variant", *(c[0] for c in COLUMNS))
    body = [(name, *(fmt.format(float(m.get(key, 0.0)) * scale) for _, key, scale, fmt in COLUMNS)) for name, m in rows]
    widths = [max(len(r[i]) for r in (head, *body)) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in (head, *body)
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="a100-pcie4")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override (repeatable)")
    p.add_argument("--trace", help="replay this Accel-Sim kernelslist.g or managed warp .uvmt instead of sgemm")
    a = p.parse_args(argv)
    base: dict[str, Any] = {"workload.kind": "blas-gemm", "workload.blas_gemm.n": 2048}
    try:
        if a.trace:
            base = dict(uvmsim.trace_workload(a.trace))
        rows = run(a.preset, base, a.set)
    except (uvmsim.ConfigError, uvmsim.InputError, uvmsim.SimulationError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    print(table(rows))


if __name__ == "__main__":
    main()
