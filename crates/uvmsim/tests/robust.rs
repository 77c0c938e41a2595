//! Runs that used to never end: far-fault service under oversubscription
//! (whole-instruction replay, the polled handler waking every warp at each
//! eviction) and the progress watchdog.

use uvmsim::config::{resolve, Source};
use uvmsim::stats::Metrics;
use uvmsim::world::simulate;

fn zheng(sets: &[&str]) -> Result<Metrics, String> {
    let preset = Source::preset("gtx480-zheng", include_str!("../../../presets/gtx480-zheng.toml"));
    let mut all = vec!["workload.managed=true".to_string()];
    all.extend(sets.iter().map(|s| s.to_string()));
    let c = resolve(&[preset], &all).unwrap_or_else(|e| panic!("{e}"));
    simulate(&c).map_err(|e| e.to_string())
}

/// Small XSBench at 25% of its footprint: one warp instruction's lanes touch more
/// 2 MiB blocks than GPU memory holds (block granularity), and the 512 sleeping
/// warps' pages together far exceed it (page granularity). Before the fix these
/// runs never ended (whole-instruction re-execution needs every page at once; the
/// polled handler re-executed every sleeping warp at each landing after an eviction):
/// with the watchdog they stop with "no progress".
const XS: [&str; 5] = [
    "workload.kind=xsbench",
    "workload.xsbench.gridpoints=300",
    "workload.xsbench.lookups=2048",
    "workload.xsbench.threads=1024",
    "uvm.oversubscription=4",
];

fn finishes(extra: &[&str]) -> Metrics {
    let mut sets = XS.to_vec();
    sets.extend(extra);
    sets.push("sim.watchdog_batches=3000");
    let m = zheng(&sets).unwrap_or_else(|e| panic!("{extra:?}: {e}"));
    assert!(m.get("uvm.pages_evicted").unwrap() > 0.0, "{extra:?}: the run must thrash GPU memory");
    m
}

#[test]
fn oversubscribed_xsbench_finishes_under_every_cost_model_granularity_and_fault_mode() {
    let mut done = vec![];
    for cm in ["polled", "fixed-latency"] {
        for g in ["block", "page"] {
            // The batch model wakes warps per page once memory is full, except with blocking
            // faults, which keep the refault epoch (`World`'s replay).
            for mode in ["replayable", "blocking"] {
                let sets = [format!("uvm.cost_model={cm}"), format!("uvm.eviction.granularity={g}"), format!("uvm.fault_mode={mode}")];
                let m = finishes(&sets.iter().map(String::as_str).collect::<Vec<_>>());
                done.push(m.get("gpu0.completed_insts").unwrap());
            }
        }
    }
    // Every run completes the same instructions; faulted ones count once, when they complete.
    assert!(done.iter().all(|&d| d == done[0] && d > 0.0), "{done:?}");
}

#[test]
fn polled_handler_does_not_re_execute_every_sleeping_warp_at_each_landing() {
    let m = finishes(&["uvm.cost_model=polled", "uvm.eviction.granularity=page"]);
    // A faulted instruction re-executes when its own pages land (or were dropped), not after
    // every eviction: re-executions stay within a small multiple of the far faults.
    let reexec = m.get("gpu0.warp_insts").unwrap() - m.get("gpu0.completed_insts").unwrap();
    assert!(
        reexec < 4.0 * m.get("uvm.faults.raw").unwrap() + 4.0 * m.get("gpu0.warps").unwrap(),
        "{reexec} vs {} faults",
        m.get("uvm.faults.raw").unwrap()
    );
}

#[test]
fn the_watchdog_names_the_far_fault_state() {
    // One batch with no instruction completed before it ends: a warp's first
    // instructions are loads of pages not yet on the GPU.
    let err = zheng(&["workload.kind=stream", "sim.watchdog_batches=1"]).unwrap_err();
    assert!(err.contains("no progress") && err.contains("sim.watchdog_batches"), "{err}");
    assert!(err.contains("pages resident") && err.contains("held at µTLBs") && err.contains("warps wait"), "{err}");
    // Off, and at its default, the same run ends.
    zheng(&["workload.kind=stream", "sim.watchdog_batches=0"]).unwrap();
    zheng(&["workload.kind=stream"]).unwrap();
    // Pages the thrashing mitigation throttles fault until their nap ends: the watchdog says so, and when, rather
    // than blaming GPU memory (until 2026-12-06 it did: a ping-pong page throttled for 100 s, memory half full).
    let throttled = [
        "workload.kind=ping-pong",
        "workload.ping_pong.pages=64",
        "uvm.cost_model=fixed-latency",
        "uvm.thrashing.threshold=1",
        "uvm.thrashing.pin_threshold=255",
        "uvm.thrashing.lapse_us=1000000",
        "uvm.thrashing.nap=100",
        "sim.watchdog_batches=2000",
    ];
    let err = zheng(&throttled).unwrap_err();
    assert!(err.contains("no progress") && err.contains("throttled by the thrashing mitigation until"), "{err}");
    assert!(!err.contains("raise uvm.gpu_memory_bytes"), "{err}");
}

