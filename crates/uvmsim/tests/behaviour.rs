//! End-to-end behaviour of the simulator on small, hand-checkable systems.

use uvmsim::config::{resolve, Config, Source};
use uvmsim::stats::Metrics;
use uvmsim::world::simulate;

fn cfg(sets: &[&str]) -> Config {
    let overrides: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    resolve(&[] as &[Source], &overrides).unwrap_or_else(|e| panic!("{e}"))
}

fn run(sets: &[&str]) -> Metrics {
    simulate(&cfg(sets)).unwrap_or_else(|e| panic!("{e}"))
}

fn m(x: &Metrics, k: &str) -> f64 {
    x.get(k).unwrap_or_else(|| panic!("no metric {k}"))
}

/// Two SMs share one L1 TLB; each runs one warp that touches the same page at
/// the same time: the second lookup merges into the first one's miss.
#[test]
fn concurrent_misses_to_one_page_merge_in_the_mshr() {
    let x = run(&[
        "gpu.sms=2",
        "gpu.sms_per_l1tlb=2",
        "workload.kind=regular",
        "workload.threads_per_cta=32",
        "workload.regular.threads=64",
        "workload.regular.bytes_per_thread=4",
    ]);
    // Loads: one miss, one MSHR hit. Stores (after the fill): two hits.
    assert_eq!(m(&x, "gpu0.l1tlb.misses"), 1.0);
    assert_eq!(m(&x, "gpu0.l1tlb.mshr_hits"), 1.0);
    assert_eq!(m(&x, "gpu0.l1tlb.hits"), 2.0);
    assert_eq!(m(&x, "gpu0.l2tlb.misses"), 1.0);
    assert_eq!(m(&x, "gpu0.walker.walks"), 1.0);
}

/// One walk per distinct page, whatever the page size; fewer levels for larger pages.
#[test]
fn walks_follow_the_page_size() {
    for (page, pages, reads_per_walk) in [("4KiB", 64.0, 1.0), ("2MiB", 1.0, 3.0)] {
        let x = run(&[
            "workload.kind=stride",
            "workload.stride.accesses=64",
            "workload.stride.stride_bytes=4096",
            &format!("translation.page_size=\"{page}\""),
            "gmmu.walker.pwc_entries=0",
        ]);
        assert_eq!(m(&x, "gpu0.walker.walks"), pages, "{page}");
        // Without page-walk caches: 4 reads per 4 KiB walk, 3 per 2 MiB walk.
        let expect = if page == "4KiB" { 4.0 } else { reads_per_walk };
        assert_eq!(m(&x, "gpu0.walker.pte_reads_per_walk"), expect, "{page}");
    }
}

/// ATS returns 8 translations per request: 64 consecutive pages need 8 requests.
#[test]
fn ats_prefetch_fills_the_gpu_tlb() {
    let base = ["translation.mode=iommu", "workload.kind=stride", "workload.stride.accesses=64", "workload.stride.stride_bytes=4096"];
    let with = run(&[&base[..], &["iommu.ats_prefetch_pages=8"]].concat());
    let without = run(&[&base[..], &["iommu.ats_prefetch_pages=1"]].concat());
    assert_eq!(m(&without, "iommu.ats_requests"), 64.0);
    assert_eq!(m(&with, "iommu.ats_requests"), 8.0);
    assert_eq!(m(&with, "iommu.ats_prefetched"), 56.0);
    assert!(m(&with, "time.kernel_ns") < m(&without, "time.kernel_ns"));
}

/// Warps blocked on memory yield: 8 warps of dependent misses on one SM take
/// far less than 8 times one warp's time.
#[test]
fn warps_waiting_on_memory_yield_to_others() {
    let one = run(&["gpu.sms=1", "workload.kind=stride", "workload.stride.work_items=32", "workload.stride.accesses=200"]);
    let eight = run(&["gpu.sms=1", "workload.kind=stride", "workload.stride.work_items=256", "workload.stride.accesses=200"]);
    let (t1, t8) = (m(&one, "time.kernel_ns"), m(&eight, "time.kernel_ns"));
    assert!(t8 < 2.0 * t1, "8 warps {t8} ns vs 1 warp {t1} ns");
    assert_eq!(m(&eight, "gpu0.warps"), 8.0);
}

/// Same config and seed, same metrics (wall-clock metrics aside); another seed changes a random workload.
#[test]
fn runs_are_deterministic() {
    let sets = ["workload.kind=random", "workload.random.threads=20000", "gpu.sms=4"];
    let a = run(&sets);
    let b = run(&sets);
    let strip = |x: &Metrics| {
        x.0.iter()
            .filter(|(k, _)| !uvmsim::stats::WALL_CLOCK_METRICS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.as_f64()))
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&a), strip(&b));
    // The list names what a run reports; the whole call contains its loop.
    for k in uvmsim::stats::WALL_CLOCK_METRICS {
        assert!(a.get(k).is_some(), "no metric {k}");
    }
    assert!(m(&a, "sim.total_wall_s") >= m(&a, "sim.wall_s"));
    let c = run(&[&sets[..], &["sim.seed=2"]].concat());
    assert_ne!(m(&a, "time.kernel_ns"), m(&c, "time.kernel_ns"));
}

/// The explicit-copy baseline pays the link before the kernel.
#[test]
fn memcpy_inputs_costs_link_time() {
    let x = run(&[
        "workload.kind=stream",
        "workload.stream.elements=262144",
        "workload.memcpy_inputs=true",
        "link.bandwidth_gbps=10",
        "link.latency_ns=1000",
    ]);
    // Two 2 MiB input arrays at 10 GB/s plus 1 µs.
    let expect = 1000.0 + 2.0 * 262144.0 * 8.0 / 10.0;
    assert!((m(&x, "time.memcpy_ns") - expect).abs() < 1.0, "{}", m(&x, "time.memcpy_ns"));
    assert!(m(&x, "time.total_ns") >= m(&x, "time.memcpy_ns") + m(&x, "time.kernel_ns") - 1.0);
}

/// The explicit-copy program copies its result back after the kernel: stream's
/// third array (c) comes back over the link, after the two inputs went out.
#[test]
fn memcpy_outputs_copies_the_results_back() {
    let base = ["workload.kind=stream", "workload.stream.elements=262144", "link.bandwidth_gbps=10", "link.latency_ns=1000"];
    let inputs = run(&[&base[..], &["workload.memcpy_inputs=true"]].concat());
    let both = run(&[&base[..], &["workload.memcpy_inputs=true", "workload.memcpy_outputs=true"]].concat());
    // One 2 MiB result at 10 GB/s plus 1 µs, after the kernel.
    let back = 1000.0 + 262144.0 * 8.0 / 10.0;
    assert!((m(&both, "time.memcpy_ns") - m(&inputs, "time.memcpy_ns") - back).abs() < 1.0);
    assert_eq!(m(&both, "time.kernel_ns"), m(&inputs, "time.kernel_ns"));
    assert!((m(&both, "time.total_ns") - m(&inputs, "time.total_ns") - back).abs() < 1.0);
    assert_eq!(m(&both, "link.d2h.bytes"), 262144.0 * 8.0);
    // Each direction's bytes and time on its own: two 2 MiB inputs out, one 2 MiB result back.
    assert_eq!(m(&both, "host.memcpy_h2d_bytes"), 2.0 * 262144.0 * 8.0);
    assert_eq!(m(&both, "host.memcpy_d2h_bytes"), 262144.0 * 8.0);
    assert_eq!(m(&both, "host.memcpy_bytes"), 3.0 * 262144.0 * 8.0);
    assert_eq!(m(&both, "time.memcpy_h2d_ns"), m(&inputs, "time.memcpy_ns"));
    assert!((m(&both, "time.memcpy_d2h_ns") - back).abs() < 1.0, "{}", m(&both, "time.memcpy_d2h_ns"));
}

/// Greedy (GTO) scheduling with run-ahead through short stalls and strict
/// time-order scheduling agree on a memory-bound kernel's time.
#[test]
fn gto_and_time_order_agree_on_a_streaming_kernel() {
    let base = ["workload.kind=stream", "workload.stream.elements=1048576", "translation.page_size=\"2MiB\""];
    let gto = run(&base);
    let strict = run(&[&base[..], &["gpu.scheduler=time-order"]].concat());
    let (a, b) = (m(&gto, "time.kernel_ns"), m(&strict, "time.kernel_ns"));
    assert!((a - b).abs() / b < 0.02, "gto {a} ns vs time-order {b} ns");
    assert!(m(&gto, "sim.events") < m(&strict, "sim.events"));
}

/// A warp whose loads all hit the L1 stalls less than the greedy run-ahead bound after
/// each, so GTO keeps issuing it inline; other warps must still get the issue slots
/// they were ready for. (Before the run-ahead was bounded by the next due event, one
/// warp ran its whole stream ahead, the issue port's window followed it, and every
/// other warp issued after it: 194 µs here against 25 µs in time order.)
#[test]
fn gto_run_ahead_through_cache_hits_does_not_delay_other_warps() {
    let base = ["gpu.sms=1", "workload.kind=strided", "workload.strided.threads=8192", "workload.strided.repeats=32"];
    let gto = run(&base);
    let strict = run(&[&base[..], &["gpu.scheduler=time-order"]].concat());
    let (a, b) = (m(&gto, "time.kernel_ns"), m(&strict, "time.kernel_ns"));
    assert!((a - b).abs() / b < 0.02, "gto {a} ns vs time-order {b} ns");
    // Nearly every load hits the L1 (one miss per line, 31 repeats).
    assert!(m(&gto, "gpu0.l1d.hit_rate") > 0.9);
}

