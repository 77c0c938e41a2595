//! CTA barriers (`Op::Barrier`, `gpu.cta_barriers`) end to end, through hand-written Accel-Sim
//! traces of one CTA of two warps: the barrier holds a warp until the other arrives, an exited warp
//! is not waited for, and without `gpu.cta_barriers` the warps run on alone.

mod common;

use common::trace;
use std::path::Path;
use uvmsim::config::resolve;
use uvmsim::stats::Metrics;
use uvmsim::world::simulate;

fn run(list: &Path, barriers: bool) -> Metrics {
    let o = [
        "workload.kind=accelsim".to_string(),
        format!("workload.accelsim.path={:?}", list.display().to_string()),
        format!("gpu.cta_barriers={barriers}"),
    ];
    simulate(&resolve(&[], &o).unwrap_or_else(|e| panic!("{e}"))).unwrap_or_else(|e| panic!("{e}"))
}

fn get(m: &Metrics, k: &str) -> f64 {
    m.get(k).unwrap_or_else(|| panic!("no {k}"))
}

#[test]
fn a_barrier_holds_each_warp_until_the_last_of_its_cta_arrives() {
    // Warp 0 computes 4,000 cycles, then meets warp 1, which computes 4,000 cycles after the barrier:
    // 8,000 cycles in a row with the barrier, 4,000 side by side without it (the default GPU: 1 GHz).
    let dir = tempfile::tempdir().unwrap();
    let ffma = vec!["FFMA"; 4000];
    let w0: Vec<&str> = ["LDG"].iter().chain(&ffma).chain(&["BAR.SYNC.DEFER_BLOCKING"]).copied().collect();
    let w1: Vec<&str> = ["BAR.SYNC"].iter().chain(&ffma).copied().collect();
    let list = trace(dir.path(), [&w0, &w1]);
    let (with, without) = (run(&list, true), run(&list, false));
    let (a, b) = (get(&with, "time.kernel_ns"), get(&without, "time.kernel_ns"));
    assert!((8000.0..8600.0).contains(&a), "with barriers {a} ns");
    assert!((4000.0..4600.0).contains(&b), "without {b} ns");
    assert_eq!(get(&with, "gpu0.barriers"), 2.0);
    assert_eq!(get(&without, "gpu0.barriers"), 0.0);
    // Without barriers the barrier is still an instruction (it takes its issue slot).
    assert_eq!(get(&with, "gpu0.warp_insts"), get(&without, "gpu0.warp_insts"));
    // Everything but the timing is the same.
    assert_eq!(get(&with, "gpu0.warp_mem_insts"), get(&without, "gpu0.warp_mem_insts"));
}

#[test]
fn a_warp_that_exits_is_not_waited_for() {
    // Warp 0 loads and exits without reaching the barrier; warp 1 waits there until warp 0 has
    // exited, then runs on. `BAR.ARV` (arrive only) is no barrier.
    let dir = tempfile::tempdir().unwrap();
    let ffma = vec!["FFMA"; 3000];
    let w0: Vec<&str> = ["LDG", "BAR.ARV"].iter().chain(&ffma).copied().collect();
    let w1: Vec<&str> = ["BAR.SYNC", "FFMA", "BAR.RED.POPC"].to_vec();
    let list = trace(dir.path(), [&w0, &w1]);
    let m = run(&list, true);
    assert_eq!(get(&m, "gpu0.barriers"), 2.0);
    let t = get(&m, "time.kernel_ns");
    assert!((3000.0..3600.0).contains(&t), "{t} ns: warp 1 went on when warp 0 exited");
}