/// Zheng's §5.2 continued prefetch on the polled handler, XSBench at 50% (random lookups:
/// the window after a faulting page is rarely used). With the transfer set sized by its demand
/// pages alone, every interval with a demand fault filled it with prefetches that each evicted a
/// page, queued ahead of the next demand pages on a link already busy with the demand faults'
/// evictions and copies: the far faults waited behind them and the run slowed over 10x while a
/// round landed as one (each block's eviction also waiting for the previous block's to land),
/// 4x once a round's demand pages crossed before its prefetches, 1.5x since each copy's eviction
/// starts with its round (session 21), nearly half the prefetched pages evicted unused. Counting
/// the pages still queued on the link (`uvm.prefetch.full_link_room`) keeps fewer, better used
/// prefetches; continued prefetch still costs xsbench about a third over on-demand only (its
/// prefetched pages each evict one on a link 80% busy). When demand pages wait for their
/// interval's set, continued prefetch adds up to one interval to each far fault.
#[test]
fn polled_continued_prefetch_fills_only_the_link_room_once_memory_is_full() {
    let run_copies = |when_full: &str, link_room: bool, wait: bool, per_copy: bool| {
        zheng(&[
            "workload.kind=xsbench",
            "workload.xsbench.gridpoints=1000",
            "workload.xsbench.lookups=8192",
            "workload.xsbench.threads=2048",
            "uvm.oversubscription=2",
            "uvm.eviction.granularity=page",
            "uvm.eviction.policy=lru",
            "uvm.prefetch.policy=oracle",
            &format!("uvm.prefetch.when_full={when_full}"),
            &format!("uvm.prefetch.full_link_room={link_room}"),
            &format!("uvm.prefetch.demand_waits_for_set={wait}"),
            &format!("uvm.land_per_copy={per_copy}"),
        ])
        .unwrap()
    };
    let run_with = |when_full: &str, link_room: bool, wait: bool| run_copies(when_full, link_room, wait, true);
    let run = |when_full: &str, link_room: bool| run_with(when_full, link_room, false);
    let g = |m: &Metrics, k: &str| m.get(k).unwrap_or_else(|| panic!("no metric {k}"));
    let stop = run("stop", true);
    assert_eq!(g(&stop, "time.total_ns"), g(&run("stop", false), "time.total_ns"), "on-demand only: no set once full");
    let room = run("locality", true);
    let queued = run("locality", false);
    for m in [&room, &queued] {
        assert!(g(m, "uvm.pages_evicted") > 0.0 && g(m, "uvm.prefetch.pages") > g(&stop, "uvm.prefetch.pages"));
    }
    let (t_stop, t_room, t_queued) = (g(&stop, "time.total_ns"), g(&room, "time.total_ns"), g(&queued, "time.total_ns"));
    // 1.03x here (1.32x before session 44's PTX order of XSBench's grid-point reads, 7 round trips per nuclide
    // where there were 2; 1.12x while each block's eviction waited for the previous one's).
    assert!(t_room < 1.5 * t_stop, "link room: {t_room} ns against {t_stop} on demand only");
    // Sized by the demand pages only, the sets' prefetches still queue ahead of later rounds' demand pages
    // (1.066x here since session 46's bounded greedy run-ahead; 1.17x before; 1.54x before session 44); with
    // each round landing as one, in VA order, a demand page also waited for its own round's prefetches and
    // every block for the evictions before it (5.3x on demand only and 4.4x the queued sets here; 14x before
    // session 44).
    let t_round = g(&run_copies("locality", false, false, false), "time.total_ns");
    assert!(t_queued > 1.04 * t_room, "demand pages only: {t_queued} ns against {t_room} with the link room");
    assert!(t_round > 4.0 * t_stop && t_round > 3.0 * t_queued, "rounds landing as one: {t_round} ns against {t_queued} and {t_stop}");
    let unused = |m: &Metrics| g(m, "uvm.prefetch.evicted_unused") / g(m, "uvm.prefetch.pages");
    // Without the link room more of them are evicted unused (0.408 against 0.372 since session 46's bounded greedy
    // run-ahead; 0.53 against 0.44 before; 0.45 against 0.31 before session 44).
    assert!(unused(&room) < 0.5 && unused(&queued) > unused(&room) + 0.02, "evicted unused: {} and {}", unused(&room), unused(&queued));
    assert!(g(&room, "uvm.polled.fault_ns.mean") < 2.0 * g(&stop, "uvm.polled.fault_ns.mean"));
    // Waiting for the sets: once full with "stop" no set is built and nothing waits; with continued
    // prefetch each demand page waits for the end of its 20 µs interval, at most one interval more.
    let (stop_w, room_w) = (run_with("stop", true, true), run_with("locality", true, true));
    let extra = g(&room_w, "uvm.polled.fault_ns.mean") - g(&stop_w, "uvm.polled.fault_ns.mean");
    assert!((0.0..20_000.0).contains(&extra), "waiting for the set adds {extra} ns to a far fault");
}

