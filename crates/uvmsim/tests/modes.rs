//! What each mode runs: work planned past the program's end is not counted.

use uvmsim::config::{resolve, Config, ConfigError, Source};
use uvmsim::stats::Metrics;
use uvmsim::uvm::Cause;
use uvmsim::world::{simulate_full, Output};

fn preset(name: &str) -> Source {
    Source { name: name.into(), text: std::fs::read_to_string(format!("../../presets/{name}.toml")).unwrap() }
}

/// `sets` over preset `name` ("" for the built-in defaults).
fn resolved(name: &str, sets: &[&str]) -> Result<Config, ConfigError> {
    let o: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let presets: Vec<Source> = if name.is_empty() { vec![] } else { vec![preset(name)] };
    resolve(&presets, &o)
}

fn run(name: &str, sets: &[&str]) -> Output {
    simulate_full(&resolved(name, sets).unwrap_or_else(|e| panic!("{e}"))).unwrap_or_else(|e| panic!("{e}"))
}

fn m(x: &Metrics, k: &str) -> f64 {
    x.get(k).unwrap_or_else(|| panic!("no metric {k}"))
}

const STREAM: [&str; 4] =
    ["workload.kind=stream", "workload.stream.elements=262144", "workload.stream.threads=16384", "workload.managed=true"];

fn stream<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = STREAM.to_vec();
    v.extend_from_slice(extra);
    v
}

/// gh200-c2c: the access counters' first migration is planned when the driver services their
/// notification (its CPU unmapping, the first GPU chunk allocation, ...), and its copies start
/// hundreds of µs later, after this 23 µs program has ended. The run stops at the end, so those
/// copies are not counted: no migration row starts after the end, and the bytes, the link's and
/// the migrations table's agree. The unfinished migration's time is not counted either.
#[test]
fn access_counter_copies_planned_past_the_programs_end_are_not_counted() {
    let out = run("gh200-c2c", &stream(&["uvm.records=true"]));
    let x = &out.metrics;
    let end = m(x, "time.total_ns");
    assert!(m(x, "uvm.access_counters.serviced") > 0.0, "the driver took notifications");
    let rows = out.migrations.unwrap();
    assert!(rows.iter().all(|r| r.start_ns <= end), "{rows:?} after {end}");
    let bytes = rows.iter().map(|r| r.bytes).sum::<u64>() as f64;
    assert_eq!(m(x, "link.h2d.bytes"), bytes);
    assert_eq!(m(x, "uvm.bytes_h2d"), bytes);
    assert_eq!(m(x, "uvm.access_counters.bytes_h2d"), bytes);
    assert_eq!(m(x, "uvm.access_counters.pages") * 4096.0, bytes);
    assert!(m(x, "uvm.access_counters.time_ns") <= end);
    assert!(m(x, "link.h2d.utilization") <= 1.0);
    // Migrations that finish within the program are counted whole, and one in flight at its end
    // (its last copy started before it) too, but for its time.
    let g = [
        "workload.kind=gather",
        "workload.gather.table_entries=131072",
        "workload.gather.lookups=262144",
        "workload.managed=true",
        "uvm.records=true",
        "uvm.advise.policy=accessed-by",
        "uvm.access_counters.migrate=true",
    ];
    let on = run("titan-v", &g);
    let x = &on.metrics;
    let rows = on.migrations.unwrap();
    let end = m(x, "time.total_ns");
    assert!(rows.iter().all(|r| r.cause == Cause::AccessCounter && r.start_ns <= end));
    assert!(rows.iter().filter(|r| r.end_ns <= end).count() > 1);
    assert!(m(x, "uvm.access_counters.time_ns") > 0.0 && m(x, "uvm.access_counters.pages") > 0.0);
    assert_eq!(m(x, "link.h2d.bytes"), rows.iter().map(|r| r.bytes).sum::<u64>() as f64);
}
