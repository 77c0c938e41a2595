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

A variant that does not apply to the system reads "n/a", with the reason under the table: in
IOMMU mode (gh200-c2c, mi300a-apu, kaveri-apu) far faults go to the page-request path, not the
UVM driver, so its hints and prefetcher do not act (uvmsim refuses those it would ignore), and the
table shows that path's requests, the pages they mapped and its time instead of the driver's; a
variant uvmsim refuses for the system says why. A hint replaces the preset's own (gh200-c2c sets
accessed-by). Multi-GPU presets run another model and are refused.

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
# Variants that act through the UVM driver's fault service (hints, its prefetcher): not in IOMMU mode.
DRIVER_FAULT_PATH = frozenset(
    {
        "cudaMemAdvise SetReadMostly",
        "cudaMemAdvise SetPreferredLocation(CPU)",
        "driver: prefetch threshold 1",
        "driver: no prefetching",
    }
)
IOMMU_REASON = (
    'translation.mode = "iommu": far faults go to the IOMMU\'s page-request path, not to the UVM driver, '
    "whose hints and prefetcher act when it services a fault"
)

# (column title, metric, scale, format)
Column = tuple[str, str, float, str]
COLUMNS: tuple[Column, ...] = (
    ("time ms", "time.total_ns", 1e-6, "{:.3f}"),
    ("x copy", "baseline.slowdown_vs_copy", 1.0, "{:.2f}"),
    ("batches", "uvm.batches", 1.0, "{:,.0f}"),
    ("faults", "uvm.faults.unique", 1.0, "{:,.0f}"),
    ("MiB in", "uvm.bytes_h2d", 1.0 / (1 << 20), "{:,.1f}"),
    ("UVM ms", "uvm.time_ns", 1e-6, "{:.3f}"),
)
# In IOMMU mode the page-request path services the faults, not the driver's batches: its requests, the pages
# they mapped and the time it had a request outstanding (`apu.*`) replace the batch and fault counts and the
# batch time (the driver still migrates: prefetches, access counters).
IOMMU_COLUMNS: tuple[Column, ...] = (
    *COLUMNS[:2],
    ("requests", "apu.faults", 1.0, "{:,.0f}"),
    ("mapped", "apu.pages_mapped", 1.0, "{:,.0f}"),
    COLUMNS[4],
    ("PPR ms", "apu.time_ns", 1e-6, "{:.3f}"),
)


def as_set(overrides: dict[str, Any]) -> list[str]:
    """``key=value`` strings, values as TOML (what ``--set`` takes)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        return f'"{v}"' if isinstance(v, str) else str(v)

    return [f"{k}={value(v)}" for k, v in overrides.items()]


# A row: the variant's name, and its metrics, or why it does not apply.
Row = tuple[str, dict[str, float] | str]


def run(preset: str, base: dict[str, Any], sets: Sequence[str] = ()) -> list[Row]:
    """One simulation per remedy (the user's ``sets`` last, so they win); returns (variant, metrics, or the
    reason it does not apply to this system) in REMEDIES' order. Raises ``ConfigError`` for a configuration
    that is wrong as a whole (a bad ``--set``, a multi-GPU system)."""
    plain = uvmsim.resolve(preset=preset, set=as_set({**base, "workload.managed": True}) + list(sets))
    multi = plain["multi"]
    if multi["gpus"] > 1 or multi["model_one_gpu"]:
        raise uvmsim.ConfigError(
            f"{preset} runs the multi-GPU model (multi.gpus = {multi['gpus']}), which has no single-GPU UVM driver "
            "to apply these remedies to, nor a copy-then-execute baseline: use a single-GPU preset"
        )
    iommu = plain["translation"]["mode"] == "iommu"
    hint = plain["uvm"]["advise"]["policy"]
    rows: list[Row] = []
    for name, extra in REMEDIES.items():
        label = name
        if "uvm.advise.policy" in extra and hint != "none":
            label = f"{name} (not {hint})"  # one hint per allocation: it replaces the preset's
        if iommu and name in DRIVER_FAULT_PATH:
            rows.append((label, IOMMU_REASON))
            continue
        overrides = as_set({**base, "workload.managed": True, "uvm.baselines": True, **extra}) + list(sets)
        try:
            rows.append((label, uvmsim.run(preset=preset, set=overrides).metrics))
        except uvmsim.ConfigError as e:  # refused for this system (the base itself was accepted)
            rows.append((label, str(e)))
    return rows


def table(rows: list[Row]) -> str:
    """The rows as a text table; a variant that does not apply reads "n/a", its reason in a note below. A system in
    IOMMU mode (its runs report ``apu.*``) shows the page-request path's requests and mapped pages."""
    iommu = any(not isinstance(m, str) and "apu.faults" in m for _, m in rows)
    columns = IOMMU_COLUMNS if iommu else COLUMNS
    head = ("variant", *(c[0] for c in columns))
    body, notes = [], []
    for name, m in rows:
        if isinstance(m, str):
            if m not in notes:
                notes.append(m)
            body.append((f"{name} [{notes.index(m) + 1}]", *("n/a" for _ in columns)))
        else:
            body.append((name, *(fmt.format(float(m.get(key, 0.0)) * scale) for _, key, scale, fmt in columns)))
    widths = [max(len(r[i]) for r in (head, *body)) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in (head, *body)
    ]
    return "\n".join(lines + [f"[{i}] {note}" for i, note in enumerate(notes, 1)])


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