// --- bad input: every key with hostile values --------------------------------------------------------------

/// The overrides that make `key` matter: its workload kind, the IOMMU for `iommu.*`, four GPUs for `multi.*`.
fn context(key: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('.').collect();
    match parts[..] {
        ["workload", kind, _] => vec![format!("workload.kind={}", kind.replace('_', "-"))],
        ["iommu", ..] => vec!["translation.mode=iommu".into(), "workload.managed=true".into()],
        ["multi", ..] => vec!["multi.gpus=4".into()],
        _ => vec!["workload.managed=true".into()],
    }
}

/// Hostile values by the type of the key's default (as `--set` takes them: TOML, else a bare string).
fn hostile(default: &serde_json::Value) -> &'static [&'static str] {
    use serde_json::Value;
    match default {
        Value::Bool(_) => &["0", "\"yes\"", "{a = 1}"],
        Value::Number(_) => &[
            "0",
            "-1",
            "4294967295",
            "4294967296",
            "9223372036854775807",
            "18446744073709551616",
            "1e30",
            "nan",
            "-inf",
            "\"x\"",
            "{a = 1}",
        ],
        Value::String(_) => &["\"\"", "\"bogus\"", "\"12 parsecs\"", "\"4KB\"", "1", "9223372036854775807", "[]"],
        Value::Array(_) => &["\"x\"", "[\"bogus\"]", "[-1]", "[4294967296]", "{a = 1}"],
        _ => &[],
    }
}