/// A hand-written trace: CU 0 touches page 1 twice (the second access 5 ns
/// later merges into the pending miss), CU 1 touches it later (its own L1 TLB
/// misses, the shared L2 TLB hits), and CU 0 touches page 2; one access of
/// GPU 2 is not replayed.
#[test]
fn trace_replay_issues_each_access_at_its_time_on_its_cu() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.csv");
    std::fs::write(
        &path,
        "time_ns,gpu,cu,wavefront,kind,vaddr,size\n\
         100,1,0,0,R,0x1000,64\n\
         105,1,0,0,R,0x1040,64\n\
         105,2,0,9,R,0x9000,64\n\
         5000,1,1,1,W,0x1080,64\n\
         6000,1,0,0,R,0x2000,64\n",
    )
    .unwrap();
    let x = run(&[
        "workload.kind=trace",
        &format!("workload.trace.path=\"{}\"", path.display()),
        "gpu.sms=2",
        "translation.mode=iommu",
        "iommu.ats_prefetch_pages=1",
    ]);
    assert_eq!(m(&x, "gpu0.warp_mem_insts"), 4.0);
    assert_eq!((m(&x, "gpu0.l1tlb.hits"), m(&x, "gpu0.l1tlb.mshr_hits"), m(&x, "gpu0.l1tlb.misses")), (0.0, 1.0, 3.0));
    assert_eq!((m(&x, "gpu0.l2tlb.hits"), m(&x, "gpu0.l2tlb.misses")), (1.0, 2.0));
    assert_eq!(m(&x, "iommu.walker.walks"), 2.0);
    // The replay spans from the first access to the last access's completion.
    assert!(m(&x, "time.kernel_ns") > 5900.0, "{}", m(&x, "time.kernel_ns"));

    // A record naming a CU the GPU does not have is bad input, with file and line.
    let err = simulate(&cfg(&["workload.kind=trace", &format!("workload.trace.path=\"{}\"", path.display()), "gpu.sms=1"])).unwrap_err();
    assert!(err.to_string().contains("t.csv:5: cu 1 does not exist"), "{err}");
}

/// A replay ends when its slowest access does, not its last: CU 1's miss on page 2 at 5001 ns walks while CU 0's
/// hits on page 1 after it end at once, so they leave the span as it was without them.
#[test]
fn trace_replay_ends_with_the_access_that_completes_last() {
    let dir = tempfile::tempdir().unwrap();
    let head = "time_ns,gpu,cu,wavefront,kind,vaddr,size\n100,1,0,0,R,0x1000,64\n5001,1,1,1,R,0x2000,64\n";
    let span = |tail: &str| {
        let path = dir.path().join(format!("t{}.csv", tail.len()));
        std::fs::write(&path, format!("{head}{tail}")).unwrap();
        let x = run(&["workload.kind=trace", &format!("workload.trace.path=\"{}\"", path.display()), "gpu.sms=2"]);
        (m(&x, "gpu0.warp_mem_insts"), m(&x, "time.kernel_ns"))
    };
    let (alone, with_hits) = (span(""), span("5002,1,0,0,R,0x1040,64\n5003,1,0,0,R,0x1080,64\n"));
    assert_eq!((alone.0, with_hits.0), (2.0, 4.0));
    assert!(alone.1 > 4901.0, "{alone:?}");
    assert_eq!(with_hits.1, alone.1);
}

/// The APU's page requests map their aligned block of `iommu.ppr.pages_log2` pages, clamped to the faulting
/// page's allocation: three 5-page arrays (1280 elements of 16 bytes) in blocks of 8 map their 15 pages, not 3 x 8.
#[test]
fn apu_page_request_blocks_stop_at_their_allocation() {
    let x = run(&[
        "translation.mode=iommu",
        "iommu.ppr.pages_log2=3",
        "workload.kind=stream",
        "workload.stream.elements=1280",
        "workload.stream.element_bytes=16",
        "workload.managed=true",
    ]);
    assert_eq!(m(&x, "apu.pages_mapped"), 15.0);
}

/// Managed memory: every page a kernel touches is faulted in once, in
/// batches; every raised fault is fetched or flushed; both replay policies
/// finish; demand paging costs time against device-resident memory.
#[test]
fn managed_memory_faults_every_page_in_once() {
    let base = ["gpu.sms=8", "gpu.sms_per_l1tlb=2", "workload.kind=regular", "workload.regular.threads=4096", "workload.managed=true"];
    for policy in ["batch-flush", "batch", "once"] {
        let x = run(&[&base[..], &[&format!("uvm.replay_policy=\"{policy}\"")]].concat());
        assert_eq!(m(&x, "uvm.faults.unique"), 4096.0, "{policy}");
        assert_eq!(m(&x, "uvm.resident_pages"), 4096.0, "{policy}");
        assert_eq!(m(&x, "uvm.bytes_h2d"), 4096.0 * 4096.0, "{policy}");
        assert_eq!(m(&x, "uvm.faults.raw"), m(&x, "uvm.faults.fetched") + m(&x, "uvm.faults.flushed"), "{policy}");
        assert!(m(&x, "uvm.batches") >= 4096.0 / 256.0, "{policy}");
        // At most utlb_fault_limit outstanding per µTLB: 4 µTLBs x 56 per batch.
        assert!(m(&x, "uvm.faults_per_batch") <= 4.0 * 56.0, "{policy}");
        if policy == "batch" {
            assert_eq!(m(&x, "uvm.faults.flushed"), 0.0);
        }
    }
    let device = run(&base[..4]);
    let managed = run(&base);
    assert_eq!(m(&device, "uvm.faults.raw"), 0.0);
    assert!(m(&managed, "time.kernel_ns") > 10.0 * m(&device, "time.kernel_ns"));
    // Deterministic with faults too.
    assert_eq!(m(&managed, "time.kernel_ns"), m(&run(&base), "time.kernel_ns"));
}

/// Seed uvm-driver Listing 3.1 on one warp: independent loads fault without
/// blocking until the µTLB limit (56), the dependent store faults only once
/// both loads are served, and prefetch instructions escape the limit.
#[test]
fn vecadd_probe_faults_form_batches_as_measured() {
    use uvmsim::world::simulate_full;
    let base =
        ["gpu.sms_per_l1tlb=2", "workload.kind=vecadd-probe", "workload.managed=true", "workload.threads_per_cta=32", "uvm.records=true"];
    let out = simulate_full(&cfg(&base)).unwrap();
    let b = out.batches.unwrap();
    assert_eq!((b[0].fetched, b[0].reads, b[0].writes), (56, 56, 0));
    let first_write = b.iter().position(|x| x.writes > 0).unwrap();
    assert!(first_write >= 2);
    assert_eq!(b[..first_write].iter().map(|x| x.reads).sum::<u64>(), 64);
    assert_eq!(b.iter().map(|x| x.unique).sum::<u64>(), 3 * 3 * 32);
    let pre = simulate_full(&cfg(&[&base[..], &["workload.vecadd_probe.prefetch=true"]].concat())).unwrap();
    assert_eq!(pre.batches.unwrap()[0].prefetches, 256);
}

/// Blocking faults (seed paged-memory §2.1: the GMMU stops the TLB "from taking new
/// translation requests" until the fault is serviced): the µTLB stops when a walk finds the
/// fault, so what it took before then goes on (and faults too) and what comes later waits for
/// the replay. One SM, 32 warps of 32 lanes on a page each, issued a nanosecond apart, with
/// MSHRs, µTLB fault limit and batch size for all 1,024 faults. With near-instant walks the
/// first fault is found after a few warps have issued: the others wait, the driver needs a
/// second batch, and the kernel is slower than with replayable faults. With 1 µs per level the
/// last warp has issued long before: blocking changes nothing.
#[test]
fn blocking_faults_stop_the_utlb_once_a_walk_finds_the_fault() {
    let base = [
        "gpu.sms=1",
        "workload.kind=regular",
        "workload.regular.threads=1024",
        "workload.threads_per_cta=1024",
        "workload.managed=true",
        "gpu.l1tlb.mshrs=1024",
        "uvm.utlb_fault_limit=1024",
        "uvm.batch_size=1024",
    ];
    let fast = ["gmmu.walker.level_latency_ns=0", "gmmu.walker.pte_from_dram=false"];
    let slow = ["gmmu.walker.level_latency_ns=1000"];
    let mode = |walks: &[&str], mode: &str| run(&[&base[..], walks, &[mode]].concat());
    let (blocking, replayable) = ("uvm.fault_mode=\"blocking\"", "uvm.fault_mode=\"replayable\"");
    let (fast_b, fast_r) = (mode(&fast, blocking), mode(&fast, replayable));
    let (slow_b, slow_r) = (mode(&slow, blocking), mode(&slow, replayable));
    for x in [&fast_b, &fast_r, &slow_b, &slow_r] {
        assert_eq!(m(x, "uvm.faults.unique"), 1024.0);
        assert_eq!(m(x, "uvm.resident_pages"), 1024.0);
    }
    assert_eq!(m(&fast_r, "uvm.batches"), 1.0);
    assert!(m(&fast_b, "gpu0.blocked_insts") > 0.0);
    assert!(m(&fast_b, "uvm.batches") > 1.0);
    assert!(m(&fast_b, "time.kernel_ns") > m(&fast_r, "time.kernel_ns"));
    assert_eq!(m(&slow_b, "gpu0.blocked_insts"), 0.0);
    assert_eq!(m(&slow_r, "gpu0.blocked_insts"), 0.0);
    assert_eq!(m(&slow_b, "uvm.batches"), m(&slow_r, "uvm.batches"));
    assert_eq!(m(&slow_b, "time.kernel_ns"), m(&slow_r, "time.kernel_ns"));
}

