//! Replay an MGPUSim trace through the cycle-stepped R9 Nano path and print
//! the TLB counts: `cycle_replay TRACE [PCIE_LEG_CYCLES]` (with a leg, the
//! PCIe network is replaced by a fixed-latency pipe); with
//! `UVMSIM_CYCLE_LOG=FILE`, every TLB lookup is written to FILE as
//! `cycle TLB page outcome`, named as MGPUSim names its TLBs; with
//! `UVMSIM_TIE_SEED=N`, events of the same cycle run in an order seeded by N.
use std::time::Instant;
use uvmsim::cycle::machine::{read_rows, R9Nano, ReplayOptions, Row};

/// An instrumented MGPUSim run's request log: the trace's columns plus `can_wait`.
fn read_log(path: &str) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut rows = Vec::new();
    for (n, l) in text.lines().enumerate().skip(1) {
        let bad = || format!("{path}:{}: not `time_ns,gpu,cu,wavefront,kind,vaddr,size,can_wait`: {l}", n + 1);
        let f: Vec<&str> = l.split(',').collect();
        if f.len() != 8 {
            return Err(bad());
        }
        rows.push(Row {
            cycle: f[0].parse().map_err(|_| bad())?,
            cu: f[2].parse().ok().filter(|&c: &usize| c < 64).ok_or_else(bad)?,
            wavefront: f[3].parse().map_err(|_| bad())?,
            write: f[4] == "W",
            vaddr: u64::from_str_radix(f[5].trim_start_matches("0x"), 16).map_err(|_| bad())?,
            can_wait: f[7] == "true",
        });
    }
    Ok(rows)
}

/// Whether the file starts with the request log's header (only its first line is read).
fn is_log(path: &str) -> bool {
    use std::io::BufRead;
    let mut first = String::new();
    std::fs::File::open(path).map(|f| std::io::BufReader::new(f).read_line(&mut first).is_ok()).unwrap_or(false)
        && first.starts_with("time_ns,gpu,cu,wavefront,kind,vaddr,size,can_wait")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: cycle_replay TRACE [PCIE_LEG_CYCLES]");
        std::process::exit(2);
    };
    let leg = match args.get(2).map(|s| s.parse::<u64>()) {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(_)) => {
            eprintln!("PCIE_LEG_CYCLES must be a whole number of cycles, got {}", args[2]);
            std::process::exit(2);
        }
    };
    // A request log of an instrumented MGPUSim run keeps each request's CanWaitForCoalesce;
    // a trace is read as the simulator reads it.
    let rows = if is_log(path) { read_log(path) } else { read_rows(path, 1.0).map_err(|e| e.0) };
    let rows = match rows {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    let tie_seed = match std::env::var("UVMSIM_TIE_SEED").ok().map(|s| s.parse::<u64>()) {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(_)) => {
            eprintln!("UVMSIM_TIE_SEED must be a whole number");
            std::process::exit(2);
        }
    };
    let o = ReplayOptions { pcie_leg_cycles: leg, tie_seed, ..ReplayOptions::default() };
    let mut m = R9Nano::new(&rows, &o);
    let log = std::env::var("UVMSIM_CYCLE_LOG").ok();
    if log.is_some() {
        m.log_lookups();
    }
    let r = m.run();
    if let Some(path) = log {
        if let Err(e) = m.write_lookup_log(&path) {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!("l1_tlb hit/miss/mshr-hit = {} / {} / {}", r.l1_tlb.hits, r.l1_tlb.misses, r.l1_tlb.mshr_hits);
    println!("l2_tlb hit/miss/mshr-hit = {} / {} / {}", r.l2_tlb.hits, r.l2_tlb.misses, r.l2_tlb.mshr_hits);
    println!("walks = {}  accesses = {}  answers = {}  last_cycle = {}", r.walks, r.accesses, r.answers, r.last_cycle);
    println!("events = {}  wall = {secs:.2} s  ({:.2} M events/s)", r.events, r.events as f64 / secs / 1e6);
}
