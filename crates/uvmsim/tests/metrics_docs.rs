//! Identities docs/metrics.md (and the config reference) state about counters, checked on small runs.

use uvmsim::config::{resolve, Source};
use uvmsim::stats::Metrics;
use uvmsim::world::simulate;

fn run(sets: &[&str]) -> Metrics {
    let overrides: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    simulate(&resolve(&[] as &[Source], &overrides).unwrap_or_else(|e| panic!("{e}"))).unwrap_or_else(|e| panic!("{e}"))
}

fn m(x: &Metrics, k: &str) -> f64 {
    x.get(k).unwrap_or_else(|| panic!("no metric {k}"))
}

const MANAGED: [&str; 4] = ["workload.kind=regular", "workload.managed=true", "workload.regular.threads=65536", "gpu.sms=8"];

/// `gpu0.l2tlb.accesses`: one per L1 TLB miss, plus one per fault the µTLB retried after a replay
/// (the retry looks up the L2 TLB, not the L1).
#[test]
fn l2_tlb_lookups_are_l1_misses_plus_retried_faults() {
    let x = run(&MANAGED);
    let retried = m(&x, "uvm.faults.retried");
    assert!(retried > 0.0, "the run must retry faults to check anything");
    assert_eq!(m(&x, "gpu0.l2tlb.accesses"), m(&x, "gpu0.l1tlb.misses") + retried);
}

/// `uvm.unmap.sync` counts the host-side unmaps of cudaMemPrefetchAsync (8 MiB steps) even with
/// the default on-demand preemptive unmapping (`uvm.preunmap.granularity = "va-block"`).
#[test]
fn prefetch_async_unmaps_count_as_sync() {
    let x = run(&[&MANAGED[..], &["workload.prefetch_inputs=true"]].concat());
    assert!(m(&x, "uvm.prefetch_async.calls") > 0.0);
    assert!(m(&x, "uvm.unmap.sync") > 0.0);
    assert_eq!(m(&x, "uvm.unmap.on_demand"), 0.0);
}

/// `uvm.oversubscription` never leaves less than one 2 MiB block (one 4 KiB page with page eviction).
#[test]
fn oversubscription_keeps_at_least_one_block() {
    let small = ["workload.kind=stride", "workload.stride.accesses=200", "workload.managed=true", "uvm.oversubscription=1000"];
    assert_eq!(m(&run(&small), "uvm.gpu_memory_bytes"), 2097152.0);
    assert_eq!(m(&run(&[&small[..], &["uvm.eviction.granularity=page"]].concat()), "uvm.gpu_memory_bytes"), 4096.0);
}
