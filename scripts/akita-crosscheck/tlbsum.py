"""Sum MGPUSim's L1 vector and L2 TLB counts (hit / miss / MSHR-hit) of each run directory's -report-all
database: `python3 tlbsum.py RUN_DIR...`."""

from __future__ import annotations

import glob
import re
import sqlite3
import sys


def totals(run_dir: str) -> dict[str, list[int]]:
    db = sqlite3.connect(glob.glob(f"{run_dir}/*.sqlite3")[0])
    sums: dict[tuple[str, str], float] = {}
    for loc, what, val in db.execute("select Location, What, Value from mgpusim_metrics where Location like '%TLB%'"):
        kind = re.sub(r"\[\d+\]", "", loc.split(".")[-1])
        sums[(kind, what)] = sums.get((kind, what), 0) + val
    return {level: [int(sums.get((level, w), 0)) for w in ("hit", "miss", "mshr-hit")] for level in ("L1VTLB", "L2TLB")}


if __name__ == "__main__":
    for d in sys.argv[1:]:
        t = totals(d)
        print(d, "L1V", t["L1VTLB"], "L2", t["L2TLB"])
