//! Replay an MGPUSim trace through the cycle-stepped R9 Nano path and print
//! the TLB counts: `cycle_replay TRACE [PCIE_LEG_CYCLES]` (with a leg, the
//! PCIe network is replaced by a fixed-latency pipe); with
//! `UVMSIM_CYCLE_LOG=FILE`, every TLB lookup is written to FILE as
//! `cycle TLB page outcome`, named as MGPUSim names its TLBs; with
//! `UVMSIM_TIE_SEED=N`, events of the same cycle run in an order seeded by N;
//! with `UVMSIM_SIDE_LOG=FILE`, the scalar and instruction paths' messages an
//! instrumented MGPUSim run logged (scripts/akita-crosscheck) are sent too;
//! with `UVMSIM_STORES_WAIT=1`, stores wait for their wavefront's loads
//! (`ReplayOptions::stores_wait_for_loads`); with `UVMSIM_KEEP_GAPS=1`, each
//! row its recorded gap after the previous row of its wavefront was sent
//! (`ReplayOptions::keep_wavefront_gaps`).
use std::time::Instant;
use uvmsim::cycle::machine::{read_rows, R9Nano, ReplayOptions, Row, SideMsg, SidePort};

/// An on/off switch from the environment: unset or `0` is off, `1` on; anything else exits 2.
fn flag(name: &str) -> bool {
    match std::env::var(name).as_deref() {
        Err(_) | Ok("0") => false,
        Ok("1") => true,
        Ok(v) => {
            eprintln!("{name} must be 0 or 1, got {v:?}");
            std::process::exit(2);
        }
    }
}

/// The side-traffic lines of an instrumented MGPUSim run's connection log:
/// `INJ cycle connection source-port message-type address destination-port`,
/// kept for the two shared connections (L1 TLBs to L2 TLB, L1 caches to L2).
fn read_side(path: &str) -> Result<Vec<SideMsg>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let index = |s: &str, key: &str| s.split(key).nth(1).and_then(|x| x.split(']').next()).and_then(|x| x.parse::<usize>().ok());
    let mut out = Vec::new();
    for (n, l) in text.lines().enumerate() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.first() != Some(&"INJ") || !(f.get(2).is_some_and(|c| c.ends_with("L1ToL2") || c.ends_with("L1TLBToL2TLB"))) {
            continue;
        }
        let bad = || format!("{path}:{}: not `INJ cycle conn src type addr dst`: {l}", n + 1);
        if f.len() != 7 {
            return Err(bad());
        }
        let port = if f[3].contains("L1STLB") {
            SidePort::ScalarTlb
        } else if f[3].contains("L1ITLB") {
            SidePort::InstTlb
        } else if f[3].contains("L1SCache") {
            SidePort::ScalarCache
        } else if f[3].contains("L1I") {
            SidePort::InstCache
        } else {
            return Err(bad());
        };
        out.push(SideMsg {
            cycle: f[1].parse().map_err(|_| bad())?,
            sa: index(f[3], "SA[").filter(|&sa| sa < 16).ok_or_else(bad)?,
            port,
            write: f[4].contains("Write"),
            addr: u64::from_str_radix(f[5], 16).map_err(|_| bad())?,
        });
    }
    Ok(out)
}

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
    let side = match std::env::var("UVMSIM_SIDE_LOG").ok().map(|p| read_side(&p)) {
        None => Vec::new(),
        Some(Ok(v)) => v,
        Some(Err(e)) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let stores_wait_for_loads = flag("UVMSIM_STORES_WAIT");
    let keep_wavefront_gaps = flag("UVMSIM_KEEP_GAPS");
    let o = ReplayOptions { pcie_leg_cycles: leg, tie_seed, side, stores_wait_for_loads, keep_wavefront_gaps, ..ReplayOptions::default() };
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
    // A closed pipe (`| head`) ends the printing, not the process with a panic.
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "l1_tlb hit/miss/mshr-hit = {} / {} / {}", r.l1_tlb.hits, r.l1_tlb.misses, r.l1_tlb.mshr_hits);
    let _ = writeln!(out, "l2_tlb hit/miss/mshr-hit = {} / {} / {}", r.l2_tlb.hits, r.l2_tlb.misses, r.l2_tlb.mshr_hits);
    let _ = writeln!(
        out,
        "walks = {}  accesses = {}  answers = {}  last_cycle = {}  held_rows = {}",
        r.walks, r.accesses, r.answers, r.last_cycle, r.held_rows
    );
    let _ = writeln!(out, "events = {}  wall = {secs:.2} s  ({:.2} M events/s)", r.events, r.events as f64 / secs / 1e6);
}
