#!/usr/bin/env bash
# Profile-guided release build of the `run` example: an instrumented build runs
# a training set (the `uvmsim bench` workloads, recorded traces replayed, and
# multi-GPU runs), then a release build uses the counts to lay
# out and inline the hot paths. Metrics are unchanged (only code generation
# differs); docs/performance.md (session 12) has the gain.
#
#   scripts/pgo_build.sh            # -> $CARGO_TARGET_DIR/pgo/target/release/examples/run
#   PGO_PIP=venv/bin/pip scripts/pgo_build.sh   # also installs the Python extension with the profile
#   PGO_CPU=native scripts/pgo_build.sh         # for this machine's CPU only (default: .cargo/config.toml's)
#
# Needs rustc's own llvm-profdata (rustup's llvm-tools component, added if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=${CARGO_TARGET_DIR:-$root/target}/pgo
find_profdata() {
    profdata=
    for f in "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-profdata; do
        if [ -x "$f" ]; then profdata=$f; fi
    done
}
find_profdata
if [ -z "$profdata" ] && command -v rustup >/dev/null; then
    echo "pgo: rustup component add llvm-tools" >&2
    rustup component add llvm-tools >&2
    find_profdata
fi
if [ -z "$profdata" ]; then
    echo "llvm-profdata of this rustc not found: rustup component add llvm-tools" >&2
    exit 1
fi
# RUSTFLAGS replaces the rustflags of .cargo/config.toml: keep its target CPU unless told.
if [ -n "${PGO_CPU:-}" ]; then
    cpu=target-cpu=$PGO_CPU
else
    cpu=$(grep -o 'target-cpu=[^"]*' .cargo/config.toml || echo target-cpu=x86-64)
fi
rm -rf "$work/raw" "$work/traces"
mkdir -p "$work/raw" "$work/traces"

echo "pgo: instrumented build" >&2
RUSTFLAGS="-C $cpu -C profile-generate=$work/raw" CARGO_TARGET_DIR="$work/gen" \
    cargo build --release --example run --quiet
run="$work/gen/release/examples/run"
# The build scripts' own profiles are not wanted: only the training runs'.
rm -f "$work/raw"/*.profraw

echo "pgo: training runs" >&2
p=presets
triad=(workload.kind=stream workload.stream.elements=16777216 workload.stream.element_bytes=4 'translation.page_size="2MiB"')
for preset in gtx480-zheng titan-v; do
    "$run" "$p/$preset.toml" "${triad[@]}" >/dev/null
    "$run" "$p/$preset.toml" "${triad[@]}" --record="$work/traces/$preset.uvmt" >/dev/null
    "$run" "$p/$preset.toml" workload.kind=warp-trace "workload.warp_trace.path=\"$work/traces/$preset.uvmt\"" \
        'translation.page_size="2MiB"' >/dev/null
done
"$run" "$p/gtx480-zheng.toml" workload.kind=warp-trace "workload.warp_trace.path=\"$work/traces/gtx480-zheng.uvmt\"" >/dev/null
"$run" "$p/kaveri-apu.toml" workload.kind=gather workload.gather.sorted=false 'translation.page_size="4KiB"' \
    workload.gather.table_entries=16777216 workload.gather.entry_bytes=16 workload.gather.lookups=262144 \
    workload.gather.threads=16384 >/dev/null
"$run" "$p/kaveri-apu.toml" workload.kind=stride workload.stride.work_items=64 workload.stride.accesses=10000 \
    workload.stride.stride_bytes=4096 >/dev/null
"$run" "$p/titan-v.toml" workload.kind=regular workload.managed=true workload.regular.threads=65536 >/dev/null
"$run" "$p/kaveri-apu.toml" workload.kind=fault-burst workload.managed=true workload.fault_burst.faults=512000 \
    workload.threads_per_cta=64 >/dev/null
"$run" "$p/li-4gpu-gmmu.toml" workload.kind=stream >/dev/null
"$run" "$p/li-4gpu-gmmu.toml" workload.kind=pagerank workload.pagerank.nodes=16384 workload.managed=true 'multi.migration="on-touch"' >/dev/null
"$run" "$p/li-4gpu-ats.toml" workload.kind=gather >/dev/null
"$run" "$p/mgpusim-r9nano.toml" workload.kind=stream >/dev/null
"$profdata" merge -o "$work/merged.profdata" "$work/raw"

echo "pgo: optimised build" >&2
RUSTFLAGS="-C $cpu -C profile-use=$work/merged.profdata" CARGO_TARGET_DIR="$work/target" \
    cargo build --release --example run --quiet
echo "$work/target/release/examples/run"
if [ -n "${PGO_PIP:-}" ]; then
    RUSTFLAGS="-C $cpu -C profile-use=$work/merged.profdata" CARGO_TARGET_DIR="$work/target" \
        "$PGO_PIP" install -q -e "$root"
fi
