#!/usr/bin/env python3
"""A chunk-level reference model of blas-gemm past GPU memory (docs/validation.md, allen-oversub).

blas-gemm (CUTLASS's default SIMT tiling, docs/workloads.md) computes C = A * B for n x n column-major
matrices in 128 x 128 tiles of C, CTAs numbered with the M tile fastest. The GPU holds `ctas` CTAs at once;
taken as waves of `ctas` consecutive CTAs, each wave

1. touches the column panels of B its CTAs read (k = 0 reaches every 2 MiB chunk of a panel at once),
2. sweeps all of A in k order (its CTAs cover every row tile of A, or most of them),
3. writes its tiles of C, whose column panels it touches at the end.

GPU memory is `memory_chunks` 2 MiB chunks, one per VA block with resident pages; when it is full the chunk
that became resident first goes ("fifo", the UVM driver's root-chunk list, spec/uvm-driver.md) or the one
touched least recently ("lru"). The model ignores pages within a chunk, prefetching, timing and CTAs that
drift apart: what is left is the order in which chunks are needed. Its eviction counts match the
simulator's runs of allen-oversub at scale 8 within a chunk (tests/test_gemm_chunk_fifo.py), so it answers
what the same pattern gives at Allen's real sizes, which take hours to simulate.

    python scripts/gemm_chunk_fifo.py 32300 38444                   # titan-v's 5888 chunks, 160 CTAs, fifo
    python scripts/gemm_chunk_fifo.py --policy lru 38444
    python scripts/gemm_chunk_fifo.py --memory-chunks 92 4806       # allen-oversub's run at scale 8

Prints, per n: chunks evicted, and the 4 KiB pages they held (512 each).
"""

from __future__ import annotations

import argparse
from collections import OrderedDict

CHUNK = 2 << 20
TILE = 128
# titan-v: 11,776 MiB of managed memory (presets/titan-v.toml), 80 SMs x blas-gemm's 2 CTAs per SM.
TITAN_V_CHUNKS = 11776 // 2
TITAN_V_CTAS = 160


def evictions(n: int, memory_chunks: int = TITAN_V_CHUNKS, ctas: int = TITAN_V_CTAS, policy: str = "fifo") -> int:
    """Chunks evicted by one blas-gemm of order `n` (4-byte elements) in `memory_chunks` chunks of GPU memory."""
    if policy not in ("fifo", "lru"):
        raise ValueError(f"policy must be 'fifo' or 'lru', got {policy!r}")
    matrix = n * n * 4
    per_matrix = -(-matrix // CHUNK)
    tiles = -(-n // TILE)
    column = n * 4

    def panel(first: int, nt: int) -> range:
        """The chunks of columns nt * 128 .. nt * 128 + 127 of the matrix whose first chunk is `first`."""
        lo, hi = nt * TILE * column, min(n, (nt + 1) * TILE) * column
        return range(first + lo // CHUNK, first + -(-hi // CHUNK))

    a, b, c = 0, per_matrix, 2 * per_matrix
    # Matrices start on chunk boundaries (the simulator's allocations are 2 MiB aligned).
    resident: OrderedDict[int, None] = OrderedDict()
    evicted = 0

    def touch(chunk: int) -> None:
        nonlocal evicted
        if chunk in resident:
            if policy == "lru":
                resident.move_to_end(chunk)
            return
        while len(resident) >= memory_chunks:
            resident.popitem(last=False)
            evicted += 1
        resident[chunk] = None

    total = tiles * tiles
    for first in range(0, total, ctas):
        column_tiles = sorted({t // tiles for t in range(first, min(total, first + ctas))})
        for nt in column_tiles:
            for ch in panel(b, nt):
                touch(ch)
        for ch in range(a, a + per_matrix):
            touch(ch)
        for nt in column_tiles:
            for ch in panel(c, nt):
                touch(ch)
    return evicted


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", type=int, nargs="+", help="matrix order")
    p.add_argument("--memory-chunks", type=int, default=TITAN_V_CHUNKS, help="GPU memory in 2 MiB chunks")
    p.add_argument("--ctas", type=int, default=TITAN_V_CTAS, help="CTAs resident at once")
    p.add_argument("--policy", choices=("fifo", "lru"), default="fifo")
    args = p.parse_args()
    if args.memory_chunks < 1 or args.ctas < 1 or min(args.n) < 1:
        p.error("n, --memory-chunks and --ctas must be positive")
    for n in args.n:
        e = evictions(n, args.memory_chunks, args.ctas, args.policy)
        print(f"n = {n}: {e} chunks evicted, {e * 512:,} pages")


if __name__ == "__main__":
    main()