/// Blocking faults with one far fault tracked per µTLB (`uvm.utlb_fault_limit = 1`, how zheng-blocking runs
/// Zheng's blocking GMMU, which lacks the far-fault MSHRs of §3): 32 warps of one SM each miss on a page of
/// their own, all before the first slow walk ends, so every walk finds a fault. With room for all 32 they are
/// serviced together, in about one 20 µs service; with room for one, the rest are turned back, walk again once
/// the block lifts and are serviced one after another: never more than one far fault in flight.
#[test]
fn a_blocking_gmmu_that_tracks_one_far_fault_services_them_one_at_a_time() {
    let base = [
        "gpu.sms=1",
        "workload.kind=regular",
        "workload.regular.threads=1024",
        "workload.regular.bytes_per_thread=128",
        "workload.regular.write=false",
        "workload.threads_per_cta=1024",
        "workload.managed=true",
        "gpu.l1tlb.mshrs=1024",
        "gmmu.walker.level_latency_ns=1000",
        "uvm.cost_model=\"polled\"",
        "uvm.fault_mode=\"blocking\"",
    ];
    let one = run(&[&base[..], &["uvm.utlb_fault_limit=1"]].concat());
    let all = run(&[&base[..], &["uvm.utlb_fault_limit=32"]].concat());
    let service = 20_000.0;
    for x in [&one, &all] {
        assert_eq!(m(x, "uvm.faults.unique"), 32.0);
        assert_eq!(m(x, "uvm.resident_pages"), 32.0);
    }
    assert_eq!(m(&all, "uvm.faults.throttled"), 0.0);
    let k_all = m(&all, "time.kernel_ns");
    assert!(k_all > service && k_all < 2.0 * service, "{k_all}");
    assert!(m(&one, "uvm.faults.throttled") >= 31.0, "{}", m(&one, "uvm.faults.throttled"));
    let k_one = m(&one, "time.kernel_ns");
    assert!(k_one > 32.0 * service, "{k_one}");
    // Far faults in flight on average (Little's law) stay at or below one.
    assert!(m(&one, "uvm.polled.fault_time_ns") <= k_one, "{} vs {k_one}", m(&one, "uvm.polled.fault_time_ns"));
}

/// `uvm.stall_warp_on_fault` (seed paged-memory §3.2: "the warp that has missed in
/// the TLB will be stalled"): one warp of the STREAM triad, one iteration on
/// three fresh pages (load b, load c, wait, store a), Zheng's polled handler.
/// Going on to its dependency, the warp has b's and c's faults in flight together,
/// then a's: two services in a row. Stalled at each faulting instruction, it
/// raises b, then c, then a: three in a row, never two in flight at once.
#[test]
fn a_stalled_warp_has_one_instruction_s_far_faults_in_flight() {
    let base = [
        "workload.kind=stream",
        "workload.stream.elements=32",
        "workload.stream.element_bytes=4",
        "workload.stream.threads=32",
        "workload.threads_per_cta=32",
        "gpu.sms=1",
        "workload.managed=true",
        "uvm.cost_model=polled",
    ];
    let go_on = run(&base);
    let stall = run(&[&base[..], &["uvm.stall_warp_on_fault=true"]].concat());
    for x in [&go_on, &stall] {
        assert_eq!(m(x, "uvm.polled.faults"), 3.0);
        assert_eq!(m(x, "uvm.polled.nacked_ns.mean"), 0.0);
    }
    // Each service: 20 µs handler latency, then the page over the link (~1.3 µs).
    let service = m(&stall, "uvm.polled.fault_ns.mean");
    assert!((20_000.0..23_000.0).contains(&service), "{service}");
    // Going on, c's page waits behind b's on the one host-to-device copy engine (at most one 4 KiB copy,
    // 341 ns at 12 GB/s, over three faults); stalled, every copy finds the engine free.
    let queued = m(&go_on, "uvm.polled.fault_ns.mean") - service;
    assert!((1.0..=4096.0 / 12.0 / 3.0).contains(&queued), "{queued}");
    // Plus a few walks and issue cycles (well under 1 µs each round).
    let (k_go, k_stall) = (m(&go_on, "time.kernel_ns"), m(&stall, "time.kernel_ns"));
    assert!(k_go > 2.0 * service && k_go < 2.0 * service + 3_000.0, "{k_go} vs 2 x {service}");
    assert!(k_stall > 3.0 * service && k_stall < 3.0 * service + 3_000.0, "{k_stall} vs 3 x {service}");
}

/// A managed run can report its slowdown against the legacy baselines of the
/// same workload: copy-then-execute, and ideal copy/compute overlap.
#[test]
fn managed_runs_report_legacy_baselines() {
    let x = run(&["workload.kind=stream", "workload.stream.elements=262144", "workload.managed=true", "uvm.baselines=true", "gpu.sms=4"]);
    let (cte, ideal) = (m(&x, "baseline.copy_then_execute_ns"), m(&x, "baseline.ideal_overlap_ns"));
    assert!(ideal > 0.0 && cte > ideal, "copy-then-execute {cte} vs ideal {ideal}");
    assert!((m(&x, "baseline.slowdown_vs_copy") - m(&x, "time.total_ns") / cte).abs() < 1e-9);
    assert!(m(&x, "baseline.slowdown_vs_ideal") >= m(&x, "baseline.slowdown_vs_copy"));
    // They are the device-memory program's: its copies (the inputs out, the result back) and its kernel, one
    // after the other, or the longer of the two.
    let d = run(&[
        "workload.kind=stream",
        "workload.stream.elements=262144",
        "workload.memcpy_inputs=true",
        "workload.memcpy_outputs=true",
        "gpu.sms=4",
    ]);
    let (copy, kernel) = (m(&d, "time.memcpy_ns"), m(&d, "time.kernel_ns"));
    assert!(m(&d, "time.memcpy_d2h_ns") > 0.0);
    assert_eq!((cte, ideal), (copy + kernel, copy.max(kernel)));
    assert!((m(&x, "baseline.slowdown_vs_ideal") - m(&x, "time.total_ns") / ideal).abs() < 1e-9);
    // Without the flag, no baseline metrics.
    let y = run(&["workload.kind=stream", "workload.stream.elements=262144", "workload.managed=true", "gpu.sms=4"]);
    assert!(y.get("baseline.copy_then_execute_ns").is_none());
}

/// The baselines' device-memory run is simulated with `[uvm]` at its defaults (and once per process for one
/// system and workload): a program without managed memory must not depend on that section. Checked here on
/// the device-memory form of managed runs whose `[uvm]` is far from the defaults: every metric of the GPU, the
/// link and the clock is the same with the section as given and at its defaults.
#[test]
fn a_device_memory_run_does_not_read_the_uvm_section() {
    let uvm = [
        "workload.managed=true",
        "uvm.fault_mode=\"blocking\"",
        "uvm.stall_warp_on_fault=true",
        "uvm.cost_model=\"polled\"",
        "uvm.prefetch.policy=\"locality\"",
        "uvm.oversubscription=2",
        "uvm.eviction.policy=\"lru\"",
        "uvm.eviction.granularity=\"page\"",
        "uvm.eviction.lru_recency=\"access\"",
        "uvm.eviction.write_back=\"dirty\"",
        "uvm.utlb_fault_limit=1",
        "uvm.thrashing.enable=false",
    ];
    let workloads: [&[&str]; 3] = [
        &["workload.kind=stream", "workload.stream.elements=65536"],
        &["workload.kind=tiled-gemm", "workload.tiled_gemm.n=128"],
        &["workload.kind=stencil3d", "workload.stencil3d.nx=64", "workload.stencil3d.ny=64", "workload.stencil3d.nz=8"],
    ];
    for w in workloads {
        let mut given = cfg(&[&["gpu.sms=4"], w, &uvm[..]].concat());
        (given.workload.managed, given.workload.memcpy_inputs, given.workload.memcpy_outputs) = (false, true, true);
        let mut defaults = given.clone();
        defaults.uvm = Default::default();
        assert_ne!(given.uvm, defaults.uvm);
        let (a, b) = (simulate(&given).unwrap(), simulate(&defaults).unwrap());
        // Not `uvm.*` (they report the section's settings, e.g. GPU memory) nor the host's wall clock.
        let timing = |x: &Metrics| -> Vec<(String, f64)> {
            let keep = |k: &str| !k.starts_with("uvm.") && !uvmsim::stats::WALL_CLOCK_METRICS.contains(&k);
            x.0.iter().filter(|(k, _)| keep(k)).map(|(k, v)| (k.clone(), v.as_f64())).collect()
        };
        assert!(m(&a, "time.memcpy_ns") > 0.0 && m(&a, "time.kernel_ns") > 0.0, "{w:?}");
        assert_eq!(timing(&a), timing(&b), "{w:?}");
    }
}

