#!/usr/bin/env bash
# The matched pair of docs/validation.md ("The cycle-stepped replay"): MGPUSim v4.2.0's matrixtranspose with
# same-cycle events in insertion order (AKITA_TIE=fifo, the Rust engine's order) and print-only logging hooks
# (akita-logs.patch, mgpusim-logs.patch: each request a CU hands to its L1V path with its CanWaitForCoalesce, each
# L1 vector and L2 TLB lookup, and each message of the scalar and instruction paths on the two shared
# connections), then the same requests and side messages through the cycle engine (cycle_replay example), and
# both TLB logs compared lookup by lookup. Needs Go, the module proxy and ./akita from setup.sh; the MGPUSim run
# takes 5-8 minutes on one core. Usage: mgpusim_matched.sh [WIDTH] (default 2048, the trace's).
set -euo pipefail
cd "$(dirname "$0")"
export GOFLAGS=-mod=mod
here="$(pwd)"
width="${1:-2048}"
if [ ! -d mgpusim-logs ]; then
    go mod download github.com/sarchlab/mgpusim/v4@v4.2.0
    cp -r "$(go env GOMODCACHE)/github.com/sarchlab/mgpusim/v4@v4.2.0" mgpusim-logs && chmod -R u+w mgpusim-logs
    patch -d mgpusim-logs -p1 < mgpusim-logs.patch
    rm -rf akita-logs && cp -r akita akita-logs && patch -d akita-logs -p1 < akita-logs.patch
    (cd mgpusim-logs && go mod edit -replace "github.com/sarchlab/akita/v4=$here/akita-logs")
fi
mkdir -p bin runs/matched
(cd mgpusim-logs/amd/samples/matrixtranspose && go build -o "$here/bin/matrixtranspose-logs" .)
d="$here/runs/matched"
(cd "$d" && AKITA_TIE=fifo MGPUSIM_MEMLOG="$d/mem.csv" AKITA_TLBLOG="$d/tlb.log" AKITA_CONNLOG="$d/conn.log" \
    "$here/bin/matrixtranspose-logs" -timing -report-all -disable-rtm -width "$width" > out.txt 2> err.txt)
python3 tlbsum.py "$d"
cd ../..
cargo build -q --release -p uvmsim --example cycle_replay
UVMSIM_SIDE_LOG="$d/conn.log" UVMSIM_CYCLE_LOG="$d/ours.log" target/release/examples/cycle_replay "$d/mem.csv"
python3 - "$d/tlb.log" "$d/ours.log" <<'PY'
import collections, sys
def load(p):
    by = collections.defaultdict(list)
    for line in open(p):
        f = line.split()
        if len(f) == 4:
            by[int(f[0])].append(" ".join(f[1:]))
    return by
a, b = load(sys.argv[1]), load(sys.argv[2])
diff = [c for c in sorted(set(a) | set(b)) if sorted(a.get(c, [])) != sorted(b.get(c, []))]
n = sum(len(v) for v in a.values())
print(f"{n} lookups logged by MGPUSim; first cycle whose lookups differ: {diff[0] if diff else 'none'}")
PY
