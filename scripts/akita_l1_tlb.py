#!/usr/bin/env python3
"""Tick-by-tick model of MGPUSim's per-CU L1 vector TLBs replaying an MGPUSim trace.

A cross-check of uvmsim's event-level TLB (docs/validation.md, "MGPUSim traces"),
written from Akita v4's mem/vm/tlb tlbMiddleware, independent of uvmsim's code.
Each tick of one TLB: at most one response from the L2 TLB is parsed
(parseBottom; none while the previous one's MSHR entry is answered, which
respondMSHREntry does first in the next tick), evicting the set's least recently
visited way; then up to `--lookups-per-tick` requests are looked up in arrival
order (extractFromPipeline): a pending page is an MSHR hit (no recency update), a
present one a hit (visited), else a miss takes an MSHR and its translation is
parsed `--round-trip` ticks later; a miss with all MSHRs busy stays at the head
and every later request waits. The lookups come from the lookup pipeline's
16-entry post-pipeline buffer (akita v4 mem/vm/tlb/builder.go,
"ResponsePipelineBuf"), so 16 per tick although numReqPerCycle is 32; a parsed
fill answers up to `--per-tick` of its requests per tick (respondMSHREntry). A
request is looked up in the tick of its trace time (a constant offset does not
change the counts), or, with `--every K`, the lookup stage only runs every K-th
tick: a what-if for a TLB held back by its requester, not a model of MGPUSim.

With `--room B` the answers pass through B buffer entries to the CU's L1 vector
cache directory (Akita v4's translator and write-around cache, as
`gpu.vmem.backpressure`): a hit is sent only when there is room, else it stays at
the head of the lookup stage; a parsed fill answers its requests only when there
is room, and no further fill is parsed until it has; the directory takes up to
`--dir-per-tick` answers per tick in order, `--transit` ticks after they were
sent, and holds a read miss while every way of its set (`--cache-sets` x
`--cache-ways`, 64 B lines) is locked by a fill, which unlocks `--fill` ticks
after the miss. Writes pass (write-around).

    python3 scripts/akita_l1_tlb.py shared/traces/mgpusim/atax.csv.gz
    python3 scripts/akita_l1_tlb.py shared/traces/mgpusim/atax.csv.gz --room 136 --fill 136
"""

import argparse
import gzip
from collections import OrderedDict, defaultdict, deque

Row = tuple[int, int, int, bool]  # (time, page, line, write)


class Directory:
    """A CU's L1 vector cache directory: in-order, a read miss waits for an unlocked way of its set."""

    def __init__(self, a: argparse.Namespace) -> None:
        # Per set: line -> tick its fill unlocks it.
        self.sets: list[OrderedDict[int, int]] = [OrderedDict() for _ in range(a.cache_sets)]
        self.ways, self.fill, self.per_tick, self.transit = a.cache_ways, a.fill, a.dir_per_tick, a.transit
        self.buf: deque[tuple[int, int, bool]] = deque()  # (tick sent, line, write) in send order

    def tick(self, tick: int) -> None:
        n = 0
        while self.buf and n < self.per_tick and self.buf[0][0] + self.transit <= tick:
            _, line, write = self.buf[0]
            s = self.sets[line % len(self.sets)]
            if not write and line not in s:
                if len(s) >= self.ways:
                    free = [k for k, unlock in s.items() if unlock <= tick]  # least recent first
                    if not free:
                        break
                    del s[free[0]]
                s[line] = tick + self.fill
            elif not write:
                s.move_to_end(line)
            self.buf.popleft()
            n += 1


