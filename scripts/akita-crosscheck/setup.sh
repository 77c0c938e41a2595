#!/usr/bin/env bash
# Fetch Akita v4.9.0 (the version MGPUSim v4.2.0 builds with, and the traces' runs used) through the Go module
# proxy into ./akita, with tie.patch applied: AKITA_TIE=fifo|lifo|rand (AKITA_TIE_SEED=N) then orders same-cycle
# events by insertion, its reverse or a seeded permutation; unset, Akita's own heap order is kept.
set -euo pipefail
cd "$(dirname "$0")"
export GOFLAGS=-mod=mod
go mod download github.com/sarchlab/akita/v4@v4.9.0
src="$(go env GOMODCACHE)/github.com/sarchlab/akita/v4@v4.9.0"
rm -rf akita && cp -r "$src" akita && chmod -R u+w akita
patch -d akita -p1 < tie.patch
echo "akita v4.9.0 with the tie-order switch is in $(pwd)/akita"