/// Prefetching on a managed streaming kernel: every policy brings pages ahead
/// of their faults, so fewer faults and batches; the migrated data is the same
/// footprint, and most prefetched pages are used.
#[test]
fn prefetch_reduces_faults() {
    let base = ["gpu.sms=8", "gpu.sms_per_l1tlb=2", "workload.kind=regular", "workload.regular.threads=8192", "workload.managed=true"];
    let none = run(&base);
    for policy in ["density", "sequential-local", "sequential", "locality", "random", "oracle", "random-4k"] {
        // Zheng's transfer sets of 80 pages would be full of demand faults here (4 µTLBs x 56 per batch): take 512.
        let x = run(&[&base[..], &[&format!("uvm.prefetch.policy=\"{policy}\""), "uvm.prefetch.transfer_set_pages=512"]].concat());
        let (faults, before) = (m(&x, "uvm.faults.unique"), m(&none, "uvm.faults.unique"));
        assert!(faults < 0.9 * before, "{policy}: {faults} vs {before}");
        assert_eq!(
            m(&x, "uvm.faults.unique") + m(&x, "uvm.prefetch.pages"),
            m(&x, "uvm.resident_pages"),
            "{policy}: every page migrated once"
        );
        assert_eq!(m(&x, "uvm.prefetch.used") + m(&x, "uvm.prefetch.wasted"), m(&x, "uvm.prefetch.pages"), "{policy}");
        assert!(m(&x, "uvm.prefetch.used") > 0.5 * m(&x, "uvm.prefetch.pages"), "{policy}: a streaming kernel uses what is prefetched");
    }
    let density = run(&[&base[..], &["uvm.prefetch.policy=\"density\""]].concat());
    assert!(m(&density, "uvm.batches") < m(&none, "uvm.batches"));
    // Data resident nowhere (not host-initialised) and the GPU its preferred location: the
    // first batch that faults in a block brings all of it.
    let whole =
        run(&[&base[..], &["uvm.prefetch.policy=\"density\"", "uvm.prefetch.gpu_preferred=true", "workload.host_init=false"]].concat());
    let (w, d) = (m(&whole, "uvm.faults.unique"), m(&density, "uvm.faults.unique"));
    assert!(w <= d / 4.0 && m(&whole, "uvm.resident_pages") == 8192.0, "{w} vs {d}");
    // Threshold 1: the first fault in a block brings all of it.
    let t1 = run(&[&base[..], &["uvm.prefetch.policy=\"density\"", "uvm.prefetch.threshold=1"]].concat());
    assert!(m(&t1, "uvm.faults.unique") <= d / 4.0, "{}", m(&t1, "uvm.faults.unique"));
}

/// An oversubscribed managed run (footprint twice the GPU memory) evicts,
/// stays within the capacity (asserted after every batch in debug builds, and
/// at the end), finishes, and is deterministic, for every policy.
#[test]
fn oversubscribed_runs_evict_within_capacity() {
    let base = [
        "gpu.sms=8",
        "gpu.sms_per_l1tlb=2",
        "workload.kind=regular",
        "workload.regular.threads=8192",
        "workload.managed=true",
        "uvm.oversubscription=2.0",
    ];
    for policy in ["driver", "lru", "random", "lfu"] {
        let choice = format!("uvm.eviction.policy=\"{policy}\"");
        let sets = [&base[..], &[&choice, "uvm.prefetch.policy=\"density\""]].concat();
        let x = run(&sets);
        let cap = m(&x, "uvm.gpu_memory_bytes");
        assert_eq!(cap, 8.0 * 2.0 * 1048576.0, "16 blocks of footprint / 2");
        assert!(m(&x, "uvm.evictions") > 0.0, "{policy}");
        assert!(m(&x, "uvm.resident_pages") * 4096.0 <= cap, "{policy}");
        assert_eq!(m(&x, "uvm.bytes_d2h"), m(&x, "uvm.pages_evicted") * 4096.0, "{policy}");
        assert_eq!(m(&x, "link.d2h.bytes"), m(&x, "uvm.bytes_d2h"), "{policy}");
        assert_eq!(m(&x, "time.kernel_ns"), m(&run(&sets), "time.kernel_ns"), "{policy}: deterministic");
    }
    let fits = run(&[&base[..5], &["uvm.oversubscription=0"]].concat());
    assert_eq!(m(&fits, "uvm.evictions"), 0.0);
    // 4 KiB pages (seed paged-memory §5): memory counted in pages, one page per eviction,
    // with Zheng's warm-up (oracle until full, then locality prefetch).
    for policy in ["driver", "lru", "random"] {
        let choice = format!("uvm.eviction.policy=\"{policy}\"");
        let sets = [
            &base[..],
            &[&choice, "uvm.eviction.granularity=\"page\"", "uvm.prefetch.policy=\"oracle\"", "uvm.prefetch.when_full=\"locality\""],
        ]
        .concat();
        let x = run(&sets);
        let cap = m(&x, "uvm.gpu_memory_bytes");
        assert_eq!(cap, 16.0 * 512.0 / 2.0 * 4096.0, "{policy}: footprint pages / 2");
        assert!(m(&x, "uvm.evictions") > 0.0, "{policy}");
        assert_eq!(m(&x, "uvm.evictions"), m(&x, "uvm.pages_evicted"), "{policy}: one page each");
        assert!(m(&x, "uvm.resident_pages") * 4096.0 <= cap, "{policy}");
        assert_eq!(m(&x, "link.d2h.bytes"), m(&x, "uvm.bytes_d2h"), "{policy}");
        assert_eq!(m(&x, "time.kernel_ns"), m(&run(&sets), "time.kernel_ns"), "{policy}: deterministic");
    }
}

/// cudaMemPrefetchAsync of inputs larger than GPU memory counts its pages in either eviction
/// granularity: before 2026-11-30 it took chunks under page granularity, uncounted by the page
/// accounting, and left twice the capacity resident.
#[test]
fn prefetched_inputs_beyond_gpu_memory_stay_within_capacity() {
    for granularity in ["block", "page"] {
        let g = format!("uvm.eviction.granularity=\"{granularity}\"");
        let x = run(&[
            "gpu.sms=8",
            "workload.kind=stream",
            "workload.stream.elements=2097152",
            "workload.managed=true",
            "workload.prefetch_inputs=true",
            "uvm.oversubscription=2.0",
            "uvm.eviction.policy=\"lru\"",
            &g,
        ]);
        let cap = m(&x, "uvm.gpu_memory_bytes");
        assert!(m(&x, "uvm.prefetch_async.bytes_h2d") > cap, "{granularity}: the inputs alone overfill GPU memory");
        assert!(m(&x, "uvm.resident_pages") * 4096.0 <= cap, "{granularity}: not beyond GPU memory");
        assert_eq!(
            m(&x, "uvm.bytes_h2d") - m(&x, "uvm.bytes_d2h"),
            m(&x, "uvm.resident_pages") * 4096.0,
            "{granularity}: what came in and stayed"
        );
    }
}

/// Once GPU memory has filled, a sleeping warp re-executes when one of its pages is mapped
/// or lost, so its lanes complete while their pages are resident and only the lanes on lost
/// pages fault again. Before, every eviction re-executed every sleeping warp, whose lanes on
/// pages still in service walked again and merged into their outstanding faults at every
/// batch (walks grew as warps × batches); waiting for all of a warp's pages instead let the
/// first ones be evicted before their lanes ran (a random gather thrashed; the unit test of
/// `Gpu::replay_ended` shows the lanes).
#[test]
fn after_memory_fills_lanes_complete_as_their_pages_arrive() {
    let base = ["gpu.sms=8", "gpu.sms_per_l1tlb=2", "workload.managed=true"];
    let stream = [&base[..], &["workload.kind=regular", "workload.regular.threads=65536"]].concat();
    let fits = run(&[&stream[..], &["uvm.oversubscription=0"]].concat());
    let over = run(&[&stream[..], &["uvm.oversubscription=4"]].concat());
    assert!(m(&over, "uvm.evictions") > 0.0);
    let (merged, raw) = (m(&over, "uvm.faults.merged"), m(&over, "uvm.faults.raw"));
    assert!(merged < 0.5 * raw, "{merged} re-walks merged into {raw} faults");
    let (walks, fit) = (m(&over, "gpu0.walker.walks"), m(&fits, "gpu0.walker.walks"));
    assert!(walks < 1.5 * fit, "{walks} walks oversubscribed, {fit} when the data fits");
}

