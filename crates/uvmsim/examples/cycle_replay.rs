//! Replay an MGPUSim trace through the cycle-stepped R9 Nano path and print
//! the TLB counts: `cycle_replay TRACE [PCIE_LEG_CYCLES]`; with
//! `UVMSIM_CYCLE_LOG=FILE`, every TLB lookup is written to FILE as
//! `cycle TLB page outcome`, named as MGPUSim names its TLBs.
use std::time::Instant;
use uvmsim::cycle::machine::{read_rows, R9Nano, ReplayOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: cycle_replay TRACE [PCIE_LEG_CYCLES]");
        std::process::exit(2);
    };
    let leg = args.get(2).map_or(293, |s| s.parse().expect("PCIE_LEG_CYCLES is an integer"));
    let rows = match read_rows(path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}", e.0);
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    let o = ReplayOptions { pcie_leg_cycles: leg, ..ReplayOptions::default() };
    let mut m = R9Nano::new(&rows, &o);
    let log = std::env::var("UVMSIM_CYCLE_LOG").ok();
    if log.is_some() {
        m.log_lookups();
    }
    let r = m.run();
    if let Some(path) = log {
        m.write_lookup_log(&path).expect("writing the lookup log");
    }
    let secs = t0.elapsed().as_secs_f64();
    println!("l1_tlb hit/miss/mshr-hit = {} / {} / {}", r.l1_tlb.hits, r.l1_tlb.misses, r.l1_tlb.mshr_hits);
    println!("l2_tlb hit/miss/mshr-hit = {} / {} / {}", r.l2_tlb.hits, r.l2_tlb.misses, r.l2_tlb.mshr_hits);
    println!("walks = {}  accesses = {}  answers = {}  last_cycle = {}", r.walks, r.accesses, r.answers, r.last_cycle);
    println!("events = {}  wall = {secs:.2} s  ({:.2} M events/s)", r.events, r.events as f64 / secs / 1e6);
}