/// Resolving (parsing, merging, range checks, the workload's footprint) never panics (overflow checks are on in
/// tests), never takes long, and refuses a value with an error that names a key. A panic or a hang here was a
/// footprint computed before its kind's range checks (b+tree fanout 0, miniAMR block counts near 2^32).
#[test]
fn every_key_with_hostile_values_resolves_or_names_a_key_without_panicking() {
    let root = serde_json::to_value(uvmsim::config::Config::default()).unwrap();
    let keys = uvmsim::config::Config::reference();
    assert!(keys.len() > 300, "{}", keys.len());
    let mut failures = vec![];
    for p in &keys {
        let default = p.key.split('.').try_fold(&root, |v, k| v.get(k)).unwrap_or(&serde_json::Value::Null);
        for v in hostile(default) {
            let mut sets = context(&p.key);
            sets.push(format!("{}={v}", p.key));
            // In a thread of its own, so that a hang is reported (and left behind) rather than stalling the test.
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(std::panic::catch_unwind(|| resolve(&[], &sets)));
            });
            match rx.recv_timeout(std::time::Duration::from_secs(10)) {
                Err(_) => failures.push(format!("{}={v}: did not finish in 10 s", p.key)),
                Ok(Err(_)) => failures.push(format!("{}={v}: panicked", p.key)),
                Ok(Ok(Err(e))) if e.key.is_none() => failures.push(format!("{}={v}: names no key: {e}", p.key)),
                Ok(Ok(_)) => {}
            }
            if failures.len() > 20 {
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

fn refused(sets: &[&str]) -> uvmsim::config::ConfigError {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    resolve(&[], &sets).expect_err("a bad value must be refused")
}

#[test]
fn a_workloads_footprint_is_checked_after_its_parameters_ranges() {
    // fanout 0 divided the key count (a panic); faults 0 made the footprint wrap to ~2^128 bytes; a miniAMR
    // block count near 2^32 made the footprint loop over ~2^64 blocks. Each now fails its own range check.
    for (sets, key) in [
        (["workload.kind=btree", "workload.btree.fanout=0"], "workload.btree.fanout"),
        (["workload.kind=fault-burst", "workload.fault_burst.faults=0"], "workload.fault_burst.faults"),
        (["workload.kind=miniamr", "workload.miniamr.blocks_x=4294967295"], "workload.miniamr.blocks_x"),
        (["workload.kind=im2col", "workload.im2col.height=0"], "workload.im2col.height"),
    ] {
        let e = refused(&sets);
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
    }
    // A footprint beyond 64 TiB within every range is still refused, naming the kind's section.
    let e = refused(&["workload.kind=regular", "workload.regular.threads=17179869184", "workload.regular.bytes_per_thread=\"1GiB\""]);
    assert_eq!(e.key.as_deref(), Some("workload.regular"), "{e}");
    assert!(e.message.contains("64 TiB"), "{e}");
}

#[test]
fn latencies_fault_buffers_and_notification_delays_are_bounded() {
    // A TLB or cache latency of 2^32 cycles made each DRAM channel's bandwidth timeline hold billions of
    // buckets (a run that did not end; the path's other cycle latencies likewise); a 2^32-entry fault buffer made the first batch allocate 137 GB; a
    // notification delay of 1e30 µs is beyond the picosecond clock.
    for (set, key, accepted) in [
        ("gpu.l1tlb.latency_cycles=4294967295", "gpu.l1tlb.latency_cycles", "at most 1 ms: 1000000 cycles"),
        ("gpu.l2tlb.latency_cycles=1000001", "gpu.l2tlb.latency_cycles", "at most 1 ms: 1000000 cycles"),
        ("gpu.l1d.latency_cycles=4294967295", "gpu.l1d.latency_cycles", "at most 1 ms: 1000000 cycles"),
        ("gpu.l2d.latency_cycles=4294967295", "gpu.l2d.latency_cycles", "at most 1 ms: 1000000 cycles"),
        ("gpu.l2tlb.fill_return_cycles=1000001", "gpu.l2tlb.fill_return_cycles", "at most 1 ms"),
        ("gpu.vmem.transit_cycles=1000001", "gpu.vmem.transit_cycles", "at most 1 ms"),
        ("uvm.fault_buffer_entries=4294967295", "uvm.fault_buffer_entries", "between 1 and 1048576"),
        ("uvm.fault_buffer_entries=0", "uvm.fault_buffer_entries", "between 1 and 1048576"),
        ("uvm.access_counters.notify_us=1e30", "uvm.access_counters.notify_us", "between 0 and 1000000"),
    ] {
        let e = refused(&[set]);
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
        assert!(e.message.contains(accepted), "{e}");
    }
    // The edges stay valid.
    for ok in ["gpu.l1tlb.latency_cycles=1000000", "uvm.fault_buffer_entries=1048576", "uvm.access_counters.notify_us=1e6"] {
        resolve(&[], &[ok.to_string()]).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    // The bound is a time: 1 ms is 1000 cycles at 1 MHz (10^6 cycles there took 1.6 GB of timeline).
    let e = refused(&["gpu.core_mhz=1", "gpu.l1d.latency_cycles=1001"]);
    assert!(e.message.contains("at most 1 ms: 1000 cycles at gpu.core_mhz = 1, got 1001"), "{e}");
    resolve(&[], &["gpu.core_mhz=1".into(), "gpu.l1d.latency_cycles=1000".into()]).unwrap();
}

#[test]
fn tlbs_and_caches_are_bounded_over_all_their_copies() {
    // 2^24 entries is the bound of one TLB, but there is an L1 TLB per SM: 16 SMs x 2^24 is 2^28 entries.
    let e = refused(&["gpu.l1tlb.entries=16777216", "gpu.l1tlb.ways=16"]);
    assert_eq!(e.key.as_deref(), Some("gpu.l1tlb.entries"), "{e}");
    assert!(e.message.contains("16 L1 TLBs") && e.message.contains("268435456 entries in all"), "{e}");
    // Shared by 16 SMs, one such µTLB fits.
    resolve(&[], &["gpu.l1tlb.entries=16777216".into(), "gpu.l1tlb.ways=16".into(), "gpu.sms_per_l1tlb=16".into()]).unwrap();
    // One L1 data cache of 2^24 lines per SM; one L2 TLB of 2^24 entries per GPU, times four GPUs.
    let e = refused(&["gpu.l1d.size_bytes=2GiB"]);
    assert_eq!(e.key.as_deref(), Some("gpu.l1d.size_bytes"), "{e}");
    assert!(e.message.contains("lines in all"), "{e}");
    let e = refused(&["gpu.l2tlb.entries=16777216", "multi.gpus=4"]);
    assert_eq!(e.key.as_deref(), Some("gpu.l2tlb.entries"), "{e}");
    resolve(&[], &["gpu.l2tlb.entries=16777216".into()]).unwrap();
}

/// An Accel-Sim trace (in `dir`) of `ctas` thread blocks of 64 threads whose every warp loads,
/// computes and stores 16 bytes a lane 24 bytes apart around a page boundary: lane 16 of each
/// access straddles pages `2 p` and `2 p + 1` of the block's pair `p = b / 8 % 8`, so the lanes of every
/// warp need both pages of a pair, and consecutive blocks, placed on different GPUs, share them. (The
/// kernel models' lanes stopped crossing pages in session 44, when comd's 24-byte records and
/// sad's unaligned 32-byte rows gave way to their PTX's 8- and 2-byte loads.)
fn page_pair_trace(dir: &std::path::Path, ctas: u32) -> String {
    use std::fmt::Write as _;
    let mut t = String::from(
        "-kernel name = pairs\n-kernel id = 1\n-grid dim = (CTAS,1,1)\n-block dim = (64,1,1)\n-shmem = 0\n\
         -nregs = 8\n-binary version = 70\n-cuda stream id = 0\n-shmem base_addr = 0x00007f1000000000\n\
         -local mem base_addr = 0x00007f1100000000\n-nvbit version = 1.5.5\n-accelsim tracer version = 4\n\
         -enable lineinfo = 0\n\n#traces format = [line_num] PC mask dest_num [reg_dests] opcode src_num \
         [reg_srcs] mem_width [adrrescompress?] [mem_addresses] immediate\n\n",
    )
    .replace("CTAS", &ctas.to_string());
    for b in 0..ctas {
        let base = 0x7f00_0000_0000u64 + (2 * (b / 8 % 8) as u64 + 1) * 4096 - 16 * 24 - 8;
        writeln!(t, "#BEGIN_TB\n\nthread block = {b},0,0").unwrap();
        for w in 0..2 {
            writeln!(t, "\nwarp = {w}\ninsts = 3").unwrap();
            writeln!(t, "0000 ffffffff 1 R4 LDG.E.128 1 R2 16 1 0x{base:x} 24").unwrap();
            writeln!(t, "0010 ffffffff 1 R8 FFMA 2 R4 R4 0").unwrap();
            writeln!(t, "0020 ffffffff 0 STG.E.128 2 R2 R8 16 1 0x{base:x} 24").unwrap();
        }
        t.push_str("\n#END_TB\n\n");
    }
    std::fs::write(dir.join("kernel-1.traceg"), t).unwrap();
    let list = dir.join("kernelslist.g");
    std::fs::write(&list, "kernel-1.traceg\n").unwrap();
    format!("workload.accelsim.path={:?}", list.display().to_string())
}

fn simulated(sets: &[String]) -> Result<Metrics, uvmsim::sim::SimError> {
    let c = resolve(&[], sets).unwrap_or_else(|e| panic!("{e}"));
    simulate(&c)
}

fn bad_input(r: Result<Metrics, uvmsim::sim::SimError>) -> String {
    match r {
        Err(uvmsim::sim::SimError::BadInput(m)) => m,
        Err(e) => panic!("not bad input: {e}"),
        Ok(_) => panic!("accepted"),
    }
}

#[test]
fn a_trace_without_a_record_of_the_replayed_gpu_is_bad_input() {
    // Records of GPUs the system lacks are skipped; when that is every record, the run used to end at once
    // with zero accesses, as if it were a result.
    let path = std::env::temp_dir().join(format!("uvmsim-robust-trace-{}.csv", std::process::id()));
    std::fs::write(&path, "time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,64\n20,3,0,0,R,0x2000,64\n").unwrap();
    let run = |gpu: u32, gpus: u32| {
        simulated(&[
            "workload.kind=trace".into(),
            format!("workload.trace.path=\"{}\"", path.display()),
            format!("workload.trace.gpu={gpu}"),
            format!("multi.gpus={gpus}"),
        ])
    };
    let m = bad_input(run(2, 1));
    assert!(
        m.contains("key `workload.trace.gpu`: no record of GPU 2 (workload.trace.gpu = 2)") && m.ends_with("records are of GPUs 1 to 3"),
        "{m}"
    );
    let m = bad_input(run(4, 2));
    assert!(m.contains("no record of GPUs 4 to 5"), "{m}");
    // GPU 3's one record is replayed (the other is skipped), and GPU 1's.
    for gpu in [1, 3] {
        assert_eq!(run(gpu, 1).unwrap().get("gpu0.l1tlb.hits").unwrap() + run(gpu, 1).unwrap().get("gpu0.l1tlb.misses").unwrap(), 1.0);
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn advice_for_an_allocation_the_workload_lacks_is_bad_input() {
    // STREAM allocates three managed arrays (indices 0, 1, 2).
    let stream = |extra: &[&str]| {
        let mut s: Vec<String> =
            ["workload.kind=stream", "workload.stream.elements=4096", "workload.managed=true"].iter().map(|s| s.to_string()).collect();
        s.extend(extra.iter().map(|s| s.to_string()));
        simulated(&s)
    };
    let m = bad_input(stream(&["uvm.advise.policy=read-mostly", "uvm.advise.buffers=[1, 3]"]));
    assert_eq!(m, "key `uvm.advise.buffers`: allocation 3 does not exist: the workload has 3 managed allocations (indices 0 to 2)");
    let m = bad_input(stream(&["uvm.advise.per_buffer=[\"none\", \"none\", \"none\", \"read-mostly\"]"]));
    assert!(m.starts_with("key `uvm.advise.per_buffer`: 4 hints"), "{m}");
    stream(&["uvm.advise.policy=read-mostly", "uvm.advise.buffers=[2]"]).unwrap();
    stream(&["uvm.advise.per_buffer=[\"none\", \"read-mostly\", \"none\"]"]).unwrap();
    // Device memory has no managed allocation to advise.
    let m = bad_input(simulated(&["workload.kind=stream".into(), "uvm.advise.policy=read-mostly".into(), "uvm.advise.buffers=[0]".into()]));
    assert!(m.contains("no managed allocation"), "{m}");
}

/// Multi-GPU: a page's answer wakes only the warps asleep for it at that moment. A library
/// GEMM's warp issues the next tile's loads, then computes for longer than the far faults
/// take, and only then waits: its answers had all arrived while it computed, and it slept for
/// a replay that never came (every run of it deadlocked, in both translation modes). It now
/// goes on at its wait, and every CTA completes.
#[test]
fn a_warp_whose_far_faults_are_answered_while_it_computes_goes_on() {
    for mode in ["gmmu", "iommu"] {
        let m = simulated(&[
            "workload.kind=blas-gemm".into(),
            "workload.blas_gemm.n=256".into(),
            "multi.gpus=2".into(),
            format!("translation.mode=\"{mode}\""),
        ])
        .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(m.get("gpu0.ctas").unwrap() + m.get("gpu1.ctas").unwrap(), 4.0, "{mode}");
        assert!(m.get("multi.far_faults").unwrap() > 0.0, "{mode}: the GEMM's pages must fault");
    }
}

/// Multi-GPU, on-touch: sad's reference rows are unaligned 32-byte loads, so some lanes cross
/// into the next page, and round-robin CTAs share those pages across four GPUs. A faulted lane
/// was kept whole for its re-execution, so it needed both pages mapped at once, and the pages
/// moved on before that happened: the run never ended (in both modes). Now only the part on
/// the faulted page runs again (and in GMMU mode a lane crossing into a page still held is split).
/// Since session 44 sad fetches 2-byte pixels (its PTX's order) and no lane crosses a page: the
/// run still shares pages across the GPUs, and `lanes_straddling_page_pairs_shared_by_gpus_complete`
/// keeps the crossing lanes.
#[test]
fn lanes_crossing_a_page_between_gpus_ping_ponging_pages_complete() {
    // About 40 K events now; never-ending before.
    four_gpus_share_pages(&["workload.kind=sad".into(), "workload.sad.width=96".into(), "workload.sad.height=64".into()]);
}

/// `workload` on four GPUs, CTAs round-robin, in both translation modes (at most 2 M events):
/// pages move between the GPUs and the runs end.
fn four_gpus_share_pages(workload: &[String]) {
    for mode in ["gmmu", "iommu"] {
        let mut sets = workload.to_vec();
        sets.extend([
            "multi.gpus=4".into(),
            "multi.cta_placement=\"round-robin\"".into(),
            format!("translation.mode=\"{mode}\""),
            "sim.max_events=2000000".into(),
        ]);
        let m = simulated(&sets).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(m.get("multi.migrations.p2p").unwrap() > 0.0, "{mode}: pages must move between GPUs");
    }
}

/// The two tests above with lanes that cross pages again (a hand-written Accel-Sim trace): 64
/// blocks round-robin over four GPUs, every warp's lane 16 on both pages of one of 8 page pairs,
/// loaded and then stored (on-touch migration moves the pairs between the GPUs), in both
/// translation modes; and on two GPUs of `li-4gpu-ats` (ATS, with 32-lane warps: an Accel-Sim
/// trace's) under the answer watchdog. 64-lane wavefronts are not covered here.
#[test]
fn lanes_straddling_page_pairs_shared_by_gpus_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = page_pair_trace(dir.path(), 64);
    four_gpus_share_pages(&["workload.kind=accelsim".into(), path.clone()]);
    let preset = Source::preset("li-4gpu-ats", include_str!("../../../presets/li-4gpu-ats.toml"));
    let sets = [
        "workload.kind=accelsim".to_string(),
        path,
        "gpu.warp_size=32".into(),
        "multi.gpus=2".into(),
        "multi.cta_placement=\"round-robin\"".into(),
        "multi.migration=\"on-touch\"".into(),
        "sim.watchdog_answers=20000".into(),
    ];
    let m = simulate(&resolve(&[preset], &sets).unwrap_or_else(|e| panic!("{e}"))).unwrap_or_else(|e| panic!("{e}"));
    assert!(m.get("multi.migrations.p2p").unwrap() > 0.0, "ATS: pages must move between the GPUs");
}

/// The multi-GPU progress watchdog counts far-fault answers with no instruction completed on
/// any GPU. In the run below (`li-4gpu-gmmu`) 4 answers in a row in GMMU mode, where the L2
/// TLB's MSHR holds a page's misses, and 256 in IOMMU mode reach the GPUs before the first
/// re-executed loads complete; the longest such streak in any workload of the li-* experiments,
/// up to 16 GPUs with round-robin CTAs, was under 4096 (2026-11-29): the default (10^6) stops
/// only a run that goes nowhere.
#[test]
fn the_multi_gpu_watchdog_counts_answers_without_progress_on_any_gpu() {
    let preset = Source::preset("li-4gpu-gmmu", include_str!("../../../presets/li-4gpu-gmmu.toml"));
    for mode in ["gmmu", "iommu"] {
        let run = |limit: &str| {
            let sets = [
                "workload.kind=sad".into(),
                "workload.sad.width=96".into(),
                "workload.sad.height=64".into(),
                "multi.cta_placement=\"round-robin\"".into(),
                format!("translation.mode=\"{mode}\""),
                format!("sim.watchdog_answers={limit}"),
            ];
            let c = resolve(std::slice::from_ref(&preset), &sets).unwrap_or_else(|e| panic!("{e}"));
            simulate(&c).map_err(|e| e.to_string())
        };
        let err = run("4").unwrap_err();
        assert!(err.contains("no progress") && err.contains("sim.watchdog_answers"), "{mode}: {err}");
        // Every GPU's waiting warps are named.
        assert!((0..4).all(|g| err.contains(&format!("GPU {g}:"))) && err.contains("warps wait"), "{mode}: {err}");
        // Off, and at its default, the same run ends.
        for limit in ["0", "1000000"] {
            run(limit).unwrap_or_else(|e| panic!("{mode} {limit}: {e}"));
        }
    }
}

/// IOMMU (ATS) mode, two GPUs of `mi300a-apu` (64-lane wavefronts) on CoMD, whose 24-byte
/// position records cross page boundaries: the lanes of a wavefront need both pages of a pair,
/// and both GPUs' wavefronts need the same pairs. A page's answer woke a warp only once every
/// page it had faulted on was mapped here at the same time, and under on-touch migration the
/// other GPU took one page of the pair back each time the other arrived: a livelock, stopped
/// by the answer watchdog after 20,000 answers with no instruction completed (found by the
/// stress run at 4x its inputs). Now each answer completes the lanes on its page, as in GMMU
/// mode (`Gpu::replay_page`), and the run ends. Since session 44 comd loads 8-byte coordinates
/// (CoMD-CUDA's layout and PTX order) and no lane crosses a page: the run still shares pages
/// between the GPUs, and `lanes_straddling_page_pairs_shared_by_gpus_complete` keeps the crossing lanes.
#[test]
fn ats_lanes_on_page_pairs_two_gpus_share_complete() {
    let preset = Source::preset("mi300a-apu", include_str!("../../../presets/mi300a-apu.toml"));
    let sets: Vec<String> = [
        "workload.kind=comd",
        "workload.comd.cells_x=16",
        "workload.comd.cells_y=16",
        "workload.comd.cells_z=16",
        "multi.gpus=2",
        "sim.watchdog_answers=20000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let c = resolve(&[preset], &sets).unwrap_or_else(|e| panic!("{e}"));
    let m = simulate(&c).unwrap_or_else(|e| panic!("{e}"));
    assert!(m.get("multi.migrations.p2p").unwrap() > 0.0, "pages must move between the GPUs");
    assert!(m.get("gpu0.ctas").unwrap() > 0.0 && m.get("gpu1.ctas").unwrap() > 0.0, "both GPUs run CTAs");
}

/// The 64-lane form of the two tests above (since session 44 no generator's 64-lane wavefront
/// needs two pages shared by GPUs): `strided` with 24 bytes between lanes on two GPUs of
/// `mi300a-apu`, CTAs round-robin, on-touch migration. A wavefront covers 1,536 bytes, so two
/// of every eight cross a page boundary (wavefront 2 has lanes 0-42 on one page and 43-63 on the
/// next: the upper 32 lanes of the mask matter), and a CTA covers 6 KiB, so neighbouring CTAs,
/// on different GPUs, share a page. Both translation modes end with every instruction done:
/// 128 wavefronts per GPU x 4 repeats x (load, compute, store) = 1,536.
#[test]
fn wavefronts_of_64_lanes_across_page_pairs_shared_by_gpus_complete() {
    let preset = Source::preset("mi300a-apu", include_str!("../../../presets/mi300a-apu.toml"));
    for mode in ["gmmu", "iommu"] {
        let sets = [
            "workload.kind=strided".to_string(),
            "workload.strided.threads=16384".into(),
            "workload.strided.element_bytes=8".into(),
            "workload.strided.stride_elements=3".into(),
            "workload.strided.write=true".into(),
            "multi.gpus=2".into(),
            "multi.cta_placement=\"round-robin\"".into(),
            "multi.migration=\"on-touch\"".into(),
            format!("translation.mode=\"{mode}\""),
            "sim.watchdog_answers=20000".into(),
        ];
        let c = resolve(std::slice::from_ref(&preset), &sets).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.gpu.warp_size, 64, "mi300a-apu runs 64-lane wavefronts");
        let m = simulate(&c).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(m.get("multi.migrations.p2p").unwrap() > 0.0, "{mode}: pages must move between the GPUs");
        for g in 0..2 {
            assert_eq!(m.get(&format!("gpu{g}.completed_insts")).unwrap(), 1536.0, "{mode}: GPU {g}");
        }
    }
}

/// The back-pressured L1 TLB -> L1V path (`gpu.vmem.backpressure`, on in `mgpusim-r9nano`) was
/// built for trace replay, whose lookups come in time order per CU. A generator's warps do not
/// quite: `Gpu::run_warp` issues a warp's next instructions before other warps' slightly earlier
/// ones, and a debug assertion in the path's occupancy maps stopped such runs (stress seed 4503,
/// 12 of 300 runs). PageRank's divergent gathers on `mgpusim-r9nano`, in this test build with
/// its assertions: the path holds lookups and answers, and every instruction completes, as
/// without it.
#[test]
fn generated_warps_run_on_the_back_pressured_l1v_path() {
    let preset = Source::preset("mgpusim-r9nano", include_str!("../../../presets/mgpusim-r9nano.toml"));
    let run = |bp: bool| {
        let sets = [
            "workload.kind=pagerank".to_string(),
            "workload.pagerank.nodes=4096".into(),
            "workload.pagerank.iterations=2".into(),
            format!("gpu.vmem.backpressure={bp}"),
        ];
        simulate(&resolve(std::slice::from_ref(&preset), &sets).unwrap_or_else(|e| panic!("{e}"))).unwrap_or_else(|e| panic!("{e}"))
    };
    let (on, off) = (run(true), run(false));
    for k in ["gpu0.vmem.held_lookups", "gpu0.vmem.full_waits", "gpu0.vmem.intake_waits"] {
        assert!(on.get(k).unwrap() > 0.0, "{k}");
    }
    assert_eq!(on.get("gpu0.completed_insts"), off.get("gpu0.completed_insts"));
    assert_eq!(off.get("gpu0.vmem.held_lookups"), None, "off: no path");
}

/// Polled model (`gtx480-zheng`), per-block prefetchers: the handler's rounds overlap, and a page
/// an earlier round was still carrying over the link counted as free in the next round's VA block
/// (neither resident nor demanded), so density, sequential-local and random-4k prefetched it again:
/// it crossed the link twice (a debug assertion in `Uvm::apply` caught it in a debug-build stress
/// run; release builds moved the extra bytes silently). With no eviction every page now crosses once.
#[test]
fn polled_rounds_do_not_prefetch_a_page_already_crossing_the_link() {
    for policy in ["density", "sequential-local", "random-4k"] {
        let pol = format!("uvm.prefetch.policy=\"{policy}\"");
        let m = zheng(&["workload.kind=stream", "workload.stream.elements=262144", &pol]).unwrap_or_else(|e| panic!("{policy}: {e}"));
        let pages = m.get("uvm.resident_pages").unwrap();
        assert!(m.get("uvm.prefetch.pages").unwrap() > 0.0, "{policy}: the prefetcher must act");
        assert_eq!(m.get("uvm.bytes_h2d").unwrap(), pages * 4096.0, "{policy}: every page crosses the link once");
    }
}

/// IOMMU mode (kaveri-apu): first touches go through the page-request path, which maps pages in
/// place, and `uvm.gpu_memory_bytes` bounds only the driver's migrations. The end-of-run check of
/// debug builds counted those in-place pages against the driver's capacity and failed a run that
/// was correct ("3222 pages resident, beyond the capacity of 2 chunks"; found by the stress run). A user's
/// `uvm.gpu_memory_bytes` is refused on the shared-memory APU (nothing migrates there), a preset's is taken.
#[test]
fn pages_mapped_in_place_by_the_page_request_path_hold_no_driver_memory() {
    let text = format!("{}\n[uvm]\ngpu_memory_bytes = \"4MiB\"\n", include_str!("../../../presets/kaveri-apu.toml"));
    let preset = Source::preset("kaveri-apu", text);
    let sets: Vec<String> = [
        "workload.kind=gather",
        "workload.gather.threads=1024",
        "workload.gather.lookups=2048",
        "workload.gather.table_entries=1048576",
        "workload.managed=true",
    ]
    .map(String::from)
    .to_vec();
    let c = resolve(&[preset], &sets).unwrap_or_else(|e| panic!("{e}"));
    let m = simulate(&c).unwrap_or_else(|e| panic!("{e}"));
    let mapped = m.get("apu.pages_mapped").unwrap();
    assert!(mapped > 1024.0, "more pages mapped in place ({mapped}) than 4 MiB holds");
    assert_eq!(m.get("uvm.resident_pages"), Some(mapped));
}