/// Blocking faults once GPU memory is full: each replay re-executes every waiting warp (the
/// refault epoch), and a µTLB blocks again as soon as a walk finds a fault, as before memory
/// filled. With near-instant walks little gets in before that, so after memory filled the
/// driver needs more batches than with replayable faults, which keep issuing.
#[test]
fn blocking_faults_keep_the_utlb_blocked_after_memory_fills() {
    let sets = [
        "gpu.sms=16",
        "gpu.sms_per_l1tlb=2",
        "workload.kind=gather",
        "workload.gather.threads=2048",
        "workload.gather.lookups=2048",
        "workload.threads_per_cta=128",
        "workload.managed=true",
        "gmmu.walker.level_latency_ns=0",
        "gmmu.walker.pte_from_dram=false",
        "uvm.oversubscription=2",
        "uvm.records=true",
    ];
    // Batches once memory is full (the first eviction on), and the faults they fetched.
    let after_full = |mode: &str| {
        let b = uvmsim::world::simulate_full(&cfg(&[&sets[..], &[mode]].concat())).unwrap().batches.unwrap();
        let first = b.iter().position(|b| b.evictions > 0).expect("memory fills");
        let full = &b[first..];
        (full.len(), full.iter().map(|b| b.fetched).sum::<u64>())
    };
    let blocking = after_full("uvm.fault_mode=\"blocking\"");
    let replayable = after_full("uvm.fault_mode=\"replayable\"");
    assert!(replayable.0 > 100, "memory filled late: {replayable:?}");
    assert!(blocking.0 as f64 > 1.2 * replayable.0 as f64, "batches, faults once full: blocking {blocking:?}, replayable {replayable:?}");
}

/// Eviction write-back (`uvm.eviction.write_back`): "all" copies every evicted page back, as the
/// driver does; "dirty" only the pages the GPU stored to. The STREAM triad stores only to `a`, a
/// third of the footprint, so with "dirty" at most `a`'s pages go back and the rest are evicted clean.
#[test]
fn dirty_write_back_copies_only_the_pages_stored_to() {
    let elements = 1u64 << 20; // 8 MiB arrays of 8-byte elements: `a` is 2,048 pages
    let a_pages = (elements * 8 / 4096) as f64;
    for granularity in ["block", "page"] {
        let base = [
            "workload.kind=stream".to_string(),
            format!("workload.stream.elements={elements}"),
            "workload.stream.element_bytes=8".into(),
            "workload.managed=true".into(),
            "uvm.oversubscription=2.0".into(),
            format!("uvm.eviction.granularity=\"{granularity}\""),
            "uvm.eviction.policy=\"lru\"".into(),
        ];
        let with = |wb: &str| {
            let mut sets: Vec<String> = base.to_vec();
            sets.push(format!("uvm.eviction.write_back=\"{wb}\""));
            run(&sets.iter().map(String::as_str).collect::<Vec<_>>())
        };
        let (all, dirty) = (with("all"), with("dirty"));
        for x in [&all, &dirty] {
            assert!(m(x, "uvm.pages_evicted") > a_pages, "{granularity}: evicts more than a's pages");
            let copied = m(x, "uvm.pages_evicted") - m(x, "uvm.pages_evicted_clean");
            assert_eq!(m(x, "uvm.bytes_d2h"), copied * 4096.0, "{granularity}");
            assert_eq!(m(x, "link.d2h.bytes"), m(x, "uvm.bytes_d2h"), "{granularity}");
        }
        assert_eq!(m(&all, "uvm.pages_evicted_clean"), 0.0, "{granularity}: all go back");
        let copied = m(&dirty, "uvm.pages_evicted") - m(&dirty, "uvm.pages_evicted_clean");
        assert!(copied > 0.0 && copied <= a_pages, "{granularity}: {copied} dirty pages copied back, a has {a_pages}");
        assert!(m(&dirty, "uvm.bytes_d2h") < m(&all, "uvm.bytes_d2h"));
    }
}

/// Host shootdowns through the IOMMU (svm-apu §VI): a single-entry shootdown
/// removes that page's translation from every GPU TLB, so the second kernel
/// misses again on exactly the pages shot down; flush-all empties the TLBs
/// once; the host waits for each shootdown's four phases in turn.
#[test]
fn shootdowns_remove_translations_and_cost_host_time() {
    let base = [
        "translation.mode=iommu",
        "iommu.ats_prefetch_pages=1",
        "gpu.l1tlb.entries=64",
        "gpu.l1tlb.ways=64",
        "workload.kind=shootdown",
        "workload.shootdown.pages=16",
    ];
    // Shoot down 4 of the 16 pages: the second kernel's L1 misses are exactly those 4.
    let four = run(&[&base[..], &["workload.shootdown.count=4"]].concat());
    assert_eq!(m(&four, "gpu0.l1tlb.misses"), 16.0 + 4.0);
    // L1 and L2 each held the page.
    assert_eq!(m(&four, "iommu.shootdown.gpu_entries_invalidated"), 8.0);
    // Every page once, twice over: the second round finds nothing to remove.
    let all = run(&[&base[..], &["workload.shootdown.count=32"]].concat());
    assert_eq!(m(&all, "gpu0.l1tlb.misses"), 32.0);
    assert_eq!(m(&all, "iommu.shootdown.gpu_entries_invalidated"), 32.0);
    let flush = run(&[&base[..], &["workload.shootdown.count=3", "workload.shootdown.flush_all=true"]].concat());
    assert_eq!(m(&flush, "gpu0.l1tlb.misses"), 32.0);
    assert_eq!(m(&flush, "iommu.shootdown.gpu_entries_invalidated"), 32.0);
    // Host time: the runs differ by the 28 extra shootdowns' latency.
    let per = m(&four, "iommu.shootdown.latency_ns.mean");
    let phases = ["init", "iommu", "gpu", "final"].iter().map(|p| m(&four, &format!("iommu.shootdown.{p}_ns.mean"))).sum::<f64>();
    assert!((per - phases).abs() < 1e-6);
    let extra = m(&all, "time.total_ns") - m(&four, "time.total_ns") - (m(&all, "time.kernel_ns") - m(&four, "time.kernel_ns"));
    assert!((extra - 28.0 * per).abs() < 1.0, "{extra} vs {}", 28.0 * per);
    // Shootdowns are an APU path: a discrete GPU config is refused, naming the key.
    let err = resolve(&[] as &[Source], &["workload.kind=shootdown".to_string()]).unwrap_err().to_string();
    assert!(err.contains("translation.mode"), "{err}");
    let sets = ["translation.mode=iommu", "workload.kind=shootdown", "workload.shootdown.pages=1048576", "translation.page_size=\"1GiB\""];
    let err = resolve(&[] as &[Source], &sets.map(String::from)).unwrap_err().to_string();
    assert!(err.contains("workload.shootdown.pages"), "{err}");
}

/// After a replay the µTLB retries the accesses it held and each walks the page table
/// again: one warp of 32 lanes on 32 pages with room for 8 outstanding faults per µTLB
/// raises 8, holds 24 and retries them 8 per replay. Walks: 32 first misses, 24 retries,
/// and 32 re-executions once the pages are mapped. The driver sleeps between batches
/// (nothing is in the buffer until the retries fault again), so each later batch waits
/// for the replay's trip, a walk and the interrupt: a longer replay latency delays each.
#[test]
fn held_faults_walk_again_after_each_replay() {
    let base = [
        "workload.kind=regular",
        "workload.regular.threads=32",
        "workload.threads_per_cta=32",
        "workload.managed=true",
        "uvm.utlb_fault_limit=8",
        // The replay after the batch's end, so that a longer replay latency shifts the kernel by itself (with
        // the driver's order, the default, it overlaps the replay wait and is bounded by uvm.replay_us).
        "uvm.fetch_after_replay_wait=false",
    ];
    let r = run(&base);
    assert_eq!((m(&r, "uvm.batches"), m(&r, "uvm.faults.throttled"), m(&r, "uvm.faults.retried")), (4.0, 24.0, 24.0));
    assert_eq!(m(&r, "gpu0.walker.walks"), 32.0 + 24.0 + 32.0);
    let slow = run(&[&base[..], &["uvm.replay_latency_ns=11000"]].concat());
    let d = m(&slow, "time.kernel_ns") - m(&r, "time.kernel_ns");
    // Three replays are followed by retries; the fourth ends the kernel's faults. The host
    // unmap's per-page cost (0.163 µs) puts batch ends off the GPU's 0.69 ns cycle grid, so
    // the retried accesses' cycle rounding moves the shift by a few cycles...
    assert!((d - 3.0 * 10_000.0).abs() < 5.0, "{d}");
    // ...and on the grid it is exact.
    let on_grid = |extra: &[&str]| run(&[&base[..], &["uvm.unmap_per_page_us=0"], extra].concat());
    let d = m(&on_grid(&["uvm.replay_latency_ns=11000"]), "time.kernel_ns") - m(&on_grid(&[]), "time.kernel_ns");
    assert!((d - 3.0 * 10_000.0).abs() < 0.01, "{d}");
}

