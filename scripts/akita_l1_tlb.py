#!/usr/bin/env python3
"""Tick-by-tick model of MGPUSim's per-CU L1 vector TLBs replaying an MGPUSim trace.

A cross-check of uvmsim's event-level TLB (docs/validation.md, "MGPUSim traces"),
written from Akita v4's mem/vm/tlb tlbMiddleware, independent of uvmsim's code.
Each tick of one TLB: at most one response from the L2 TLB is parsed
(parseBottom; none while the previous one's MSHR entry is answered, which
respondMSHREntry does first in the next tick), evicting the set's least recently
visited way; then up to `--per-tick` requests are looked up in arrival order
(extractFromPipeline): a pending page is an MSHR hit (no recency update), a
present one a hit (visited), else a miss takes an MSHR and its translation is
parsed `--round-trip` ticks later; a miss with all MSHRs busy stays at the head
and every later request waits. A request is looked up in the tick of its trace
time (a constant offset does not change the counts), or, with `--every K`, the
lookup stage only runs every K-th tick: a what-if for a TLB held back by its
requester, not a model of MGPUSim.

    python3 scripts/akita_l1_tlb.py shared/traces/mgpusim/atax.csv.gz
"""

import argparse
import gzip
from collections import OrderedDict, defaultdict, deque


def replay(rows, sets, ways, mshrs, round_trip, per_tick, every):
    """Hit, miss and MSHR-hit counts of one TLB for `rows` = [(time, page)] in issue order."""
    lru = [OrderedDict() for _ in range(sets)]
    pending = set()
    fills = deque()  # (tick the response can be parsed, page), in arrival order
    todo, queue = deque(rows), deque()
    hits = misses = merges = 0
    tick = rows[0][0]
    while todo or queue or fills:
        nxt = [tick] if queue else []
        nxt += [max(tick, todo[0][0])] if todo else []
        nxt += [max(tick, fills[0][0])] if fills else []
        tick = min(nxt)
        while todo and todo[0][0] <= tick:
            queue.append(todo.popleft()[1])
        if fills and fills[0][0] <= tick:
            page = fills.popleft()[1]
            s = lru[page % sets]
            if len(s) >= ways:
                s.popitem(last=False)
            s[page] = True
            pending.discard(page)
        n = 0
        while queue and n < per_tick and tick % every == 0:
            page = queue[0]
            s = lru[page % sets]
            if page in pending:
                merges += 1
            elif page in s:
                s.move_to_end(page)
                hits += 1
            elif len(pending) >= mshrs:
                break
            else:
                misses += 1
                pending.add(page)
                fills.append((tick + round_trip, page))
            queue.popleft()
            n += 1
        tick += 1
    return hits, misses, merges


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--round-trip", type=int, default=7, help="ticks from a miss's lookup to its fill's parse")
    ap.add_argument("--per-tick", type=int, default=32, help="lookups per tick (numReqPerCycle)")
    ap.add_argument("--every", type=int, default=1, help="look up only every K-th tick (what-if)")
    ap.add_argument("--sets", type=int, default=4)
    ap.add_argument("--ways", type=int, default=64)
    ap.add_argument("--mshrs", type=int, default=64)
    a = ap.parse_args()
    per_tlb = defaultdict(list)
    with gzip.open(a.trace, "rt") as f:
        next(f)
        for line in f:
            t, gpu, cu, _wf, _kind, va, _size = line.split(",")
            per_tlb[(gpu, cu)].append((int(t), int(va, 16) >> 12))
    total = [0, 0, 0]
    for rows in per_tlb.values():
        for i, c in enumerate(replay(rows, a.sets, a.ways, a.mshrs, a.round_trip, a.per_tick, a.every)):
            total[i] += c
    print(f"hits {total[0]} misses {total[1]} mshr_hits {total[2]}")


if __name__ == "__main__":
    main()
