#!/usr/bin/env bash
# MGPUSim's own spread (docs/validation.md, "MGPUSim's own spread"): atax and matrixtranspose with the traces'
# flags under Akita's heap order, fifo, lifo and seeded permutations of same-cycle events; with arguments
# (`rand:4 rand:5 ...`), matrixtranspose alone under those orders. Needs ./akita from
# setup.sh; fetches MGPUSim v4.2.0 into ./mgpusim. Each run takes 5-8 minutes on one core.
set -euo pipefail
cd "$(dirname "$0")"
export GOFLAGS=-mod=mod
here="$(pwd)"
if [ ! -d mgpusim ]; then
    go mod download github.com/sarchlab/mgpusim/v4@v4.2.0
    cp -r "$(go env GOMODCACHE)/github.com/sarchlab/mgpusim/v4@v4.2.0" mgpusim && chmod -R u+w mgpusim
    (cd mgpusim && go mod edit -replace "github.com/sarchlab/akita/v4=$here/akita")
fi
(cd mgpusim/amd/samples/atax && go build -o "$here/bin/atax" .)
(cd mgpusim/amd/samples/matrixtranspose && go build -o "$here/bin/matrixtranspose" .)
run() {  # NAME TIE SEED BINARY FLAGS...
    local d="runs/$1" tie=$2 seed=$3 bin=$4; shift 4
    mkdir -p "$d"
    (cd "$d" && AKITA_TIE=$tie AKITA_TIE_SEED=$seed "$here/bin/$bin" -timing -report-all -disable-rtm "$@" > out.txt 2> err.txt)
    python3 tlbsum.py "$d"
}
if [ $# -gt 0 ]; then
    # Only matrixtranspose, under the orders given: `mgpusim_ties.sh rand:4 rand:5 ...` (session 55's distribution).
    for tie in "$@"; do
        mode=${tie%%:*}; seed=${tie#*:}; [ "$seed" = "$tie" ] && seed=0
        run "matrixtranspose-${tie/:/-}" "$mode" "$seed" matrixtranspose -width 2048
    done
    exit 0
fi
for tie in "" fifo lifo rand:1 rand:2 rand:3; do
    mode=${tie%%:*}; seed=${tie#*:}; [ "$seed" = "$tie" ] && seed=0
    run "atax-${tie:-heap}" "$mode" "$seed" atax -x 1024 -y 1024
    run "matrixtranspose-${tie:-heap}" "$mode" "$seed" matrixtranspose -width 2048
done