/// On-touch migration among 4 GPUs (li-4gpu-gmmu) of PageRank's shared rank pages, with
/// Trans-FW's pending request table bringing faults to the host sooner: a warp whose gather
/// waits for several shared pages completes its lanes on each page when that page's answer
/// arrives (the L2 TLB's MSHR answers the requests it held), not only once every page it
/// needs is here at the same time. With the all-at-once rule the pages that had come were
/// taken back by other GPUs meanwhile: 15,996 page-to-page migrations and 4.1 M events here
/// (li-transfw's 65,536-node run never finished); now 712 and about 1 M.
#[test]
fn shared_pages_ping_ponging_between_gpus_do_not_starve_multi_page_warps() {
    let preset = Source::preset("li-4gpu-gmmu", include_str!("../../../presets/li-4gpu-gmmu.toml"));
    let sets = |prt: &str| -> Vec<String> {
        ["multi.migration=on-touch", "workload.kind=pagerank", "workload.pagerank.nodes=16384", "sim.max_events=2500000", prt]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let go = |prt: &str| simulate(&resolve(std::slice::from_ref(&preset), &sets(prt)).unwrap()).unwrap_or_else(|e| panic!("{e}"));
    let (base, prt) = (go("multi.transfw.prt=false"), go("multi.transfw.prt=true"));
    for x in [&base, &prt] {
        assert!(m(x, "multi.migrations.p2p") < 2000.0, "{}", m(x, "multi.migrations.p2p"));
    }
    assert!(m(&prt, "multi.transfw.prt.skipped_walks") > 0.0);
    // The same work completes either way, and an instruction completed in parts (its lanes
    // parked on held pages, `park_held`) counts once: as many as with parking off (a warp
    // that stalls at its fault re-executes whole instructions).
    let whole = go("uvm.stall_warp_on_fault=true");
    for g in 0..4 {
        let k = format!("gpu{g}.completed_insts");
        assert_eq!(m(&base, &k), m(&prt, &k));
        assert_eq!(m(&base, &k), m(&whole, &k));
    }
}

/// The oracle's first pass (Zheng's first-touch order) stops once every managed page has
/// faulted: a 4-sweep stencil faults everything in its first sweep, so the pass handles far
/// fewer events and records the same order as a pass run to the end. A kernel that never
/// touches some managed pages runs the whole pass either way.
#[test]
fn the_oracle_pass_stops_once_every_managed_page_has_faulted() {
    let stencil = cfg(&[
        "workload.kind=stencil3d",
        "workload.stencil3d.nx=64",
        "workload.stencil3d.ny=64",
        "workload.stencil3d.nz=16",
        "workload.stencil3d.iterations=4",
        "workload.stencil3d.threads=4096",
        "workload.managed=true",
        "uvm.prefetch.policy=\"oracle\"",
    ]);
    let (early, early_events) = uvmsim::world::first_touch_pass(&stencil, false).unwrap();
    let (full, full_events) = uvmsim::world::first_touch_pass(&stencil, true).unwrap();
    // Two grids of 64 x 64 x 16 floats: 2 x 64 pages.
    assert_eq!(full.len(), 128);
    assert_eq!(early, full);
    assert!(early_events * 2 < full_events, "{early_events} vs {full_events}");
    // One page in 16 touched (threads 64 KiB apart): the order never completes.
    let sparse = cfg(&[
        "workload.kind=random",
        "workload.random.threads=256",
        "workload.random.bytes_per_thread=\"64KiB\"",
        "workload.managed=true",
        "uvm.prefetch.policy=\"oracle\"",
    ]);
    let (early, early_events) = uvmsim::world::first_touch_pass(&sparse, false).unwrap();
    let (full, full_events) = uvmsim::world::first_touch_pass(&sparse, true).unwrap();
    assert_eq!(full.len(), 256);
    assert_eq!((early, early_events), (full, full_events));
    // The pass pages on demand only, whatever prefetcher the run asks for: a prefetched page would never fault
    // and would be missing from the order.
    let mut tree = stencil.clone();
    tree.uvm.prefetch.policy = uvmsim::uvm::prefetch::PrefetchPolicy::Density;
    assert_eq!(uvmsim::world::first_touch_pass(&tree, true).unwrap().0, uvmsim::world::first_touch_pass(&stencil, true).unwrap().0);
}

/// `translation.managed_large_ptes`: managed arrays prefetched to the GPU before the kernel
/// (cudaMemPrefetchAsync) fill whole 2 MiB blocks, which the driver maps with 2 MiB PTEs: the
/// kernel walks as often as on device memory with 2 MiB pages. With 4 KiB PTEs every page walks.
#[test]
fn large_ptes_make_prefetched_managed_memory_walk_like_device_memory() {
    let base = ["workload.kind=\"stream\"", "workload.stream.elements=1048576", "translation.page_size=\"2MiB\""];
    let device = run(&base);
    let managed = |large: &str| run(&[&base[..], &["workload.managed=true", "workload.prefetch_inputs=true", large]].concat());
    let (on, off) = (managed("translation.managed_large_ptes=true"), managed("translation.managed_large_ptes=false"));
    // Three 4 MiB arrays: 6 blocks.
    assert_eq!(m(&on, "gpu0.walker.walks"), m(&device, "gpu0.walker.walks"));
    assert!(m(&off, "gpu0.walker.walks") >= 3.0 * 1024.0, "{}", m(&off, "gpu0.walker.walks"));
    assert_eq!(m(&on, "uvm.faults.raw"), 0.0);
    // Every translation answered by a 2 MiB entry, as on device memory; 4 KiB ones without the option.
    let by = |r: &Metrics, size: &str| m(r, &format!("gpu0.translations.by_page.{size}"));
    for r in [&on, &device] {
        assert_eq!(by(r, "2MiB"), m(r, "gpu0.translations"));
        assert_eq!(by(r, "4KiB") + by(r, "64KiB") + by(r, "1GiB"), 0.0);
    }
    assert_eq!(by(&off, "4KiB"), m(&off, "gpu0.translations"));
}

/// With `translation.managed_large_ptes` one translation covers many 4 KiB pages, and a warp
/// reaches prefetched pages through a large TLB entry without walking to them: each page its lines
/// touch still counts as used and, stored to, as dirty, and the pages it does not touch as neither.
/// Stores 6 KiB apart (a warp instruction's 32 lanes on 32 of 48 pages, every third page untouched:
/// density prefetches those, and they are wasted and evicted clean), 2x oversubscribed, dirty-only
/// write-back: the same clean evictions and wasted prefetches as with 4 KiB PTEs. (With 4 KiB
/// apart every page is stored to, and both counts were 0 either way.)
#[test]
fn large_ptes_keep_touched_and_dirty_pages_per_4k_page() {
    let sets = [
        "workload.kind=\"strided\"",
        "workload.strided.threads=16384",
        "workload.strided.stride_elements=1536",
        "workload.strided.write=true",
        "workload.strided.repeats=2",
        "workload.managed=true",
        "uvm.oversubscription=2",
        "uvm.prefetch.policy=\"density\"",
        "uvm.eviction.write_back=\"dirty\"",
    ];
    let with = |large: &str| run(&[&sets[..], &[large]].concat());
    let (on, off) = (with("translation.managed_large_ptes=true"), with("translation.managed_large_ptes=false"));
    assert!(m(&on, "gpu0.walker.walks") < m(&off, "gpu0.walker.walks"), "large PTEs in use");
    for k in ["uvm.pages_evicted", "uvm.pages_evicted_clean", "uvm.prefetch.wasted"] {
        assert_eq!(m(&on, k), m(&off, k), "{k}");
    }
    assert!(m(&on, "uvm.pages_evicted_clean") < m(&on, "uvm.pages_evicted"), "stored pages are written back");
    assert!(m(&on, "uvm.pages_evicted_clean") > 0.0 && m(&on, "uvm.prefetch.wasted") > 0.0, "untouched pages are prefetched");
}

/// `uvm.migration_records_max` bounds the single-GPU driver's migrations table too: the first
/// copies are kept, the rest counted in `uvm.migration_records_dropped`; nothing else changes.
#[test]
fn the_driver_migrations_table_keeps_at_most_its_bound() {
    let sets = ["workload.kind=regular", "workload.managed=true", "workload.regular.threads=4096", "uvm.records=true"];
    let all = uvmsim::world::simulate_full(&cfg(&sets)).unwrap();
    let bounded = [&sets[..], &["uvm.migration_records_max=3"]].concat();
    let some = uvmsim::world::simulate_full(&cfg(&bounded)).unwrap();
    let (all_rows, rows) = (all.migrations.unwrap(), some.migrations.unwrap());
    assert!(all_rows.len() > 3);
    assert_eq!(rows.len(), 3);
    assert_eq!(some.metrics.get("uvm.migration_records_dropped"), Some((all_rows.len() - 3) as f64));
    assert_eq!(all.metrics.get("uvm.migration_records_dropped"), Some(0.0));
    assert!(rows.iter().zip(&all_rows).all(|(a, b)| a.first_page == b.first_page && a.start_ns == b.start_ns));
    assert_eq!(some.metrics.get("time.total_ns"), all.metrics.get("time.total_ns"));
}

/// The zero-latency-invalidation oracle removes a cost, so on these inputs it is no slower than
/// the baseline, and on-touch migration never serves an access remotely (it maps a page only
/// where it lives). Before 2026-12 a GPU whose invalidation request had arrived but not been
/// handled yet (a warp's step computes its issues a few ns ahead, and the oracle's request lands
/// 1 ps after the previous answer woke that GPU's warps) still hit its TLB entry, and the access
/// went remotely to the new owner after the copy: li-4gpu-ats spmv 48.3 -> 83.3 µs with 10,358
/// remote line requests, li-4gpu-gmmu pagerank +271%.
#[test]
fn zero_latency_invalidation_is_no_slower_and_on_touch_is_never_remote() {
    let go = |preset: &str, toml: &str, kind: &str, zero: bool| {
        let sets: Vec<String> = [
            "multi.migration=\"on-touch\"".to_string(),
            format!("workload.kind=\"{kind}\""),
            "workload.spmv.rows=4096".into(),
            format!("multi.oracle.zero_latency_invalidation={zero}"),
        ]
        .into();
        simulate(&resolve(&[Source::preset(preset, toml)], &sets).unwrap()).unwrap_or_else(|e| panic!("{e}"))
    };
    let ats = include_str!("../../../presets/li-4gpu-ats.toml");
    let gmmu = include_str!("../../../presets/li-4gpu-gmmu.toml");
    for (preset, toml, kind) in [("li-4gpu-ats", ats, "spmv"), ("li-4gpu-gmmu", gmmu, "pagerank"), ("li-4gpu-ats", ats, "pagerank")] {
        let (base, zero) = (go(preset, toml, kind, false), go(preset, toml, kind, true));
        for x in [&base, &zero] {
            assert_eq!(m(x, "multi.remote_accesses"), 0.0, "{preset} {kind}");
            assert!(m(x, "multi.migrations.p2p") > 0.0, "{preset} {kind}: pages move between GPUs");
        }
        assert_eq!(m(&zero, "multi.invalidations.latency_ns.mean"), 0.0);
        let (b, z) = (m(&base, "time.kernel_ns"), m(&zero, "time.kernel_ns"));
        assert!(z <= b, "{preset} {kind}: oracle {z} ns vs baseline {b} ns");
    }
}

/// `uvm.faults.unique` counts the faulted pages the driver serviced (docs/metrics.md), not those of
/// VA blocks it deferred for want of GPU memory (`uvm.faults.deferred`), which fault again after the
/// replay. An oversubscribed STREAM triad, every page initialised by the host and moved without
/// prefetch: each serviced page crosses the link once per migration, so unique = bytes_h2d / 4096, the
/// batch rows sum to it, and the faults table has one `serviced` row per page serviced. Before
/// 2026-12 unique counted the deferred blocks' pages too (1,520 against 768 pages moved on a Titan V).
#[test]
fn unique_faults_are_the_pages_serviced_not_deferred() {
    let sets = [
        "workload.kind=stream",
        "workload.stream.elements=131072",
        "workload.stream.threads=16384",
        "workload.managed=true",
        "uvm.oversubscription=2.0",
        "uvm.records=true",
        "uvm.fault_records=true",
    ];
    let out = uvmsim::world::simulate_full(&cfg(&sets)).unwrap();
    let x = &out.metrics;
    assert!(m(x, "uvm.va_blocks_deferred") > 0.0 && m(x, "uvm.faults.deferred") > 0.0, "the run must defer blocks");
    let unique = m(x, "uvm.faults.unique");
    assert_eq!(unique, m(x, "uvm.bytes_h2d") / 4096.0);
    let b = out.batches.as_ref().unwrap();
    assert_eq!(b.iter().map(|r| r.unique).sum::<u64>() as f64, unique);
    assert_eq!(b.iter().map(|r| r.deferred).sum::<u64>() as f64, m(x, "uvm.faults.deferred"));
    let f = out.faults.as_ref().unwrap();
    let count = |o: uvmsim::uvm::Outcome| f.iter().filter(|r| r.outcome == o).count() as f64;
    assert_eq!(count(uvmsim::uvm::Outcome::Serviced), unique);
    assert_eq!(count(uvmsim::uvm::Outcome::Deferred), m(x, "uvm.faults.deferred"));
}

/// The infinite-walkers oracle: walks never wait for a walker thread or queue slot, in the IOMMU and
/// the host MMU too, whose TLBs admit as many outstanding misses as their walker pool has threads
/// plus queue slots. Before 2026-11-30 those TLB slots stayed bounded under the oracle: kaveri-apu's
/// misses waited for them (833 `iommu.tlb.mshr_full_waits` here, 0 with a pool of 4,096 threads),
/// and so did li-4gpu-gmmu's host-MMU misses (78).
#[test]
fn infinite_walkers_leave_no_walk_slot_to_wait_for() {
    let go = |preset: &str, toml: &str, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        simulate(&resolve(&[Source::preset(preset, toml)], &sets).unwrap()).unwrap_or_else(|e| panic!("{e}"))
    };
    let kaveri = include_str!("../../../presets/kaveri-apu.toml");
    // The GPU's TLBs get more MSHRs than the IOMMU has walk slots (16 threads + 64 queued; the preset's 64 per
    // TLB hold its faulting misses back before the IOMMU's slots fill).
    let apu =
        ["workload.kind=regular", "workload.regular.threads=1024", "workload.managed=true", "gpu.l1tlb.mshrs=1024", "gpu.l2tlb.mshrs=1024"];
    let base = go("kaveri-apu", kaveri, &apu);
    assert!(m(&base, "iommu.tlb.mshr_full_waits") > 0.0, "the 16 + 64 walk slots fill");
    let inf = go("kaveri-apu", kaveri, &[&apu[..], &["multi.oracle.infinite_walkers=true"]].concat());
    assert_eq!((m(&inf, "iommu.tlb.mshr_full_waits"), m(&inf, "iommu.walker.queue_wait_ns.mean")), (0.0, 0.0));
    let gmmu = include_str!("../../../presets/li-4gpu-gmmu.toml");
    let multi = ["workload.kind=regular", "workload.regular.threads=2048"];
    assert!(m(&go("li-4gpu-gmmu", gmmu, &multi), "host_mmu.tlb.mshr_full_waits") > 0.0);
    let inf = go("li-4gpu-gmmu", gmmu, &[&multi[..], &["multi.oracle.infinite_walkers=true"]].concat());
    assert_eq!(m(&inf, "host_mmu.tlb.mshr_full_waits"), 0.0);
}

