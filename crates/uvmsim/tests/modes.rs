//! What each mode runs: options of the single-GPU UVM driver's fault path are refused where nothing
//! reads them (IOMMU mode, the multi-GPU model), and so are host operations and copies the
//! multi-GPU model would charge or drop without effect; work planned past the program's end is
//! not counted.

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

/// The key a refused configuration names, and its message.
fn refused(name: &str, sets: &[&str]) -> (String, String) {
    let e = resolved(name, sets).expect_err("must be refused");
    (e.key.clone().unwrap_or_default(), e.message)
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

/// IOMMU mode: far faults go to the page-request path, so the driver's prefetcher and read
/// duplication never run (they gave the metrics of no setting at all); preferred-location-host
/// is read only by access-counter migration. The presets themselves resolve.
#[test]
fn iommu_mode_refuses_the_driver_fault_paths_options() {
    for p in ["gh200-c2c", "kaveri-apu", "mi300a-apu", "mgpusim-r9nano"] {
        resolved(p, &STREAM).unwrap_or_else(|e| panic!("{p}: {e}"));
    }
    let (k, msg) = refused("gh200-c2c", &stream(&["uvm.prefetch.policy=density"]));
    assert_eq!(k, "uvm.prefetch.policy", "{msg}");
    assert!(msg.contains("translation.mode = \"iommu\"") && msg.contains("iommu.ppr.pages_log2"), "{msg}");
    resolved("gh200-c2c", &stream(&["uvm.prefetch.policy=none"])).unwrap();
    for p in ["gh200-c2c", "kaveri-apu"] {
        let (k, msg) = refused(p, &stream(&["uvm.advise.policy=read-mostly"]));
        assert_eq!(k, "uvm.advise.policy", "{p}: {msg}");
        assert!(msg.contains("translation.mode = \"gmmu\""), "{msg}");
    }
    let (k, _) = refused("kaveri-apu", &stream(&["uvm.advise.per_buffer=[\"none\", \"read-mostly\"]"]));
    assert_eq!(k, "uvm.advise.per_buffer");
    // Without access-counter migration nothing reads preferred-location-host in IOMMU mode.
    let (k, msg) = refused("kaveri-apu", &stream(&["uvm.advise.policy=preferred-location-host"]));
    assert_eq!(k, "uvm.advise.policy", "{msg}");
    assert!(msg.contains("accessed-by"), "{msg}");
    resolved("gh200-c2c", &stream(&["uvm.advise.policy=preferred-location-host"])).unwrap();
    // The same options on the driver's fault path are taken.
    resolved("titan-v", &stream(&["uvm.prefetch.policy=density", "uvm.advise.policy=read-mostly"])).unwrap();
}

/// The multi-GPU model never runs the single-GPU driver: its hints, prefetcher, access-counter
/// migration and copy-then-execute baselines changed nothing (or, for the baselines, compared with
/// copies that placed no page); each is refused with the multi-GPU way to get it.
#[test]
fn the_multi_gpu_model_refuses_the_single_gpu_drivers_options() {
    let cases: [(&str, &str, &str); 6] = [
        ("uvm.advise.policy=read-mostly", "uvm.advise.policy", "multi.migration = \"read-replication\""),
        ("uvm.advise.per_buffer=[\"accessed-by\"]", "uvm.advise.per_buffer", "multi.migration"),
        ("uvm.prefetch.policy=density", "uvm.prefetch.policy", "\"none\""),
        ("uvm.access_counters.migrate=true", "uvm.access_counters.migrate", "multi.migration = \"access-counter\""),
        ("uvm.baselines=true", "uvm.baselines", "multi.gpus = 1"),
        ("workload.memcpy_inputs=true", "workload.memcpy_inputs", "multi.gpus = 1"),
    ];
    for (set, key, hint) in cases {
        for p in ["li-4gpu-gmmu", "li-4gpu-ats"] {
            let (k, msg) = refused(p, &stream(&[set]));
            assert_eq!(k, key, "{p} {set}: {msg}");
            assert!(msg.contains(hint), "{p} {set}: {msg}");
        }
    }
    // One GPU on the multi-GPU model is the multi-GPU model too.
    let (k, msg) = refused("", &stream(&["multi.model_one_gpu=true", "workload.prefetch_inputs=true"]));
    assert_eq!(k, "workload.prefetch_inputs", "{msg}");
    assert!(msg.contains("multi.model_one_gpu = false"), "{msg}");
    let (k, _) = refused("", &stream(&["multi.model_one_gpu=true", "uvm.prefetch.policy=density"]));
    assert_eq!(k, "uvm.prefetch.policy");
    let (k, _) = refused("li-4gpu-gmmu", &stream(&["workload.host_init=false"]));
    assert_eq!(k, "workload.host_init");
    resolved("li-4gpu-gmmu", &STREAM).unwrap();
}

/// Host-interaction workloads: ping-pong's host accesses went to the single-GPU driver, which
/// the multi-GPU model does not run, and were dropped (16 far faults for 16 pages over 50
/// iterations); the APU shootdown workload needs the single GPU's IOMMU.
#[test]
fn host_interaction_workloads_need_one_gpu() {
    let pp = ["workload.kind=ping-pong", "workload.ping_pong.iterations=50", "workload.ping_pong.host_us=1000"];
    let (k, msg) = refused("li-4gpu-gmmu", &pp);
    assert_eq!(k, "workload.kind", "{msg}");
    assert!(msg.contains("ping-pong") && msg.contains("multi.gpus = 1"), "{msg}");
    let (k, _) = refused("", &[&pp[..], &["multi.model_one_gpu=true"]].concat());
    assert_eq!(k, "workload.kind");
    let (k, _) = refused("kaveri-apu", &["workload.kind=shootdown", "multi.model_one_gpu=true"]);
    assert_eq!(k, "multi.model_one_gpu");
    resolved("titan-v", &[&pp[..], &["workload.managed=true"]].concat()).unwrap();
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
