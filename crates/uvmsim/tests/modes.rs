//! What each mode runs: options of the single-GPU UVM driver's fault path are refused where nothing
//! reads them (IOMMU mode, the multi-GPU model), and so are host operations and copies the
//! multi-GPU model would charge or drop without effect; work planned past the program's end is
//! not counted.

use uvmsim::config::{resolve, unread_in, Config, ConfigError, Mode, Source};
use uvmsim::stats::Metrics;
use uvmsim::uvm::Cause;
use uvmsim::world::{simulate_full, Output};

fn preset(name: &str) -> Source {
    Source::preset(name, std::fs::read_to_string(format!("../../presets/{name}.toml")).unwrap())
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
    // Nothing reads the prefetcher there, whatever its policy: set by the user, "none" is refused too.
    let (k, msg) = refused("gh200-c2c", &stream(&["uvm.prefetch.policy=none"]));
    assert_eq!(k, "uvm.prefetch.policy", "{msg}");
    assert!(msg.starts_with("is not read in translation.mode = \"iommu\""), "{msg}");
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
    let cases: [(&str, &str, &str); 7] = [
        ("uvm.advise.policy=read-mostly", "uvm.advise.policy", "multi.migration = \"read-replication\""),
        ("uvm.advise.per_buffer=[\"accessed-by\"]", "uvm.advise.per_buffer", "multi.migration"),
        ("uvm.prefetch.policy=density", "uvm.prefetch.policy", "\"none\""),
        ("uvm.access_counters.migrate=true", "uvm.access_counters.migrate", "multi.migration = \"access-counter\""),
        ("uvm.baselines=true", "uvm.baselines", "multi.gpus = 1"),
        ("workload.memcpy_inputs=true", "workload.memcpy_inputs", "multi.gpus = 1"),
        // It charged a copy back on one GPU's link and moved no page.
        ("workload.memcpy_outputs=true", "workload.memcpy_outputs", "multi.gpus = 1"),
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

/// The default value of `key` (dotted) as TOML: always a valid setting of it.
fn default_value(key: &str) -> String {
    let mut v = toml::Value::try_from(Config::default()).unwrap();
    for part in key.split('.') {
        v = v.get(part).unwrap_or_else(|| panic!("no key {key}")).clone();
    }
    v.to_string()
}

/// Every key the table lists for a mode is refused when the user sets it there (by `--set` or in their
/// own file), even to its default, with one message naming the key, the mode and why; the same key set
/// by a preset is taken (a preset describes its machine's driver), and so are the keys the mode reads.
#[test]
fn unread_keys_are_refused_when_the_user_sets_them() {
    let keys: Vec<String> = Config::reference().into_iter().map(|p| p.key).collect();
    let cases = [
        (Mode::Iommu, "kaveri-apu", "translation.mode = \"iommu\": "),
        (Mode::Iommu, "gh200-c2c", "translation.mode = \"iommu\": "),
        (Mode::Multi, "li-4gpu-ats", "the multi-GPU model (multi.gpus > 1 or multi.model_one_gpu = true): "),
        (Mode::Multi, "li-4gpu-gmmu", "the multi-GPU model (multi.gpus > 1 or multi.model_one_gpu = true): "),
    ];
    let mut refused_keys = 0;
    for (mode, p, name) in cases {
        for key in keys.iter().filter(|k| unread_in(k).contains(&mode)) {
            let set = format!("{key}={}", default_value(key));
            let e = resolved(p, &stream(&[&set])).expect_err(&format!("{p}: {set} must be refused"));
            assert_eq!((e.source.as_deref(), e.key.as_deref()), (Some("--set"), Some(key.as_str())), "{p}: {e}");
            assert!(e.message.starts_with(&format!("is not read in {name}")), "{p}: {e}");
            refused_keys += 1;
        }
    }
    assert!(refused_keys > 100, "{refused_keys}");
    // In the user's file: named by the file.
    let file = Source::user("my.toml", "[uvm]\nbatch_size = 512\n");
    let set: Vec<String> = STREAM.iter().map(|s| s.to_string()).collect();
    let e = resolve(&[preset("kaveri-apu"), file], &set).unwrap_err();
    assert_eq!((e.source.as_deref(), e.key.as_deref()), (Some("my.toml"), Some("uvm.batch_size")), "{e}");
    assert!(e.message.contains("[iommu.ppr]"), "{e}");
    // A whole section set at once is checked key by key.
    let (k, _) = refused("li-4gpu-gmmu", &stream(&["uvm.thrashing={enable = false}"]));
    assert_eq!(k, "uvm.thrashing");
    // In a preset: taken (its machine's driver settings, read when the mode changes).
    let own = Source::preset("preset my-apu", "[uvm]\nbatch_size = 512\n[uvm.preunmap]\nmode = \"async\"\n");
    let c = resolve(&[preset("kaveri-apu"), own.clone()], &set).unwrap();
    assert_eq!(c.uvm.batch_size, 512);
    resolve(&[preset("li-4gpu-ats"), own], &set).unwrap();
    // What each mode reads is taken.
    for s in ["uvm.gpu_memory_bytes=\"64MiB\"", "uvm.cost_model=fixed-latency", "uvm.eviction.policy=lru", "uvm.thrashing.enable=false"] {
        resolved("kaveri-apu", &stream(&[s, "workload.prefetch_inputs=true"])).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    for s in ["uvm.records=true", "uvm.migration_records_max=10", "uvm.fault_mode=blocking", "uvm.stall_warp_on_fault=true"] {
        resolved("li-4gpu-gmmu", &stream(&[s])).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    // The driver's fault path reads them all.
    for key in keys.iter().filter(|k| !unread_in(k).is_empty()) {
        let set = format!("{key}={}", default_value(key));
        resolved("titan-v", &stream(&[&set])).unwrap_or_else(|e| panic!("{set}: {e}"));
    }
}

/// Every shipped preset resolves, and sets no key its own mode does not read: it resolves as the
/// user's file too (a preset's keys are taken either way, but an unread one would only mislead).
#[test]
fn every_preset_resolves_and_sets_only_keys_its_mode_reads() {
    let mut n = 0;
    for entry in std::fs::read_dir("../../presets").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.display().to_string();
        resolve(&[Source::preset(name.clone(), text.clone())], &[]).unwrap_or_else(|e| panic!("{e}"));
        resolve(&[Source::user(name, text)], &[]).unwrap_or_else(|e| panic!("{e}"));
        n += 1;
    }
    assert!(n >= 12, "{n} presets");
}

/// The evidence for the table: a sample of its keys, changed on the resolved config (past the
/// refusal), changes no metric in its mode, in runs that take the paths the mode still has (the
/// driver's migrations in IOMMU mode: cudaMemPrefetchAsync into a GPU memory it fills, access-counter
/// migration on gh200-c2c; several GPUs faulting). Wall-clock metrics aside.
#[test]
fn unread_keys_change_no_metric() {
    let wall = ["sim.wall_s", "sim.total_wall_s", "sim.events_per_s", "sim.warp_mem_insts_per_s"];
    let metrics = |c: &Config| {
        let mut x = simulate_full(c).unwrap_or_else(|e| panic!("{e}")).metrics.0;
        x.retain(|k, _| !wall.contains(&k.as_str()));
        x
    };
    type Change = (&'static str, fn(&mut Config));
    let iommu: [Change; 11] = [
        ("uvm.batch_size", |c| c.uvm.batch_size = 8),
        ("uvm.replay_policy", |c| c.uvm.replay_policy = uvmsim::uvm::ReplayPolicy::Once),
        ("uvm.utlb_fault_limit", |c| c.uvm.utlb_fault_limit = 1),
        ("uvm.fault_buffer_entries", |c| (c.uvm.fault_buffer_entries, c.uvm.batch_size) = (16, 16)),
        ("uvm.interrupt_us", |c| c.uvm.interrupt_us = 500.0),
        ("uvm.per_fault_us", |c| c.uvm.per_fault_us = 50.0),
        ("uvm.replay_us", |c| c.uvm.replay_us = 500.0),
        ("uvm.fault_latency_us", |c| c.uvm.fault_latency_us = 500.0),
        ("uvm.sm_fault_interval_ns", |c| c.uvm.sm_fault_interval_ns = 5000.0),
        ("uvm.prefetch.threshold", |c| c.uvm.prefetch.threshold = 1),
        ("uvm.preunmap.mode", |c| c.uvm.preunmap.mode = uvmsim::uvm::policy::UnmapMode::Async),
    ];
    let multi: [Change; 10] = [
        ("uvm.batch_size", |c| c.uvm.batch_size = 8),
        ("uvm.interrupt_us", |c| c.uvm.interrupt_us = 500.0),
        ("uvm.per_block_us", |c| c.uvm.per_block_us = 500.0),
        ("uvm.first_touch_us", |c| c.uvm.first_touch_us = 500.0),
        ("uvm.cpu_fault_us", |c| c.uvm.cpu_fault_us = 500.0),
        ("uvm.thrashing.enable", |c| c.uvm.thrashing.enable = false),
        ("uvm.eviction.policy", |c| c.uvm.eviction.policy = uvmsim::uvm::evict::EvictionPolicy::Random),
        ("uvm.access_counters.threshold", |c| c.uvm.access_counters.threshold = 1),
        ("uvm.cost_model", |c| c.uvm.cost_model = uvmsim::uvm::CostModel::FixedLatency),
        ("workload.host_threads", |c| c.workload.host_threads = 16),
    ];
    let small = ["workload.stream.elements=65536", "workload.stream.threads=4096"];
    let runs: [(&str, Vec<&str>, &[Change]); 4] = [
        ("kaveri-apu", stream(&["workload.prefetch_inputs=true", "uvm.gpu_memory_bytes=\"2MiB\""]), &iommu),
        (
            "gh200-c2c",
            [
                "workload.kind=regular",
                "workload.regular.threads=65536",
                "workload.managed=true",
                "gpu.sms=8",
                "uvm.gpu_memory_bytes=\"2MiB\"",
                "uvm.access_counters.threshold=2",
            ]
            .to_vec(),
            &iommu,
        ),
        ("li-4gpu-ats", stream(&small), &multi),
        ("li-4gpu-gmmu", stream(&small), &multi),
    ];
    for (p, sets, changes) in runs {
        let base = resolved(p, &sets).unwrap();
        let mode = base.unread_mode().unwrap();
        let before = metrics(&base);
        // The runs take the driver's paths the mode still has: its migrations fill GPU memory and evict.
        if mode == Mode::Iommu {
            assert!(before["uvm.evictions"].as_f64() > 0.0, "{p}: no eviction");
        }
        for (key, change) in changes {
            assert!(unread_in(key).contains(&mode), "{key} is not listed for {mode:?}");
            let mut c = base.clone();
            change(&mut c);
            assert!(c.unread(key).is_some(), "{key}");
            assert!(before == metrics(&c), "{p}: {key} changed a metric");
        }
    }
}