/// The infinite-walkers oracle can make a managed run slower, and that is the driver's batching,
/// not the oracle: titan-v, `regular` over 16,384 pages (32 VA blocks, one per µTLB of two SMs).
/// With the preset's 32 walker threads the faults the µTLBs retry after each replay reach the
/// buffer over microseconds (the walks queue), so some µTLBs' faults come after the batch-flush and
/// are serviced in a small batch of their own (56 pages per VA block); with unbounded walkers every
/// µTLB's 56 held faults are back in the buffer within a walk, each batch takes 8 faults from each
/// of the 32 blocks (paying `per_block_us` and `map_us` 32 times for 256 pages), the flush discards
/// the other 1,536, and the driver idles until the replay's retries interrupt it again. The run is
/// slower by about what the extra block services cost (25.94 -> 29.21 ms), and a bounded pool large
/// enough never to fill runs as the oracle does (docs/multi-gpu.md, "Oracles"). The L2 TLB's MSHRs
/// are made too many to fill in both runs: the retried walks' L2 misses hold them (since 2026-11-30,
/// when the MSHRs started counting the slots held at each miss's own time), and the preset's 128
/// then spread the 1,792 retries themselves (25.94 ms with the preset's walkers, 25.43 ms with the oracle).
/// All of this is with the flush and replay after the batch's end (`uvm.fetch_after_replay_wait = false`, the
/// default until session 59): with the driver's order the next fetch comes when the replay wait ends, without
/// the interrupt this test follows.
#[test]
fn infinite_walkers_mix_more_va_blocks_into_each_fault_batch() {
    let titan = include_str!("../../../presets/titan-v.toml");
    let go = |sets: &[&str]| {
        let mut all = vec![
            "workload.kind=regular",
            "workload.managed=true",
            "workload.regular.threads=16384",
            "uvm.records=true",
            "gpu.l2tlb.mshrs=4096",
            "uvm.fetch_after_replay_wait=false",
        ];
        all.extend_from_slice(sets);
        let all: Vec<String> = all.iter().map(|s| s.to_string()).collect();
        uvmsim::world::simulate_full(&resolve(&[Source::preset("titan-v", titan)], &all).unwrap()).unwrap_or_else(|e| panic!("{e}"))
    };
    let idle = |o: &uvmsim::world::Output| {
        let b = o.batches.as_ref().unwrap();
        b.windows(2).map(|w| w[1].start_ns - w[0].end_ns).sum::<f64>()
    };
    let (base, inf) = (go(&[]), go(&["multi.oracle.infinite_walkers=true"]));
    let (b, i) = (&base.metrics, &inf.metrics);
    assert!(m(b, "gpu0.walker.queue_wait_ns.mean") > 1000.0);
    assert_eq!(m(i, "gpu0.walker.queue_wait_ns.mean"), 0.0);
    // The same pages are serviced, in as many or fewer batches, each mixing more VA blocks.
    assert_eq!(m(b, "uvm.faults.unique"), m(i, "uvm.faults.unique"));
    assert!(m(i, "uvm.batches") <= m(b, "uvm.batches"));
    let per_batch = |x: &Metrics| m(x, "uvm.va_blocks") / m(x, "uvm.batches");
    assert!(per_batch(i) >= 31.0, "nearly every block in every batch: {}", per_batch(i));
    assert!(per_batch(b) < 0.85 * per_batch(i), "{} vs {}", per_batch(b), per_batch(i));
    assert!(m(i, "uvm.faults.flushed") > 2.0 * m(b, "uvm.faults.flushed"));
    assert!(idle(&inf) > 5.0 * idle(&base), "the driver waits for the retries: {} vs {} ns", idle(&inf), idle(&base));
    // Slower, by what the extra block services cost.
    let dt = m(i, "time.total_ns") - m(b, "time.total_ns");
    let stages = |x: &Metrics| m(x, "uvm.stage.block_ns") + m(x, "uvm.stage.map_ns");
    assert!(dt > 0.05 * m(b, "time.total_ns"), "{dt}");
    assert!(stages(i) - stages(b) > 0.75 * dt, "{} of {dt}", stages(i) - stages(b));
    // A bounded pool that (nearly) never fills behaves as the oracle.
    let big = go(&["gmmu.walker.threads=4096", "gmmu.walker.queue_depth=4096"]);
    let rel = m(&big.metrics, "time.total_ns") / m(i, "time.total_ns") - 1.0;
    assert!(rel.abs() < 0.01, "4,096 walker threads vs the oracle: {rel}");
}