def replay(rows: list[Row], a: argparse.Namespace) -> tuple[int, int, int]:
    """Hit, miss and MSHR-hit counts of one TLB for `rows` = [(time, page, line, write)] in issue order."""
    sets, ways, mshrs, round_trip, per_tick, every = a.sets, a.ways, a.mshrs, a.round_trip, a.per_tick, a.every
    lookups_per_tick = a.lookups_per_tick
    lru: list[OrderedDict[int, bool]] = [OrderedDict() for _ in range(sets)]
    pending: dict[int, list[tuple[int, bool]]] = {}  # page -> its requests (line, write), answered with the fill
    fills: deque[tuple[int, int]] = deque()  # (tick the response can be parsed, page), in arrival order
    answering: deque[tuple[int, bool]] = deque()  # requests of the parsed fill still to be answered
    d = Directory(a) if a.room else None
    todo = deque(rows)
    queue: deque[tuple[int, int, bool]] = deque()
    hits = misses = merges = 0
    tick = rows[0][0]

    def room() -> bool:
        return d is None or len(d.buf) < a.room

    def send(line: int, write: bool) -> None:
        if d is not None:
            d.buf.append((tick, line, write))

    while todo or queue or fills or answering or (d and d.buf):
        if not (queue or answering or (d and d.buf)):
            tick = max(tick, min(([todo[0][0]] if todo else []) + ([fills[0][0]] if fills else [])))
        while todo and todo[0][0] <= tick:
            queue.append(todo.popleft()[1:])
        if d is not None:
            d.tick(tick)
        n = 0
        while answering and n < per_tick and room():
            send(*answering.popleft())
            n += 1
        if not answering and fills and fills[0][0] <= tick:
            page = fills.popleft()[1]
            s = lru[page % sets]
            if len(s) >= ways:
                s.popitem(last=False)
            s[page] = True
            requests = pending.pop(page)
            if d is not None:  # without back-pressure the answers go at once and never hold a parse
                answering.extend(requests)
        n = 0
        while queue and n < lookups_per_tick and tick % every == 0:
            page, line, write = queue[0]
            s = lru[page % sets]
            if page in pending:
                merges += 1
                pending[page].append((line, write))
            elif page in s:
                if not room():
                    break
                s.move_to_end(page)
                hits += 1
                send(line, write)
            elif len(pending) >= mshrs:
                break
            else:
                misses += 1
                pending[page] = [(line, write)]
                fills.append((tick + round_trip, page))
            queue.popleft()
            n += 1
        tick += 1
    return hits, misses, merges


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--round-trip", type=int, default=7, help="ticks from a miss's lookup to its fill's parse")
    ap.add_argument("--per-tick", type=int, default=32, help="MSHR answers per tick (numReqPerCycle)")
    ap.add_argument(
        "--lookups-per-tick", type=int, default=16, help="lookups per tick (the 16-entry post-pipeline buffer)"
    )
    ap.add_argument("--every", type=int, default=1, help="look up only every K-th tick (what-if)")
    ap.add_argument("--sets", type=int, default=4)
    ap.add_argument("--ways", type=int, default=64)
    ap.add_argument("--mshrs", type=int, default=64)
    ap.add_argument(
        "--room", type=int, default=0, help="answer buffer entries to the L1V directory (0 = no back-pressure)"
    )
    ap.add_argument("--fill", type=int, default=136, help="ticks an L1V read miss locks its way")
    ap.add_argument("--transit", type=int, default=5, help="ticks from an answer to the directory")
    ap.add_argument("--dir-per-tick", type=int, default=8, help="answers the directory takes per tick")
    ap.add_argument("--cache-sets", type=int, default=64)
    ap.add_argument("--cache-ways", type=int, default=4)
    a = ap.parse_args()
    per_tlb: defaultdict[tuple[str, str], list[Row]] = defaultdict(list)
    with gzip.open(a.trace, "rt") as f:
        next(f)
        for line in f:
            t, gpu, cu, _wf, kind, va, _size = line.split(",")
            v = int(va, 16)
            per_tlb[(gpu, cu)].append((int(t), v >> 12, v >> 6, kind == "W"))
    total = [0, 0, 0]
    for rows in per_tlb.values():
        for i, c in enumerate(replay(rows, a)):
            total[i] += c
    print(f"hits {total[0]} misses {total[1]} mshr_hits {total[2]}")


if __name__ == "__main__":
    main()
