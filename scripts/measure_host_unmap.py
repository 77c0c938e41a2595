"""Measure what unmapping a VA block's host pages costs on this Linux machine.

The UVM driver unmaps a 2 MiB VA block from the CPU with unmap_mapping_range(),
which zaps the block's 4 KiB PTEs (zap_page_range_single) without freeing the
pages. madvise(MADV_DONTNEED) on a MAP_SHARED memfd mapping takes the same zap
path, so timing it with k pages mapped gives the fixed and per-page parts of
uvm.unmap_us / uvm.unmap_per_page_us. Prints the median of each size and a
least-squares line. Linux only (os.memfd_create, mmap.madvise).

    python scripts/measure_host_unmap.py [repeats]
"""

from __future__ import annotations

import mmap
import os
import statistics
import sys
import time

BLOCK = 2 * 1024 * 1024
PAGE = 4096


def median_us(fd: int, pages: int, repeats: int) -> float:
    """Median time to zap a 2 MiB mapping of which `pages` pages (spread evenly) are mapped."""
    step = BLOCK // PAGE // pages if pages else 0
    times = []
    for _ in range(repeats):
        m = mmap.mmap(fd, BLOCK)
        for k in range(pages):
            m[k * step * PAGE] = 1  # a write fault maps the page
        t = time.perf_counter_ns()
        m.madvise(mmap.MADV_DONTNEED)
        times.append(time.perf_counter_ns() - t)
        m.close()
    return statistics.median(times) / 1000


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    fd = os.memfd_create("uvmsim-unmap")
    os.ftruncate(fd, BLOCK)
    sizes = [1, 8, 64, 256, 512]
    meds = [median_us(fd, k, repeats) for k in sizes]
    for k, t in zip(sizes, meds, strict=True):
        print(f"{k:4d} pages mapped: median {t:8.2f} us")
    fit = statistics.linear_regression(sizes, meds)
    print(f"fit: {fit.intercept:.2f} us + {fit.slope:.4f} us per page ({os.uname().release}, {repeats} repeats)")


if __name__ == "__main__":
    main()
