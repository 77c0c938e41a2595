//! What each mode runs: options of the single-GPU UVM driver's fault path are refused where nothing
//! reads them (IOMMU mode, the multi-GPU model), the multi-GPU model's on one GPU, and one translation
//! mode's hardware in the other; so are host operations and copies the multi-GPU model would charge
//! or drop without effect; work planned past the program's end is not counted.

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

/// A run's metrics but the wall-clock ones (which differ between two runs of one configuration).
fn metrics(c: &Config) -> std::collections::BTreeMap<String, uvmsim::stats::Value> {
    let wall = ["sim.wall_s", "sim.total_wall_s", "sim.events_per_s", "sim.warp_mem_insts_per_s"];
    let mut x = simulate_full(c).unwrap_or_else(|e| panic!("{e}")).metrics.0;
    x.retain(|k, _| !wall.contains(&k.as_str()));
    x
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

/// The driver takes the access counters' notifications `uvm.access_counters.notify_us` after the first of them
/// is raised: with a second's delay, none is serviced within this program of a few milliseconds, and nothing
/// migrates; with the default 5 µs some are.
#[test]
fn access_counter_notifications_wait_for_the_notify_delay() {
    let g = [
        "workload.kind=gather",
        "workload.gather.table_entries=131072",
        "workload.gather.lookups=262144",
        "workload.managed=true",
        "uvm.advise.policy=accessed-by",
        "uvm.access_counters.migrate=true",
    ];
    let late = run("titan-v", &[&g[..], &["uvm.access_counters.notify_us=1000000"]].concat()).metrics;
    assert!(m(&late, "time.total_ns") < 1e9);
    assert!(m(&late, "uvm.access_counters.notifications") > 0.0);
    assert_eq!((m(&late, "uvm.access_counters.serviced"), m(&late, "uvm.access_counters.pages")), (0.0, 0.0));
    let soon = run("titan-v", &g).metrics;
    assert!(m(&soon, "uvm.access_counters.serviced") > 0.0);
}

/// The default value of `key` (dotted) as TOML: always a valid setting of it.
fn default_value(key: &str) -> String {
    let mut v = toml::Value::try_from(Config::default()).unwrap();
    for part in key.split('.') {
        v = v.get(part).unwrap_or_else(|| panic!("no key {key}")).clone();
    }
    v.to_string()
}

/// Presets (or the defaults, "") of each mode.
const PRESETS_BY_MODE: [(Mode, &str); 7] = [
    (Mode::Gmmu, ""),
    (Mode::Gmmu, "titan-v"),
    (Mode::Iommu, "kaveri-apu"),
    (Mode::Iommu, "gh200-c2c"),
    (Mode::Iommu, "mgpusim-r9nano"),
    (Mode::MultiGmmu, "li-4gpu-gmmu"),
    (Mode::MultiIommu, "li-4gpu-ats"),
];

/// Every key the table lists for a mode is refused when the user sets it there (by `--set` or in their
/// own file), even to its default, with one message naming the key, the mode and why; the same key set
/// by a preset is taken (a preset describes its machine's driver), and so are the keys the mode reads.
#[test]
fn unread_keys_are_refused_when_the_user_sets_them() {
    let keys: Vec<String> = Config::reference().into_iter().map(|p| p.key).collect();
    let mut refused_keys = 0;
    for (mode, p) in PRESETS_BY_MODE {
        assert_eq!(resolved(p, &STREAM).unwrap().mode(), mode, "{p}");
        for key in keys.iter().filter(|k| unread_in(k).contains(&mode)) {
            let set = format!("{key}={}", default_value(key));
            let e = resolved(p, &stream(&[&set])).expect_err(&format!("{p}: {set} must be refused"));
            assert_eq!((e.source.as_deref(), e.key.as_deref()), (Some("--set"), Some(key.as_str())), "{p}: {e}");
            assert!(e.message.starts_with("is not read in "), "{p}: {e}");
            refused_keys += 1;
        }
    }
    assert!(refused_keys > 400, "{refused_keys}");
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
    let own = Source::preset(
        "preset my-apu",
        "[uvm]\nbatch_size = 512\n[uvm.preunmap]\nmode = \"async\"\n[gmmu.walker]\nthreads = 4\n[multi.host_mmu]\ntlb_entries = 64\n",
    );
    let c = resolve(&[preset("kaveri-apu"), own.clone()], &set).unwrap();
    assert_eq!((c.uvm.batch_size, c.gmmu.walker.threads, c.multi.host_mmu.tlb_entries), (512, 4, 64));
    resolve(&[preset("li-4gpu-ats"), own], &set).unwrap();
    resolve(
        &[preset("titan-v"), Source::preset("preset my-gpu", "[iommu]\ntlb_entries = 64\n[multi]\nmigration = \"first-touch\"\n")],
        &set,
    )
    .unwrap();
    // What each mode reads is taken (the driver's migration keys in IOMMU mode with a GPU memory of its own;
    // an APU's shared memory refuses them: shared_memory_apus_read_none_of_the_drivers_migration_keys).
    for s in ["uvm.gpu_memory_bytes=\"64MiB\"", "uvm.cost_model=fixed-latency", "uvm.eviction.policy=lru", "uvm.thrashing.enable=false"] {
        resolved("kaveri-apu", &stream(&[s, "workload.prefetch_inputs=true", "iommu.shared_memory=false"]))
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    for s in ["uvm.records=true", "uvm.migration_records_max=10", "uvm.fault_mode=blocking", "uvm.stall_warp_on_fault=true"] {
        resolved("li-4gpu-gmmu", &stream(&[s])).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    // A listed key is taken in every mode that reads it (set to the value it has there), but on an APU with
    // shared memory (kaveri-apu) the driver's migration keys (gh200-c2c, in the same mode, takes them).
    for (mode, p) in PRESETS_BY_MODE {
        let cfg = resolved(p, &STREAM).unwrap();
        let base = toml::Value::try_from(&cfg).unwrap();
        let shared = |k: &str| cfg.iommu.shared_memory && cfg.unread(k).is_some_and(|m| m.contains("iommu.shared_memory = true"));
        for key in keys.iter().filter(|k| !unread_in(k).is_empty() && !unread_in(k).contains(&mode) && !shared(k)) {
            let set = format!("{key}={}", key.split('.').try_fold(&base, |v, k| v.get(k)).unwrap());
            resolved(p, &stream(&[&set])).unwrap_or_else(|e| panic!("{p} ({mode:?}): {set}: {e}"));
        }
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
    type Change = (&'static str, fn(&mut Config));
    let iommu: [Change; 13] = [
        ("uvm.batch_size", |c| c.uvm.batch_size = 8),
        ("uvm.utlb_merge_faults", |c| c.uvm.utlb_merge_faults = true),
        ("uvm.land_per_copy", |c| c.uvm.land_per_copy = false),
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
    let multi: [Change; 11] = [
        ("uvm.batch_size", |c| c.uvm.batch_size = 8),
        ("uvm.pma_chunk_blocks", |c| c.uvm.pma_chunk_blocks = 1),
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
    // Each run with the metrics of the paths it must take (> 0): page requests and cudaMemPrefetchAsync,
    // access-counter migrations, far faults of several GPUs.
    type Run<'a> = (&'a str, Vec<&'a str>, &'a [Change], &'a [&'a str]);
    let runs: [Run; 4] = [
        (
            "kaveri-apu",
            // GPU memory of its own (not the APU's one memory), for the prefetches to migrate into and evict from.
            stream(&["workload.prefetch_inputs=true", "uvm.gpu_memory_bytes=\"2MiB\"", "iommu.shared_memory=false"]),
            &iommu,
            &["apu.faults", "uvm.prefetch_async.pages"],
        ),
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
            &["uvm.access_counters.pages"],
        ),
        ("li-4gpu-ats", stream(&small), &multi, &["multi.far_faults"]),
        ("li-4gpu-gmmu", stream(&small), &multi, &["multi.far_faults"]),
    ];
    for (p, sets, changes, paths) in runs {
        let base = resolved(p, &sets).unwrap();
        let mode = base.mode();
        let before = metrics(&base);
        for k in paths {
            assert!(before[*k].as_f64() > 0.0, "{p}: {k}");
        }
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

/// One GPU on the single-GPU model runs no part of the multi-GPU model: its options are refused, saying
/// how to run the model; what chooses the model and the oracles one GPU applies to its own walkers and
/// TLBs are taken.
#[test]
fn the_single_gpu_model_refuses_the_multi_gpu_models_options() {
    let place = "is not read in the single-GPU model (multi.gpus = 1 and multi.model_one_gpu = false): ";
    for (p, set) in [
        ("titan-v", "multi.migration=first-touch"),
        ("titan-v", "multi.peer_latency_ns=300"),
        ("", "multi.host_mmu.walker.threads=4"),
        ("titan-v", "multi.idyll.directory=true"),
        ("titan-v", "multi.transfw.prt=true"),
        ("titan-v", "multi.apps_resident=true"),
        ("titan-v", "multi.apps_first_gpu=0"),
        ("kaveri-apu", "multi.oracle.no_migration_latency=true"),
        ("kaveri-apu", "multi.oracle.zero_latency_invalidation=true"),
        ("kaveri-apu", "multi.least_tlb.remote_latency_ns=50"),
        ("gh200-c2c", "multi.cta_placement=round-robin"),
    ] {
        let (k, msg) = refused(p, &stream(&[set]));
        assert_eq!(k, set.split('=').next().unwrap(), "{p} {set}: {msg}");
        assert!(msg.starts_with(place) && msg.contains("set multi.gpus > 1 or multi.model_one_gpu = true"), "{p} {set}: {msg}");
    }
    // The IOMMU-TLB oracle enlarges the IOMMU's TLB and the host MMU's: one GPU in GMMU mode has neither.
    let (k, msg) = refused("titan-v", &stream(&["multi.oracle.infinite_iommu_tlb=true"]));
    assert_eq!(k, "multi.oracle.infinite_iommu_tlb", "{msg}");
    assert!(msg.starts_with("is not read in translation.mode = \"gmmu\" on one GPU: ") && msg.contains("infinite_pwc"), "{msg}");
    for (p, set) in [
        ("kaveri-apu", "multi.oracle.infinite_iommu_tlb=true"),
        ("titan-v", "multi.oracle.infinite_pwc=true"),
        ("kaveri-apu", "multi.oracle.infinite_walkers=true"),
        ("titan-v", "multi.gpus=1"),
        ("titan-v", "multi.model_one_gpu=false"),
    ] {
        resolved(p, &stream(&[set])).unwrap_or_else(|e| panic!("{p} {set}: {e}"));
    }
    // With the model asked for, on one GPU or several, they are taken.
    let asked = ["multi.migration=first-touch", "multi.oracle.no_migration_latency=true", "multi.peer_latency_ns=300"];
    resolved("", &stream(&[&["multi.model_one_gpu=true"][..], &asked].concat())).unwrap();
    resolved("", &stream(&[&["multi.gpus=2"][..], &asked].concat())).unwrap();
    // A preset's [multi] is its machine's: taken when the user runs it on one GPU.
    resolved("li-4gpu-gmmu", &stream(&["multi.gpus=1"])).unwrap();
}

/// One translation mode's hardware is refused in the other: the IOMMU (and Least-TLB, its TLB as a
/// victim cache) in GMMU mode, the GMMU's walkers in IOMMU mode; in the multi-GPU model the APU's
/// page-request path and shootdowns, and in its ATS mode the host MMU, IDYLL and Trans-FW. Each
/// message says what the key needs.
#[test]
fn each_translation_mode_refuses_the_other_modes_hardware() {
    let gmmu = "is not read in translation.mode = \"gmmu\": ";
    let iommu = "is not read in translation.mode = \"iommu\": ";
    let multi = "is not read in the multi-GPU model (multi.gpus > 1 or multi.model_one_gpu = true): ";
    let ats = "is not read in the multi-GPU model with translation.mode = \"iommu\": ";
    let (to_iommu, to_gmmu) = ("they need translation.mode = \"iommu\"", "they need translation.mode = \"gmmu\"");
    let to_one = "they need one APU: multi.gpus = 1 and multi.model_one_gpu = false, with translation.mode = \"iommu\"";
    let cases = [
        ("titan-v", "iommu.tlb_entries=64", gmmu, to_iommu),
        ("", "iommu.ppr.irq_us=1", gmmu, to_iommu),
        ("titan-v", "iommu.shootdown.init_ns=10", gmmu, to_iommu),
        ("li-4gpu-gmmu", "iommu.walker.threads=4", gmmu, to_iommu),
        ("li-4gpu-gmmu", "iommu.ats_prefetch_pages=1", gmmu, to_iommu),
        ("li-4gpu-gmmu", "multi.least_tlb.tracker=false", gmmu, to_iommu),
        ("kaveri-apu", "gmmu.walker.threads=4", iommu, to_gmmu),
        ("mgpusim-r9nano", "gmmu.walker.pwc_organization=unified", iommu, to_gmmu),
        ("li-4gpu-ats", "gmmu.walker.pwc_entries=0", iommu, to_gmmu),
        ("li-4gpu-ats", "iommu.ppr.irq_us=1", multi, to_one),
        ("li-4gpu-ats", "iommu.shootdown.init_ns=10", multi, to_one),
        ("li-4gpu-gmmu", "iommu.ppr.irq_us=1", multi, to_one),
        ("li-4gpu-ats", "multi.host_mmu.tlb_entries=64", ats, to_gmmu),
        ("li-4gpu-ats", "multi.idyll.irmb_bases=16", ats, to_gmmu),
        ("li-4gpu-ats", "multi.transfw.prt_entries=100", ats, to_gmmu),
    ];
    for (p, set, place, need) in cases {
        let (k, msg) = refused(p, &stream(&[set]));
        assert_eq!(k, set.split('=').next().unwrap(), "{p} {set}: {msg}");
        assert!(msg.starts_with(place) && msg.ends_with(need), "{p} {set}: {msg}");
    }
    // Where the hardware is, taken.
    for (p, set) in [
        ("kaveri-apu", "iommu.ppr.irq_us=1"),
        ("kaveri-apu", "iommu.shootdown.init_ns=10"),
        ("li-4gpu-ats", "iommu.tlb_entries=64"),
        ("li-4gpu-ats", "multi.least_tlb.tracker_entries=1024"),
        ("titan-v", "gmmu.walker.threads=4"),
        ("li-4gpu-gmmu", "gmmu.walker.threads=4"),
        ("li-4gpu-gmmu", "multi.host_mmu.walker.threads=4"),
        ("li-4gpu-gmmu", "multi.idyll.irmb_bases=16"),
        ("li-4gpu-gmmu", "multi.transfw.prt_entries=100"),
    ] {
        resolved(p, &stream(&[set])).unwrap_or_else(|e| panic!("{p} {set}: {e}"));
    }
    // A preset of the other mode, switched: the preset's keys stay taken, the new mode's are read.
    resolved("kaveri-apu", &stream(&["translation.mode=gmmu", "gmmu.walker.threads=4"])).unwrap();
    resolved("li-4gpu-ats", &stream(&["translation.mode=gmmu", "multi.host_mmu.walker.threads=4"])).unwrap();
    resolved("li-4gpu-gmmu", &stream(&["translation.mode=iommu", "iommu.walker.threads=4"])).unwrap();
    // In the user's file, named by it; a section set whole, by the section.
    let set: Vec<String> = STREAM.iter().map(|s| s.to_string()).collect();
    let e = resolve(&[preset("titan-v"), Source::user("my.toml", "[iommu.walker]\nthreads = 4\n")], &set).unwrap_err();
    assert_eq!((e.source.as_deref(), e.key.as_deref()), (Some("my.toml"), Some("iommu.walker.threads")), "{e}");
    let (k, _) = refused("kaveri-apu", &stream(&["gmmu.walker={threads = 4}"]));
    assert_eq!(k, "gmmu.walker");
}

/// `c` with `key` (dotted) changed to another value its checks accept, if there is one: a flipped
/// boolean, a number doubled, halved or one more, another name. Past the resolver, so not refused.
fn changed(c: &Config, key: &str) -> Option<Config> {
    use toml::Value;
    let root = Value::try_from(c).unwrap();
    let now = key.split('.').try_fold(&root, |v, k| v.get(k)).unwrap_or_else(|| panic!("no key {key}"));
    let names = ["per-level", "unified", "greedy", "round-robin", "on-touch", "first-touch", "access-counter", "read-replication"];
    let others: Vec<Value> = match now {
        Value::Boolean(b) => vec![Value::Boolean(!b)],
        Value::Integer(i) => vec![i * 2, i / 2, i + 1].into_iter().map(Value::Integer).collect(),
        Value::Float(f) => vec![f * 2.0 + 1.0, f / 2.0].into_iter().map(Value::Float).collect(),
        Value::String(_) => {
            names.iter().chain(&["switch", "direct", "host", "distributed"]).map(|n| Value::String(n.to_string())).collect()
        }
        _ => vec![],
    };
    others.into_iter().find_map(|v| {
        let mut t = root.clone();
        let (path, leaf) = key.rsplit_once('.').unwrap();
        let table = path.split('.').fold(&mut t, |v, k| v.get_mut(k).unwrap());
        table.as_table_mut().unwrap().insert(leaf.to_string(), v);
        let n: Config = t.try_into().ok()?;
        (n != *c && n.validate().is_ok()).then_some(n)
    })
}

/// The evidence for the `[multi]`, `[iommu]` and `[gmmu]` rows of the table: every key listed for a
/// mode, changed on the resolved config (past the refusal), changes no metric in that mode, in runs
/// that take the paths it has (one GPU far-faulting on managed memory; kaveri-apu's page requests,
/// cudaMemPrefetchAsync and evictions; several GPUs migrating pages on touch, with invalidations). The
/// same changes move a metric where the key is read, so these runs would show one. Wall-clock
/// metrics aside.
#[test]
fn multi_and_translation_keys_change_no_metric() {
    let small = ["workload.stream.elements=65536", "workload.stream.threads=4096"];
    let stencil = [
        "workload.kind=stencil2d",
        "workload.stencil2d.nx=256",
        "workload.stencil2d.ny=256",
        "workload.managed=true",
        "gpu.sms=4",
        "multi.migration=on-touch",
    ];
    // Keys whose other values their own checks refuse in these modes (Least-TLB needs the IOMMU, its
    // spilling multi.apps, IDYLL and Trans-FW the GMMU, multi.apps the multi-GPU model): only the
    // default is ever set there.
    let only_default = [
        "multi.apps",
        "multi.least_tlb.enabled",
        "multi.least_tlb.spill",
        "multi.idyll.directory",
        "multi.idyll.lazy",
        "multi.transfw.prt",
        "multi.transfw.forwarding",
    ];
    let runs: [(&str, Vec<&str>, &[&str]); 4] = [
        ("titan-v", stream(&small), &["gmmu.walker.level_latency_ns", "multi.oracle.infinite_walkers"]),
        (
            "kaveri-apu",
            // A GPU memory of its own, for the prefetches to migrate into.
            stream(
                &[&small[..], &["workload.prefetch_inputs=true", "iommu.shared_memory=false", "uvm.gpu_memory_bytes=\"2MiB\""]].concat(),
            ),
            &["iommu.link_latency_ns", "iommu.ppr.irq_us"],
        ),
        (
            "li-4gpu-gmmu",
            stencil.to_vec(),
            &[
                "gmmu.walker.level_latency_ns",
                "multi.host_mmu.walker.level_latency_ns",
                "multi.idyll.lazy",
                "multi.transfw.prt",
                "multi.shootdown_stalls_gpu",
            ],
        ),
        ("li-4gpu-ats", stencil.to_vec(), &["iommu.walker.level_latency_ns", "multi.peer_latency_ns", "multi.least_tlb.enabled"]),
    ];
    let keys: Vec<String> = Config::reference()
        .into_iter()
        .map(|p| p.key)
        .filter(|k| ["multi.", "iommu.", "gmmu.", "sim."].iter().any(|s| k.starts_with(s)))
        .collect();
    for (p, sets, read) in runs {
        let base = resolved(p, &sets).unwrap();
        let mode = base.mode();
        let before = metrics(&base);
        let mut unchanged = vec![];
        let mut n = 0;
        for key in keys.iter().filter(|k| unread_in(k).contains(&mode)) {
            assert!(base.unread(key).is_some(), "{key}");
            let Some(c) = changed(&base, key) else {
                unchanged.push(key.as_str());
                continue;
            };
            assert!(before == metrics(&c), "{p}: {key} changed a metric");
            n += 1;
        }
        assert!(unchanged.iter().all(|k| only_default.contains(k)), "{p}: no other value of {unchanged:?}");
        assert!(n >= 20, "{p}: {n} keys changed");
        for key in read {
            assert!(!unread_in(key).contains(&mode), "{key}");
            let c = changed(&base, key).unwrap_or_else(|| panic!("{key}"));
            assert!(before != metrics(&c), "{p}: {key} is read but moved no metric");
        }
    }
}

/// Each progress watchdog counts what one model does: the driver's fault batches on one GPU in GMMU
/// mode, far-fault answers in the multi-GPU model (the APU's page-request path has neither). At 1
/// (fail once one batch or answer went by with no instruction completed) a watchdog stops a managed
/// first-touch run where it is read; where it is not, it is refused, and past the resolver the run
/// finishes.
#[test]
fn each_watchdog_is_read_only_by_its_model() {
    for (p, reads) in [
        ("titan-v", Some("sim.watchdog_batches")),
        ("kaveri-apu", None),
        ("li-4gpu-gmmu", Some("sim.watchdog_answers")),
        ("li-4gpu-ats", Some("sim.watchdog_answers")),
    ] {
        let mut sets = stream(&["workload.stream.elements=65536", "workload.stream.threads=4096"]);
        if p.starts_with("li-") {
            sets.push("multi.migration=on-touch");
        }
        let base = resolved(p, &sets).unwrap();
        for key in ["sim.watchdog_batches", "sim.watchdog_answers"] {
            let mut c = base.clone();
            match key {
                "sim.watchdog_batches" => c.sim.watchdog_batches = 1,
                _ => c.sim.watchdog_answers = 1,
            }
            let set = format!("{key}=1");
            let user = resolved(p, &[&sets[..], &[set.as_str()]].concat());
            if reads == Some(key) {
                assert!(user.is_ok(), "{p}: {key} refused");
                let e = simulate_full(&c).map(|_| ()).expect_err("its own watchdog at 1 stops the run");
                assert!(e.to_string().contains(key), "{p}: {e}");
            } else {
                let e = user.expect_err("an unread watchdog is refused");
                assert_eq!(e.key.as_deref(), Some(key), "{p}: {}", e.message);
                simulate_full(&c).unwrap_or_else(|e| panic!("{p}: {key} = 1 was read: {e}"));
            }
        }
    }
}

/// Several keys the configured mode does not read: the refusal names the first and lists the others with their
/// sources, so one run shows them all.
#[test]
fn a_refusal_of_unread_keys_names_every_one() {
    let (k, msg) = refused("kaveri-apu", &stream(&["uvm.batch_size=64", "gmmu.walker.threads=4", "uvm.replay_us=3"]));
    assert_eq!(k, "gmmu.walker.threads", "{msg}");
    assert!(msg.ends_with("; not read in this configuration either (2 more): `uvm.batch_size` (--set), `uvm.replay_us` (--set)"), "{msg}");
    // One alone reads as before.
    let (_, msg) = refused("kaveri-apu", &stream(&["uvm.batch_size=64"]));
    assert!(!msg.contains("either"), "{msg}");
}

/// An APU (`iommu.shared_memory = true`): the driver's migration keys are refused when set, and the evidence that
/// nothing reads them: each, changed on the resolved config, changes no metric of a kaveri-apu run that prefetches
/// its buffer and touches it from the host between kernels (ping-pong), the paths that read them on a GPU with
/// memory of its own. With `iommu.shared_memory = false` the same run migrates, and the changes show.
#[test]
fn shared_memory_apus_read_none_of_the_drivers_migration_keys() {
    type Change = (&'static str, fn(&mut Config));
    let changes: [Change; 8] = [
        ("uvm.per_block_us", |c| c.uvm.per_block_us = 500.0),
        ("uvm.first_touch_us", |c| c.uvm.first_touch_us = 500.0),
        ("uvm.unmap_us", |c| c.uvm.unmap_us = 500.0),
        ("uvm.map_us", |c| c.uvm.map_us = 500.0),
        ("uvm.tracker_us", |c| c.uvm.tracker_us = 500.0),
        ("uvm.cost_model", |c| c.uvm.cost_model = uvmsim::uvm::CostModel::FixedLatency),
        ("uvm.thrashing.enable", |c| c.uvm.thrashing.enable = false),
        ("workload.host_threads", |c| c.workload.host_threads = 16),
    ];
    let sets = ["workload.kind=ping-pong", "workload.ping_pong.iterations=20", "workload.managed=true", "workload.prefetch_inputs=true"];
    let base = resolved("kaveri-apu", &sets).unwrap();
    assert!(base.iommu.shared_memory);
    let before = metrics(&base);
    assert!(before["apu.faults"].as_f64() > 0.0 && before["uvm.prefetch_async.calls"].as_f64() > 0.0);
    let mut own = base.clone();
    own.iommu.shared_memory = false;
    let migrating = metrics(&own);
    for (key, change) in changes {
        let value = match key {
            "uvm.cost_model" => "\"fixed-latency\"",
            "uvm.thrashing.enable" => "false",
            _ => "16",
        };
        let (k, msg) = refused("kaveri-apu", &[&sets[..], &[&format!("{key}={value}")]].concat());
        assert_eq!(k, key, "{msg}");
        assert!(msg.starts_with("is not read with iommu.shared_memory = true (an APU): "), "{msg}");
        let mut c = base.clone();
        change(&mut c);
        assert!(before == metrics(&c), "{key} changed a metric");
        // The same change on a GPU with memory of its own: the run's migrations read it (but the thrashing
        // detector: a page the host took back is mapped in place by its next request, so nothing thrashes).
        if key != "uvm.thrashing.enable" {
            let mut c = own.clone();
            change(&mut c);
            assert!(migrating != metrics(&c), "{key} changed nothing with memory of its own");
        }
    }
}
