//! Replay an MGPUSim trace through the cycle-stepped R9 Nano path and print
//! the TLB counts: `cycle_replay TRACE [PCIE_LEG_CYCLES]`; with
//! `UVMSIM_CYCLE_LOG=FILE`, every TLB lookup is written to FILE as
//! `cycle TLB page outcome`, named as MGPUSim names its TLBs.
use std::time::Instant;
use uvmsim::cycle::machine::{read_rows, R9Nano, ReplayOptions};

fn read_log(path: &str) -> Vec<uvmsim::cycle::machine::Row> {
    let text = std::fs::read_to_string(path).expect("readable");
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            uvmsim::cycle::machine::Row {
                cycle: f[0].parse().expect("time"),
                cu: f[2].parse().expect("cu"),
                wavefront: f[3].parse().expect("wavefront"),
                write: f[4] == "W",
                vaddr: u64::from_str_radix(f[5].trim_start_matches("0x"), 16).expect("vaddr"),
                can_wait: f[7] == "true",
            }
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: cycle_replay TRACE [PCIE_LEG_CYCLES]");
        std::process::exit(2);
    };
    let leg = args.get(2).map_or(293, |s| s.parse().expect("PCIE_LEG_CYCLES is an integer"));
    // A request log of an instrumented MGPUSim run (the trace's columns plus `can_wait`) keeps each
    // request's CanWaitForCoalesce; a trace is read as the simulator reads it.
    let rows = if std::fs::read_to_string(path).is_ok_and(|s| s.starts_with("time_ns,gpu,cu,wavefront,kind,vaddr,size,can_wait")) {
        Ok(read_log(path))
    } else {
        read_rows(path)
    };
    let rows = match rows {
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