/// Several GPUs: a kernel's time runs from its launch until the last GPU finishes its share, summed over the
/// launches. Two sweeps back to back from time 0 with nothing between them on the host: the kernels' time is
/// the run's time. Three CTAs on GPUs of one SM: GPU 0 runs one, GPU 1 two, and finishes last.
#[test]
fn multi_gpu_kernel_time_sums_each_launch_from_its_start() {
    let base = [
        "multi.gpus=2",
        "gpu.sms=1",
        "workload.kind=stencil2d",
        "workload.threads_per_cta=256",
        "workload.stencil2d.nx=64",
        "workload.stencil2d.ny=64",
        "workload.stencil2d.threads=768",
    ];
    let two = run(&[&base[..], &["workload.stencil2d.iterations=2"]].concat());
    let one = run(&[&base[..], &["workload.stencil2d.iterations=1"]].concat());
    assert_eq!(m(&two, "time.kernel_ns"), m(&two, "time.total_ns"));
    assert_eq!(m(&one, "time.kernel_ns"), m(&one, "time.total_ns"));
    // The second sweep finds the pages where the first left them: it takes no longer than the first.
    assert!(m(&two, "time.kernel_ns") <= 2.0 * m(&one, "time.kernel_ns"), "{} {}", m(&two, "time.kernel_ns"), m(&one, "time.kernel_ns"));
    assert!(m(&two, "time.kernel_ns") > m(&one, "time.kernel_ns"));
}

/// Pages evicted one by one (`uvm.eviction.granularity = "page"`) leave every GPU TLB: touched again, they fault
/// and come back. Three sweeps of a 256 x 256 float stencil touch both 64-page grids each time (128 pages) in
/// 85 pages of GPU memory (oversubscription 1.5): after the first sweep's 128, each of the next two brings back
/// at least the 128 - 85 = 43 pages not resident at its start, 214 pages in all. A stale translation would let
/// the GPU use an evicted page without a fault.
#[test]
fn pages_evicted_one_by_one_fault_again_when_touched() {
    let x = run(&[
        "gpu.sms=2",
        "workload.kind=stencil2d",
        "workload.stencil2d.nx=256",
        "workload.stencil2d.ny=256",
        "workload.stencil2d.threads=4096",
        "workload.stencil2d.iterations=3",
        "workload.managed=true",
        "uvm.oversubscription=1.5",
        "uvm.eviction.granularity=\"page\"",
        "uvm.eviction.policy=\"lru\"",
        "uvm.prefetch.policy=\"none\"",
    ]);
    assert_eq!(m(&x, "uvm.resident_pages"), 85.0);
    let fetched = m(&x, "uvm.bytes_h2d") / 4096.0;
    assert!(fetched >= 128.0 + 2.0 * 43.0, "{fetched} pages fetched");
    assert_eq!(fetched, m(&x, "uvm.pages_evicted") + 85.0);
}

/// IOMMU mode: a page the page-request path mapped stays in host memory, so the host's accesses between kernels
/// use it in place and the GPU keeps its mapping. Ping-pong over 16 pages, 10 rounds, one page per request: 16
/// requests in all (the first kernel's), no CPU fault and nothing copied back. Before 2026-12-07 each host
/// access took the pages "back" over the link (16 pages x 4 KiB x 10 rounds) and the GPU requested them again
/// at every kernel (160 requests).
#[test]
fn apu_pages_mapped_in_place_stay_shared_with_the_host() {
    let x = run(&[
        "translation.mode=iommu",
        "iommu.ppr.pages_log2=0",
        "workload.kind=ping-pong",
        "workload.ping_pong.iterations=10",
        "workload.ping_pong.host_us=0",
        "workload.managed=true",
    ]);
    assert_eq!(m(&x, "apu.faults"), 16.0);
    assert_eq!(m(&x, "apu.pages_mapped"), 16.0);
    assert_eq!((m(&x, "uvm.host.faults"), m(&x, "uvm.host.bytes_d2h"), m(&x, "link.d2h.bytes")), (0.0, 0.0, 0.0));
    // Host-initialised pages are in host memory already: mapping them for the GPU moves nothing either.
    assert_eq!(m(&x, "link.h2d.bytes"), 0.0);
}

/// `iommu.shared_memory`: an APU's GPU has no memory of its own, so cudaMemPrefetchAsync (hipMemPrefetchAsync)
/// moves and maps nothing, and the kernel's first touches still take the page-request path; with memory behind
/// the link (false) the same prefetch migrates the 8 pages (32 KiB) and the kernel requests none.
#[test]
fn a_prefetch_on_a_shared_memory_apu_moves_nothing() {
    let base = [
        "translation.mode=iommu",
        "iommu.ppr.pages_log2=0",
        "workload.kind=regular",
        "workload.regular.threads=8",
        "workload.managed=true",
        "workload.prefetch_inputs=true",
    ];
    let apu = run(&[&base[..], &["iommu.shared_memory=true"]].concat());
    assert_eq!(m(&apu, "uvm.prefetch_async.calls"), 1.0);
    assert_eq!((m(&apu, "uvm.prefetch_async.pages"), m(&apu, "uvm.prefetch_async.time_ns")), (0.0, 0.0));
    assert_eq!((m(&apu, "link.h2d.bytes"), m(&apu, "apu.faults")), (0.0, 8.0));
    let discrete = run(&base);
    assert_eq!((m(&discrete, "uvm.prefetch_async.pages"), m(&discrete, "link.h2d.bytes")), (8.0, 8.0 * 4096.0));
    assert_eq!(m(&discrete, "apu.faults"), 0.0);
}

/// `uvm.baselines` on a run without managed memory is refused: there is nothing to compare (before 2026-12-07
/// the run ended without the baseline.* metrics it asked for, and without a word).
#[test]
fn baselines_without_managed_memory_are_refused() {
    let err = simulate(&cfg(&["workload.kind=regular", "workload.regular.threads=8", "uvm.baselines=true"])).unwrap_err();
    assert!(err.to_string().contains("key `uvm.baselines`") && err.to_string().contains("workload.managed = true"), "{err}");
}

/// An APU shares its one memory with the host: access-counter migration has nowhere to move pages to.
#[test]
fn access_counter_migration_is_refused_on_a_shared_memory_apu() {
    let sets = ["translation.mode=iommu", "iommu.shared_memory=true", "uvm.access_counters.migrate=true"];
    let overrides: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let err = resolve(&[] as &[Source], &overrides).unwrap_err().to_string();
    assert!(err.contains("uvm.access_counters.migrate") && err.contains("iommu.shared_memory"), "{err}");
}

/// IOMMU mode with memory of its own behind the link (`iommu.shared_memory = false`, gh200-c2c without its
/// accessed-by hint): a page request maps the host's page where it is, so the GPU reads it remotely, over the
/// link, and nothing becomes GPU-resident; on a shared-memory APU the same requests map the GPU's one memory.
/// (Before 2026-12-07 both were taken for GPU-resident pages, read at the GPU memory's speed.)
#[test]
fn page_requests_for_host_memory_behind_the_link_map_it_remotely() {
    let base = [
        "translation.mode=iommu",
        "iommu.ppr.pages_log2=0",
        "workload.kind=regular",
        "workload.regular.threads=8",
        "workload.managed=true",
    ];
    let behind = run(&base);
    assert_eq!((m(&behind, "apu.faults"), m(&behind, "apu.pages_mapped")), (8.0, 8.0));
    assert_eq!(m(&behind, "uvm.resident_pages"), 0.0);
    assert!(m(&behind, "uvm.remote.loads") > 0.0);
    let shared = run(&[&base[..], &["iommu.shared_memory=true"]].concat());
    assert_eq!((m(&shared, "apu.faults"), m(&shared, "uvm.resident_pages"), m(&shared, "uvm.remote.loads")), (8.0, 8.0, 0.0));
}
