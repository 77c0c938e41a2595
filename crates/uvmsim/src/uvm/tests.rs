//! Unit tests of the fault buffer and the driver loop (`Uvm`): replay policies, coalescing,
//! the cost model's terms, eviction and the invariants.

use super::*;
use crate::config::Config;
use evict::EvictionPolicy;

fn uvm(policy: ReplayPolicy, limit: u32) -> (Uvm, Link, Residency) {
    uvm_ordered(policy, limit, true)
}

/// `ordered`: `fetch_after_replay_wait` (the default); off, a batch-flush batch's flush and replay follow its
/// end and an empty fetch waits for the next interrupt (the tests that follow the retries step by step).
fn uvm_ordered(policy: ReplayPolicy, limit: u32, ordered: bool) -> (Uvm, Link, Residency) {
    let mut c = UvmConfig {
        replay_policy: policy,
        utlb_fault_limit: limit,
        batch_size: 4,
        fetch_after_replay_wait: ordered,
        ..UvmConfig::default()
    };
    c.interrupt_us = 1.0;
    (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default())
}

fn fault(vpn: u64, utlb: u32) -> Fault {
    Fault { time: 0, vpn, utlb, sm: utlb * 2, warp: 0, write: false, prefetch: false }
}

/// The world's part of a replay: each retried access walks again (`walk` ps) and faults again.
fn retry(u: &mut Uvm, walk: Ps) -> Vec<Next> {
    u.take_retries().into_iter().map(|f| u.rewrite(Fault { time: f.time + walk, ..f })).collect()
}

#[test]
fn first_fault_wakes_the_driver_after_the_interrupt() {
    let (mut u, _, _) = uvm(ReplayPolicy::BatchFlush, 56);
    assert_eq!(u.raise(fault(1, 0)), Next::Service(1_000_000));
    assert_eq!(u.raise(fault(2, 0)), Next::Nothing, "already woken");
}

#[test]
fn a_batch_coalesces_groups_by_block_and_maps_at_its_end() {
    // The replay after the batch's end (fetch_after_replay_wait off), to follow each retry.
    let (mut u, mut link, mut res) = uvm_ordered(ReplayPolicy::BatchFlush, 56, false);
    for (vpn, utlb) in [(7, 0), (7, 1), (600, 0), (8, 1), (9, 0), (10, 0)] {
        u.raise(fault(vpn, utlb));
    }
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    // Batch of 4: pages 7, 7 (duplicate), 600, 8 -> 3 pages in 2 VA blocks.
    assert_eq!((u.stats.duplicates, u.stats.unique, u.stats.va_blocks), (1, 3, 2));
    assert!(!res.is_resident(7), "not mapped before the batch ends");
    // Costs: 10 + 4 x 0.2 + 2 x (8 + transfer) + 5 µs.
    assert!(end > 31_800_000, "{end}");
    // batch-flush discarded the two faults left (9, 10): the buffer is empty, the driver
    // stops. Their µTLB retries them when the replay arrives (1 µs), walks (0.5 µs here)
    // and faults again; the first of them interrupts the driver (1 µs).
    assert_eq!(u.batch_done(end, &mut res), (Next::Nothing, true));
    assert!(res.is_resident(7) && res.is_resident(600) && res.is_resident(8));
    assert_eq!(u.retries.iter().map(|f| (f.vpn, f.time)).collect::<Vec<_>>(), vec![(9, end + 1_000_000), (10, end + 1_000_000)]);
    assert_eq!(retry(&mut u, 500_000), vec![Next::Service(end + 2_500_000), Next::Nothing]);
    assert_eq!((u.stats.flushed, u.stats.raw, u.buffer.len(), u.outstanding.clone()), (2, 8, 2, vec![2, 0]));
    assert!(u.buffer.iter().all(|f| f.time == end + 1_500_000 && (f.vpn == 9 || f.vpn == 10)));
    assert!(!res.is_resident(9));
    u.check_invariants(&res).unwrap();
}

#[test]
fn batch_policy_keeps_the_rest_for_the_next_batch() {
    let (mut u, mut link, mut res) = uvm(ReplayPolicy::Batch, 56);
    for vpn in 0..6 {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    assert_eq!(u.batch_done(end, &mut res), (Next::Service(end), true));
    let Next::BatchDone(end2) = u.service(end, &mut link, &mut res) else { panic!() };
    assert_eq!(u.batch_done(end2, &mut res), (Next::Nothing, true));
    assert_eq!((u.stats.batches, u.stats.unique, u.stats.flushed), (2, 6, 0));
    u.check_invariants(&res).unwrap();
}

#[test]
fn batch_flush_discards_up_to_the_cached_put_unless_duplicates_pass_the_ratio() {
    let run = |ratio: u32| {
        // The flush at the batch's end (fetch_after_replay_wait off); the driver's order has its own test below.
        let mut c = UvmConfig {
            replay_policy: ReplayPolicy::BatchFlush,
            batch_size: 4,
            replay_update_put_ratio: ratio,
            fetch_after_replay_wait: false,
            ..UvmConfig::default()
        };
        c.interrupt_us = 1.0;
        let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
        for (vpn, utlb) in [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (3, 1)] {
            u.raise(fault(vpn, utlb));
        }
        // The fetch reads PUT at 0 and takes pages 0, 0, 1, 1 (2 duplicates of 4); pages 2 and 3 stay before PUT.
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        // Written while the batch is serviced: after the PUT the fetch read.
        u.raise(Fault { time: end / 2, ..fault(20, 0) });
        let (next, replay) = u.batch_done(end, &mut res);
        assert!(replay);
        let left = u.buffer.iter().map(|f| f.vpn).collect::<Vec<_>>();
        // The flushed faults come back after the replay.
        retry(&mut u, 1000);
        u.check_invariants(&res).unwrap();
        (u.stats.flushed, u.stats.put_rereads, left, next == Next::Service(end))
    };
    // 50% duplicates is not more than the default 50%: CACHED_PUT discards pages 2 and 3 only; page 20 is
    // fetched by the next batch, at once.
    assert_eq!(run(50), (2, 0, vec![20], true));
    // Above the ratio the flush reads PUT again (UPDATE_PUT) and discards page 20 too: the buffer is empty.
    assert_eq!(run(40), (3, 1, vec![], false));
}

#[test]
fn fetch_after_replay_wait_fetches_the_faults_re_raised_before_the_wait_ends() {
    // Pages 0, 0, 1, 1 (2 duplicates of 4: above a 40% ratio, UPDATE_PUT), pages 2 and 3 left in the buffer,
    // page 20 written while the batch is serviced. replay_us 5 µs, replay_latency 1 µs, interrupt 1 µs.
    let run = |on: bool| {
        let mut c = UvmConfig {
            replay_policy: ReplayPolicy::BatchFlush,
            batch_size: 4,
            replay_update_put_ratio: 40,
            fetch_after_replay_wait: on,
            ..UvmConfig::default()
        };
        c.interrupt_us = 1.0;
        let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
        for (vpn, utlb) in [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (3, 1)] {
            u.raise(fault(vpn, utlb));
        }
        let Next::BatchDone(at) = u.service(0, &mut link, &mut res) else { panic!() };
        u.raise(Fault { time: at / 2, ..fault(20, 0) });
        let (next, replay) = u.batch_done(at, &mut res);
        assert!(replay);
        // All three are flushed (UPDATE_PUT at `at`) and retried 1 µs after `at`.
        assert_eq!((u.stats.flushed, u.stats.put_rereads), (3, 1));
        assert!(u.retries.iter().all(|f| f.time == at + 1_000_000), "{:?}", u.retries);
        // They walk 0.5 µs and are written at at + 1.5 µs.
        let rewritten = retry(&mut u, 500_000);
        (u, link, res, at, next, rewritten)
    };
    let (_, _, _, end, next, rewritten) = run(false);
    // Off: the batch ends after the replay wait; the buffer is empty, the driver stops, and the
    // first re-raised fault interrupts it 1 µs after it is written.
    assert_eq!(next, Next::Nothing);
    assert_eq!(rewritten, vec![Next::Service(end + 2_500_000), Next::Nothing, Next::Nothing]);
    let (mut u, mut link, mut res, push, next, rewritten) = run(true);
    // On: the flush and replay are pushed replay_us (5 µs) before the batch ends; the driver
    // fetches when its wait ends, without an interrupt, and takes the three re-raised faults.
    assert_eq!(push, end - 5_000_000);
    assert_eq!(next, Next::Service(push + 5_000_000));
    assert_eq!(rewritten, vec![Next::Nothing; 3], "the driver is already due to fetch");
    assert_eq!(u.stats.time_ps, end, "the batch's time includes the wait");
    let Next::BatchDone(_) = u.service(push + 5_000_000, &mut link, &mut res) else { panic!("three faults to fetch") };
    assert_eq!((u.stats.batches, u.stats.fetched), (2, 7));
    u.check_invariants(&res).unwrap();
    // A fetch after the wait that finds nothing ends the bottom half.
    let c = UvmConfig { batch_size: 4, fetch_after_replay_wait: true, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    for vpn in 0..4 {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(push) = u.service(0, &mut link, &mut res) else { panic!() };
    assert_eq!(u.batch_done(push, &mut res), (Next::Service(push + 5_000_000), true));
    assert_eq!(u.service(push + 5_000_000, &mut link, &mut res), Next::Nothing);
    assert!(matches!(u.state, State::Idle));
    u.check_invariants(&res).unwrap();
    // The wait cannot end before the replay reaches the GPU.
    let c = UvmConfig { fetch_after_replay_wait: true, replay_latency_ns: 6000.0, ..UvmConfig::default() };
    assert_eq!(c.validate().unwrap_err().0, "uvm.replay_latency_ns");
    assert!(UvmConfig { fetch_after_replay_wait: false, ..c.clone() }.validate().is_ok());
    // On by default, and checked only where it applies: another policy or cost model never reads the pair.
    assert!(UvmConfig::default().fetch_after_replay_wait);
    assert!(UvmConfig { replay_policy: ReplayPolicy::Batch, ..c.clone() }.validate().is_ok());
    assert!(UvmConfig { cost_model: CostModel::Polled, ..c }.validate().is_ok());
}

#[test]
fn fixed_latency_model_costs_one_latency_plus_transfers() {
    let c = UvmConfig { cost_model: CostModel::FixedLatency, fault_latency_us: 20.0, ..UvmConfig::default() };
    let mut link_cfg = Config::default().link;
    link_cfg.latency_ns = 0.0;
    link_cfg.bandwidth_gbps = 16.0;
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&link_cfg), Residency::default());
    u.host_touch(0, 512, 1);
    u.raise(fault(1, 0));
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    // 20 µs, then 4 KiB at 16 GB/s = 256 ns (seed paged-memory §4.1: "~250 nanoseconds").
    assert!((20_256_000..20_300_000).contains(&end), "{end}");
}

#[test]
fn the_bottom_half_yields_after_max_batches() {
    let c = UvmConfig {
        replay_policy: ReplayPolicy::Batch,
        batch_size: 1,
        max_batches_per_service: 2,
        interrupt_us: 1.0,
        ..UvmConfig::default()
    };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    for vpn in 0..3 {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(e1) = u.service(0, &mut link, &mut res) else { panic!() };
    assert_eq!(u.batch_done(e1, &mut res).0, Next::Service(e1), "the second batch follows at once");
    let Next::BatchDone(e2) = u.service(e1, &mut link, &mut res) else { panic!() };
    assert_eq!(u.batch_done(e2, &mut res).0, Next::Service(e2 + 1_000_000), "after 2 batches: wait for an interrupt");
}

/// The driver's service loop also ends after uvm_perf_fault_max_throttle_per_service batches
/// that throttled a thrashing page (uvm_gpu_replayable_faults.c: `num_throttled`), counted
/// apart from the batch limit and only for batches that throttled one.
#[test]
fn the_bottom_half_yields_after_max_throttled_batches() {
    let c = UvmConfig {
        replay_policy: ReplayPolicy::Batch,
        batch_size: 1,
        max_throttle_per_service: 2,
        interrupt_us: 1.0,
        ..UvmConfig::default()
    };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    const US: Ps = crate::sim::PS_PER_US;
    // Pages 5 to 8 move host -> GPU -> host ... five times within the lapse: they thrash, and
    // the GPU, which lost them last, is throttled when it faults on them.
    for (i, p) in [Proc::Host, Proc::Gpu, Proc::Host, Proc::Gpu, Proc::Host].into_iter().enumerate() {
        u.thrashing.migrated(0, &[5, 6, 7, 8], p, i as Ps * 10 * US);
    }
    let start = 50 * US;
    for vpn in [5, 600, 6, 7, 8] {
        u.raise(fault(vpn, 0));
    }
    let mut service = |u: &mut Uvm, now: Ps, res: &mut Residency| {
        let Next::BatchDone(e) = u.service(now, &mut link, res) else { panic!() };
        (e, u.batch_done(e, res).0)
    };
    let (e1, n1) = service(&mut u, start, &mut res);
    assert_eq!((n1, u.thrashing.stats.throttled_faults), (Next::Service(e1), 1), "one throttled batch: the loop goes on");
    let (e2, n2) = service(&mut u, e1, &mut res);
    assert_eq!(n2, Next::Service(e2), "page 600 is not thrashing: its batch does not count");
    let (e3, n3) = service(&mut u, e2, &mut res);
    assert_eq!(n3, Next::Service(e3 + US), "the second throttled batch ends the run: wait for an interrupt");
    // A new run counts from zero: page 7's throttled batch is its first.
    let (e4, n4) = service(&mut u, e3 + US, &mut res);
    assert_eq!((n4, u.thrashing.stats.throttled_faults), (Next::Service(e4), 3));
    let (e5, n5) = service(&mut u, e4, &mut res);
    assert_eq!(n5, Next::Nothing, "page 8's batch emptied the buffer: the run ends at {e5}");
}

#[test]
fn once_policy_replays_only_when_the_buffer_is_drained() {
    let (mut u, mut link, mut res) = uvm(ReplayPolicy::Once, 56);
    for vpn in 0..6 {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    assert_eq!(u.batch_done(end, &mut res), (Next::Service(end), false), "faults left: no replay yet");
    let Next::BatchDone(end2) = u.service(end, &mut link, &mut res) else { panic!() };
    assert_eq!(u.batch_done(end2, &mut res), (Next::Nothing, true));
    assert_eq!((u.stats.batches, u.stats.replays), (2, 1));
    u.check_invariants(&res).unwrap();
}

#[test]
fn the_utlb_limit_holds_faults_until_a_replay() {
    let (mut u, mut link, mut res) = uvm(ReplayPolicy::Batch, 2);
    for vpn in 0..5 {
        u.raise(fault(vpn, 1));
    }
    u.raise(fault(9, 0));
    assert_eq!((u.stats.raw, u.stats.throttled, u.parked()), (3, 3, 3));
    res.make_resident(3); // made resident meanwhile (e.g. by another µTLB's fault)
    let Next::BatchDone(end) = u.service(10_000_000, &mut link, &mut res) else { panic!() };
    // The batch took all three buffered faults: the driver stops until the retries fault again.
    assert_eq!(u.batch_done(end, &mut res), (Next::Nothing, true));
    assert_eq!(retry(&mut u, 0), vec![Next::Service(end + 2_000_000), Next::Nothing]);
    // The replay freed both of µTLB 1's slots: it raises pages 2 and 4 (3 no longer faults), in order.
    let raised: Vec<u64> = u.buffer.iter().map(|f| f.vpn).collect();
    assert_eq!((raised, u.parked(), u.stats.raw), (vec![2, 4], 0, 5));
    u.check_invariants(&res).unwrap();
}

#[test]
fn a_utlbs_repeated_miss_writes_a_duplicate_unless_it_merges() {
    for merge in [false, true] {
        let c = UvmConfig { utlb_merge_faults: merge, utlb_fault_limit: 3, batch_size: 8, ..UvmConfig::default() };
        let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
        // µTLB 0 misses on page 5 three times (three warps), then on page 6; µTLB 1 on page 5 once.
        for (vpn, utlb, warp) in [(5, 0, 0), (5, 0, 1), (5, 0, 2), (6, 0, 0), (5, 1, 3)] {
            u.raise(Fault { warp, ..fault(vpn, utlb) });
        }
        if merge {
            // One entry per (µTLB, page): 5 and 6 of µTLB 0, 5 of µTLB 1.
            assert_eq!((u.stats.raw, u.stats.merged, u.parked()), (3, 2, 0));
        } else {
            // Every miss writes an entry; the third of µTLB 0 fills its limit of 3, so page 6 waits at the µTLB.
            assert_eq!((u.stats.raw, u.stats.merged, u.parked()), (4, 0, 1));
        }
        assert!(u.in_service(0, 5) && u.in_service(1, 5));
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        // The driver fetches every entry and services page 5 once: the repeats are duplicates.
        let (fetched, dups) = if merge { (3, 1) } else { (4, 3) };
        assert_eq!((u.stats.fetched, u.stats.duplicates, u.stats.unique), (fetched, dups, if merge { 2 } else { 1 }));
        u.batch_done(end, &mut res);
        assert!(!u.in_service(0, 5) && !u.in_service(1, 5), "every entry of page 5 ended with the batch");
        retry(&mut u, 0); // the held miss on page 6 walks again and faults
        assert_eq!(u.buffer.iter().map(|f| f.vpn).collect::<Vec<_>>(), if merge { vec![] } else { vec![6] });
        u.check_invariants(&res).unwrap();
    }
}

#[test]
fn a_utlb_holds_a_warps_access_to_a_page_once() {
    let c = UvmConfig { utlb_fault_limit: 1, batch_size: 8, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    let warp = |vpn: u64, warp: u32| Fault { warp, ..fault(vpn, 0) };
    u.raise(warp(1, 0)); // written: µTLB 0's one slot
    u.raise(warp(1, 0)); // the same warp's access again (re-executed): merges into the written one
    u.raise(warp(2, 0)); // held
    u.raise(warp(2, 0)); // merges into the held one
    u.raise(warp(2, 1)); // another warp's access to the page: held too
    assert_eq!((u.stats.raw, u.stats.merged, u.parked()), (1, 2, 2));
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    // The replay freed the slot: the first held access is retried; page 2's other stays held.
    let retried: Vec<(u64, u32)> = u.take_retries().iter().map(|f| (f.vpn, f.warp)).collect();
    assert_eq!((retried, u.parked()), (vec![(2, 0)], 1));
    assert!(u.in_service(0, 2));
}

#[test]
fn the_sm_throttle_spaces_an_sms_faults() {
    let c = UvmConfig { sm_fault_interval_ns: 100.0, batch_size: 4, ..UvmConfig::default() };
    let (mut u, res) = (Uvm::new(&c, 2, 4, 0), Residency::default());
    let at = |vpn: u64, sm: u32| Fault { time: 0, vpn, utlb: sm / 2, sm, warp: 0, write: false, prefetch: false };
    for vpn in 0..3 {
        u.raise(at(vpn, 1));
    }
    u.raise(at(9, 2));
    let mut pre = at(11, 1);
    pre.prefetch = true;
    u.raise(pre);
    // SM 1's faults at 0, 100, 200 ns; SM 2's at 0; the prefetch escapes the throttle.
    let order: Vec<(u64, Ps)> = u.buffer.iter().map(|f| (f.vpn, f.time)).collect();
    assert_eq!(order, vec![(0, 0), (9, 0), (11, 0), (1, 100_000), (2, 200_000)]);
    u.check_invariants(&res).unwrap();
}

#[test]
fn stale_faults_are_not_migrated_again() {
    let (mut u, mut link, mut res) = uvm(ReplayPolicy::BatchFlush, 56);
    res.make_resident(3);
    u.raise(fault(3, 0));
    let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
    assert_eq!((u.stats.unique, u.stats.bytes_h2d), (0, 0));
}

/// A driver-cost-model Uvm with records, batches of `batch`, and every stage cost distinct.
fn costed(policy: ReplayPolicy, batch: u32) -> (Uvm, Link, Residency) {
    let c = UvmConfig {
        replay_policy: policy,
        batch_size: batch,
        records: true,
        first_touch_tail: 100.0, // nearly constant: the median
        pma_chunk_blocks: 2,
        ..UvmConfig::default()
    };
    (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default())
}

#[test]
fn unmap_cost_counts_each_host_mapped_page_once() {
    let (mut u, mut link, mut res) = costed(ReplayPolicy::Batch, 8);
    // Block 0: pages 0..100 initialised, then 50..150 touched again (150 distinct pages), by 1 thread;
    // block 1: pages 512..522 by 2 threads.
    u.host_touch(0, 100, 1);
    u.host_touch(50, 150, 1);
    u.host_touch(512, 522, 2);
    for vpn in [1, 513] {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
    let r = u.records.as_ref().unwrap()[0].clone();
    // Hand-checked: two blocks at 1.6 µs each, 160 pages at 0.163 µs, one further thread (3 µs) for block 1.
    let want = 2.0 * 1.6 + 150.0 * 0.163 + 10.0 * 0.163 + 3.0;
    assert!((r.unmap_ns / 1000.0 - want).abs() < 1e-6, "{} vs {want}", r.unmap_ns / 1000.0);
}

#[test]
fn stage_costs_follow_block_state_and_sum_to_the_batch_time() {
    let (mut u, mut link, mut res) = costed(ReplayPolicy::Batch, 8);
    // Block 0 host-initialised by 4 threads; block 1 untouched by the host.
    u.host_touch(0, 512, 4);
    for vpn in [1, 2, 513] {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    let r = u.records.as_ref().unwrap()[0].clone();
    let us = |ns: f64| ns / 1000.0;
    assert!((us(r.fetch_ns) - (10.0 + 3.0 * 0.01)).abs() < 1e-6, "three entries read");
    assert!((us(r.block_ns) - 16.0).abs() < 1e-6, "two blocks");
    assert!((us(r.fault_ns) - 3.0 * 0.19).abs() < 1e-6, "three distinct pages, checked in their blocks");
    assert!((us(r.first_touch_ns) - 30.0).abs() < 0.5, "both blocks are new: 2 x the 15 µs median");
    assert!((us(r.alloc_ns) - 100.0).abs() < 1e-6, "one allocator call gives 2 root chunks");
    assert!((us(r.unmap_ns) - (1.6 + 512.0 * 0.163 + 3.0 * 3.0)).abs() < 1e-6, "only block 0 is CPU-mapped: 512 pages, 4 threads");
    assert!((us(r.zero_ns) - 0.02).abs() < 1e-6, "page 513 is resident nowhere: zero-filled");
    assert_eq!(r.bytes_h2d, 2 * 4096, "pages 1 and 2 come from the CPU");
    assert!((us(r.push_ns) - (1.0 + 2.0 * 0.05)).abs() < 1e-6, "one push (block 0's copy) of two pages; block 1 copies nothing");
    // Block 0's 8 KiB copy lands while block 1 is set up: the tracker waits for nothing more than its fixed cost.
    assert!(r.copy_ns > 0.0 && r.transfer_ns == 0.0);
    assert!((us(r.map_ns) - 4.0).abs() < 1e-6 && (us(r.tracker_ns) - 5.0).abs() < 1e-6 && (us(r.replay_ns) - 5.0).abs() < 1e-6);
    let sum = r.fetch_ns
        + r.block_ns
        + r.fault_ns
        + r.first_touch_ns
        + r.unmap_ns
        + r.alloc_ns
        + r.zero_ns
        + r.push_ns
        + r.transfer_ns
        + r.map_ns
        + r.tracker_ns
        + r.replay_ns;
    assert!((sum - (r.end_ns - r.start_ns)).abs() < 1e-3, "{sum} vs {}", r.end_ns - r.start_ns);
    assert!((sum - r.stages_ns()).abs() < 1e-3, "stages_ns sums the same columns");
    assert_eq!(u.batch_done(end, &mut res), (Next::Nothing, true));
    // Block 0 again (page 3): no first touch, no unmap (already unmapped), no allocation.
    u.raise(fault(3, 0));
    let Next::BatchDone(end2) = u.service(end, &mut link, &mut res) else { panic!() };
    let r = u.records.as_ref().unwrap()[1].clone();
    assert_eq!((r.first_touch_ns, r.unmap_ns, r.alloc_ns), (0.0, 0.0, 0.0));
    // summary.json's per-stage totals are the finished batches' stage columns summed, as uvm.time_ns
    // their times: the batch in service is left out until it ends (before 2026-12 it was counted at once).
    for finish in [false, true] {
        if finish {
            u.batch_done(end2, &mut res);
        }
        let mut m = Metrics::default();
        u.export(&mut m, &res);
        let recs: Vec<BatchRecord> = u.records.as_ref().unwrap().iter().filter(|r| r.finished).cloned().collect();
        assert_eq!(recs.len(), if finish { 2 } else { 1 });
        let total = |f: fn(&BatchRecord) -> f64| recs.iter().map(f).sum::<f64>();
        for (name, want) in [
            ("fetch", total(|r| r.fetch_ns)),
            ("fault", total(|r| r.fault_ns)),
            ("unmap", total(|r| r.unmap_ns)),
            ("replay", total(|r| r.replay_ns)),
            ("push", total(|r| r.push_ns)),
            ("copy", total(|r| r.copy_ns)),
        ] {
            let got = m.get(&format!("uvm.stage.{name}_ns")).unwrap();
            assert!((got - want).abs() < 1e-3 && want > 0.0, "{name}: {got} vs {want}");
        }
        let time = total(|r| r.end_ns - r.start_ns);
        assert!((m.get("uvm.time_ns").unwrap() - time).abs() < 1e-3, "uvm.time_ns over the same batches");
    }
}

#[test]
fn the_fetch_merges_an_entry_into_its_utlbs_last_or_the_batchs_last() {
    let f = |vpn: u64, utlb: u32, write: bool| Fault { write, ..fault(vpn, utlb) };
    // Hand-checked, in buffer order (µTLB, page, access):
    //   (0, 5, R) kept; (0, 5, R) same as µTLB 0's last: merged; (1, 5, R) same page as the batch's last, no
    //   more intrusive: merged; (1, 5, W) µTLB 1 has no entry of its own yet, and a write is more intrusive than
    //   the batch's last read: kept; (0, 6, R) kept; (1, 5, R) µTLB 1's last is page 5: merged; (0, 5, R) µTLB 0's
    //   last is now 6, and so is the batch's last (the merged entry added none): kept; (0, 7, R) kept. 5 kept.
    let b = [f(5, 0, false), f(5, 0, false), f(5, 1, false), f(5, 1, true), f(6, 0, false), f(5, 1, false), f(5, 0, false), f(7, 0, false)];
    assert_eq!(fetch_coalesced(&b), 5);
    // (0, 5, R) kept; (1, 6, R) kept; (0, 5, R) the same as µTLB 0's last (not the batch's last): merged.
    assert_eq!(fetch_coalesced(&[f(5, 0, false), f(6, 1, false), f(5, 0, false)]), 2);
    // Duplicates that are not adjacent survive the fetch (the sort skips them later).
    assert_eq!(fetch_coalesced(&[f(1, 0, false), f(2, 1, false), f(1, 2, false), f(2, 3, false)]), 4);
    // A prefetch after a read of its page merges; a read after a prefetch does not (more intrusive).
    let pf = |vpn: u64, utlb: u32| Fault { prefetch: true, ..fault(vpn, utlb) };
    assert_eq!(fetch_coalesced(&[f(9, 0, false), pf(9, 1)]), 1);
    assert_eq!(fetch_coalesced(&[pf(9, 0), f(9, 1, false)]), 2);
    assert_eq!(fetch_coalesced(&[]), 0);
}

#[test]
fn a_fetched_entry_costs_its_read_and_only_distinct_pages_cost_the_per_fault_work() {
    let (mut u, mut link, mut res) = costed(ReplayPolicy::Batch, 8);
    // Page 1 three times from µTLB 0 (two merge at fetch), page 2 from µTLB 1, page 1 again from µTLB 1
    // (not adjacent to a page-1 entry: kept, then skipped after the sort).
    // Each from its own warp (a warp's repeated access to a page is one fault).
    for (warp, (vpn, utlb)) in [(1, 0), (1, 0), (1, 0), (2, 1), (1, 1)].into_iter().enumerate() {
        u.raise(Fault { warp: warp as u32, ..fault(vpn, utlb) });
    }
    let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
    let r = u.records.as_ref().unwrap()[0].clone();
    // Pre-processing: batch_us 10 + 5 entries read at 0.01; the service: 2 pages at 0.19.
    assert!((r.fetch_ns / 1000.0 - (10.0 + 5.0 * 0.01)).abs() < 1e-6, "{}", r.fetch_ns);
    assert!((r.fault_ns / 1000.0 - 2.0 * 0.19).abs() < 1e-6, "{}", r.fault_ns);
    assert_eq!((u.stats.fetched, u.stats.fetch_merged, u.stats.duplicates), (5, 2, 3));
    assert_eq!((r.fetched, r.fetch_merged, r.duplicates, r.unique), (5, 2, 3, 2), "the batch record");
    // A duplicate that survives the fetch costs per_duplicate_us (default 0): here one, page 1 from µTLB 1.
    let c = UvmConfig { per_duplicate_us: 1.0, replay_policy: ReplayPolicy::Batch, batch_size: 8, records: true, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    for (warp, (vpn, utlb)) in [(1, 0), (1, 0), (1, 0), (2, 1), (1, 1)].into_iter().enumerate() {
        u.raise(Fault { warp: warp as u32, ..fault(vpn, utlb) });
    }
    let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
    let r2 = u.records.as_ref().unwrap()[0].clone();
    assert!((r2.fetch_ns - r.fetch_ns - 1000.0).abs() < 1e-6, "{} vs {}", r2.fetch_ns, r.fetch_ns);
    // A stale fault (its page resident already) is no duplicate: batch_us 10 + 2 entries at 0.01, nothing more.
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    res.make_resident(3);
    u.raise(fault(3, 0));
    u.raise(Fault { warp: 1, ..fault(4, 1) });
    let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
    let r3 = u.records.as_ref().unwrap()[0].clone();
    assert_eq!((r3.duplicates, r3.fetch_merged), (0, 0));
    assert!((r3.fetch_ns / 1000.0 - (10.0 + 2.0 * 0.01)).abs() < 1e-6, "{}", r3.fetch_ns);
}

/// Two host-initialised blocks, 4 faults each, over a slow link (each block's 16 KiB copy takes ~160 µs,
/// longer than a block's CPU work): the batch record with copies asynchronous or not, and a given unmap cost.
fn two_block_batch(async_copies: bool, unmap_per_page_us: f64) -> BatchRecord {
    let c = UvmConfig {
        replay_policy: ReplayPolicy::Batch,
        batch_size: 8,
        records: true,
        first_touch_tail: 100.0,
        pma_chunk_blocks: 2,
        async_copies,
        unmap_per_page_us,
        ..UvmConfig::default()
    };
    let mut lc = Config::default().link;
    lc.bandwidth_gbps = 0.1;
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&lc), Residency::default());
    u.host_touch(0, 1024, 1);
    for vpn in [0, 1, 2, 3, 512, 513, 514, 515] {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
    u.records.as_ref().unwrap()[0].clone()
}

#[test]
fn async_copies_overlap_the_next_blocks_work_and_the_tracker_waits_for_the_rest() {
    let dur = |r: &BatchRecord| r.end_ns - r.start_ns;
    let cpu = |r: &BatchRecord| {
        r.fetch_ns + r.block_ns + r.fault_ns + r.first_touch_ns + r.unmap_ns + r.alloc_ns + r.zero_ns + r.push_ns + r.map_ns
    };
    let sync = two_block_batch(false, 0.163);
    let asy = two_block_batch(true, 0.163);
    for r in [&sync, &asy] {
        let sum = cpu(r) + r.transfer_ns + r.tracker_ns + r.replay_ns;
        assert!((sum - dur(r)).abs() < 1e-3, "stages sum to the batch: {sum} vs {}", dur(r));
        assert!(r.copy_ns > 2.0 * 150_000.0, "two ~160 µs copies: {}", r.copy_ns);
    }
    // Synchronous: each block waits for its copy; the tracker only costs its fixed 5 µs.
    assert!((sync.transfer_ns - sync.copy_ns).abs() < 1e-3 && (sync.tracker_ns - 5000.0).abs() < 1e-3);
    // Asynchronous: block 0's map and block 1's CPU work (8 µs, 4 faults × 0.19 µs, first touch ~15 µs, unmap
    // 1.6 + 512 × 0.163 µs, pushing its copy 1 + 4 × 0.05 µs)
    // run while block 0's copy is on the link, block 1's map while its own copy is; the copies follow each other
    // on the one host-to-device engine either way. So the batch is shorter by that CPU work (the first-touch draw
    // varies by about a µs around its median), and the tracker waits for what is left of the copies.
    assert_eq!(asy.transfer_ns, 0.0);
    let hidden = (2.0 + 8.0 + 4.0 * 0.19 + 15.0 + 1.6 + 512.0 * 0.163 + 1.0 + 4.0 * 0.05 + 2.0) * 1000.0;
    assert!((dur(&sync) - dur(&asy) - hidden).abs() < 2000.0, "overlap {} vs {hidden}", dur(&sync) - dur(&asy));
    assert!(asy.tracker_ns > 5000.0 + 100_000.0, "block 1's copy is still on the link: {}", asy.tracker_ns);
    // Cheaper unmapping (seed uvm-driver §6.3.1, Fig. 6.3): the batch is shorter, by less than the unmap saved, and
    // the tracker wait grows: the copies no longer hide behind the CPU work.
    let cheap = two_block_batch(true, 0.0);
    let saved = asy.unmap_ns - cheap.unmap_ns;
    assert!(saved > 150_000.0 && dur(&cheap) < dur(&asy) && dur(&asy) - dur(&cheap) < saved);
    assert!(cheap.tracker_ns > asy.tracker_ns + 50_000.0, "{} vs {}", cheap.tracker_ns, asy.tracker_ns);
}

/// cudaMemPrefetchAsync of two host-initialised 2 MiB blocks over a slow link (each copy ~21 ms): when the call
/// ends, with copies asynchronous or not.
fn two_block_prefetch(async_copies: bool) -> Ps {
    let c = UvmConfig { first_touch_tail: 100.0, pma_chunk_blocks: 2, async_copies, ..UvmConfig::default() };
    let mut lc = Config::default().link;
    lc.bandwidth_gbps = 0.1;
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&lc), Residency::default());
    u.host_touch(0, 1024, 1);
    let end = u.prefetch_async(0, 0..1024, &mut link, &mut res);
    assert_eq!((res.resident_pages(), u.async_prefetch.bytes_h2d), (1024, 4 << 20));
    end
}

#[test]
fn prefetch_async_pushes_each_blocks_copy_and_waits_once() {
    let (sync, asy) = (two_block_prefetch(false), two_block_prefetch(true));
    // Both copies run back to back on the one host-to-device engine either way (4 MiB at 0.1 GB/s: 41.9 ms).
    assert!(asy > 41_943_040_000, "{asy} ps");
    // Asynchronous: block 0's map and block 1's work (8 µs per block, first touch ~15 µs, pushing its copy
    // 1 + 512 × 0.05 µs, map 2 µs) run while block 0's copy is on the link; the call ends at the last copy plus the
    // tracker. (The host unmap, one 8 MiB step for both blocks, and the chunk allocation come before the first copy
    // either way.)
    let hidden = (2.0 + 8.0 + 15.0 + 1.0 + 512.0 * 0.05 + 2.0) * 1e6;
    let saved = (sync - asy) as f64;
    assert!((saved - hidden).abs() < 2e6, "saved {saved} ps, expected {hidden}");
}

#[test]
fn first_touch_costs_are_heavy_tailed_and_deterministic() {
    let c = UvmConfig { first_touch_us: 10.0, first_touch_tail: 1.5, ..UvmConfig::default() };
    let u = Uvm::new(&c, 2, 4, 7);
    let mut draws: Vec<Ps> = (0..10_000).map(|b| u.first_touch_cost(b)).collect();
    assert_eq!(draws[..5], (0..5).map(|b| Uvm::new(&c, 2, 4, 7).first_touch_cost(b)).collect::<Vec<_>>()[..]);
    draws.sort_unstable();
    let median = draws[5000] as f64 / 1e6;
    let p99 = draws[9900] as f64 / 1e6;
    assert!((9.0..11.0).contains(&median), "median {median} µs");
    assert!(p99 > 8.0 * median, "a heavy tail: p99 {p99} µs");
    assert!(*draws.last().unwrap() <= 200_000_000, "capped at 20 x");
}

#[test]
fn block_policy_replays_after_each_block() {
    let (mut u, mut link, mut res) = costed(ReplayPolicy::Block, 8);
    for vpn in [1, 513, 1025] {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(e1) = u.service(0, &mut link, &mut res) else { panic!() };
    // The first block is mapped and replayed before the others are serviced.
    let (Next::BatchDone(e2), true) = u.batch_done(e1, &mut res) else { panic!() };
    assert!(res.is_resident(1) && !res.is_resident(513));
    let (Next::BatchDone(e3), true) = u.batch_done(e2, &mut res) else { panic!() };
    assert!(e3 > e2 && e2 > e1 && res.is_resident(513) && !res.is_resident(1025));
    let (next, replay) = u.batch_done(e3, &mut res);
    assert_eq!((next, replay, res.is_resident(1025)), (Next::Nothing, true, true));
    assert_eq!((u.stats.replays, u.records.as_ref().unwrap()[0].replays), (3, 3));
    u.check_invariants(&res).unwrap();
}

#[test]
fn fault_records_give_each_fault_its_outcome() {
    let c = UvmConfig { batch_size: 4, fault_records: true, fault_records_max: 6, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    res.make_resident(9);
    // µTLB 0: pages 5, 9 (resident: stale); µTLB 1: 5 (a duplicate across µTLBs), 6; then 7, 8 stay buffered.
    for (vpn, utlb) in [(5, 0), (9, 0), (5, 1), (6, 1), (7, 0), (8, 1)] {
        u.raise(fault(vpn, utlb));
    }
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    let _ = u.batch_done(end, &mut res); // batch-flush: 7 and 8 are flushed
    u.raise(fault(10, 0));
    let Next::BatchDone(_) = u.service(end, &mut link, &mut res) else { panic!() };
    let rows: Vec<(u64, Outcome, u64)> = u.fault_records.as_ref().unwrap().iter().map(|r| (r.page, r.outcome, r.batch)).collect();
    assert_eq!(
        rows,
        vec![
            (5, Outcome::Serviced, 0),
            (9, Outcome::Stale, 0),
            (5, Outcome::Duplicate, 0),
            (6, Outcome::Serviced, 0),
            (7, Outcome::Flushed, 0),
            (8, Outcome::Flushed, 0),
        ]
    );
    assert!(u.fault_records_dropped > 0, "the table keeps at most fault_records_max rows");
}

fn with(c: UvmConfig) -> (Uvm, Link, Residency) {
    let c = UvmConfig { records: true, first_touch_tail: 100.0, ..c };
    (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default())
}

#[test]
fn density_prefetch_migrates_the_64k_with_the_fault_and_counts_it() {
    let mut c = UvmConfig::default();
    c.prefetch.policy = PrefetchPolicy::Density;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 1024);
    u.host_touch(0, 1024, 1);
    u.raise(fault(1, 0));
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    let r = u.records.as_ref().unwrap()[0].clone();
    assert_eq!((r.unique, r.prefetched, r.bytes_h2d), (1, 15, 16 * 4096));
    assert!(!res.is_resident(5));
    u.batch_done(end, &mut res);
    assert!((0..16).all(|p| res.is_resident(p)) && !res.is_resident(16));
    assert_eq!((u.stats.prefetched, res.untouched_pages()), (15, 15));
    assert!(res.access(5));
    let mut m = Metrics::default();
    u.export(&mut m, &res);
    assert_eq!((m.get("uvm.prefetch.used"), m.get("uvm.prefetch.wasted")), (Some(1.0), Some(14.0)));
}

#[test]
fn zheng_policies_fill_the_transfer_set_after_the_demand_faults() {
    for (policy, want) in
        [(PrefetchPolicy::Sequential, vec![0, 1, 2, 3, 4, 5, 6]), (PrefetchPolicy::Locality, vec![101, 102, 103, 104, 105, 106, 107])]
    {
        let mut c = UvmConfig::default();
        c.prefetch.policy = policy;
        c.prefetch.transfer_set_pages = 8;
        let (mut u, mut link, mut res) = with(c);
        u.add_allocation(0, 2048);
        u.raise(fault(100, 0));
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        u.batch_done(end, &mut res);
        let got: Vec<u64> = (0..2048).filter(|&p| res.is_resident(p) && p != 100).collect();
        assert_eq!(got, want, "{policy:?}");
    }
    // Random: 7 distinct pages of the allocation.
    let mut c = UvmConfig::default();
    c.prefetch.policy = PrefetchPolicy::Random;
    c.prefetch.transfer_set_pages = 8;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 2048);
    u.raise(fault(100, 0));
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert_eq!((res.resident_pages(), u.stats.prefetched), (8, 7));
}

#[test]
fn sequential_prefetch_scans_an_evicted_block_again() {
    let mut c =
        UvmConfig { gpu_memory_bytes: ByteSize(4 << 20), pma_chunk_blocks: 64, replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
    (c.prefetch.policy, c.prefetch.transfer_set_pages) = (PrefetchPolicy::Sequential, 8);
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 4 * 512);
    // Block 0 resident (zero-filled by a prefetch call): the scan passes it.
    let mut t = u.prefetch_async(0, 0..512, &mut link, &mut res);
    let mut batch = |u: &mut Uvm, vpn: u64, res: &mut Residency| {
        u.raise(Fault { time: t, ..fault(vpn, 0) });
        let Next::BatchDone(end) = u.service(t, &mut link, res) else { panic!() };
        u.batch_done(end, res);
        t = end;
    };
    // Fault on 1000 (block 1): 7 sequential pages from 0 skip block 0: 512..519; the scan stops at 519.
    batch(&mut u, 1000, &mut res);
    assert_eq!(((512..519).all(|p| res.is_resident(p)), u.seq_cursor), (true, 519));
    // Fault on 1030 (block 2): the set 519..526 is in block 1, so block 0 (resident first, not in the batch) is
    // evicted, and the scan goes back to its start.
    batch(&mut u, 1030, &mut res);
    assert_eq!((u.stats.evictions, u.seq_cursor), (1, 0));
    // Fault on 1031: the set is block 0's pages 0..7 again.
    batch(&mut u, 1031, &mut res);
    assert!((0..7).all(|p| res.is_resident(p)) && !res.is_resident(7));
}

#[test]
fn a_full_gpu_evicts_the_oldest_block_copies_it_back_and_restarts() {
    let c =
        UvmConfig { gpu_memory_bytes: ByteSize(4 << 20), pma_chunk_blocks: 64, replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 4 * 512);
    u.host_touch(0, 4 * 512, 1);
    assert_eq!(u.capacity_chunks(), 2);
    for vpn in [1, 2, 513] {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert_eq!(u.allocated_chunks, 2, "one allocator call, clamped to the capacity");
    assert!(u.full, "both chunks taken");
    u.raise(Fault { time: end, ..fault(1025, 0) });
    let Next::BatchDone(end2) = u.service(end, &mut link, &mut res) else { panic!() };
    // Block 0 (resident first) goes: its two pages back to the host, its translations shot down.
    assert_eq!((u.stats.evictions, u.stats.pages_evicted, u.stats.bytes_d2h), (1, 2, 2 * 4096));
    assert_eq!(u.shootdowns, vec![0]);
    assert!(!res.is_resident(1) && !res.is_resident(2) && res.is_resident(513));
    let r = u.records.as_ref().unwrap()[1].clone();
    assert_eq!((r.evictions, r.pages_evicted, r.bytes_d2h, r.alloc_ns), (1, 2, 8192, 0.0));
    assert!(r.evict_ns > 10_000.0, "evict_us plus the copy: {}", r.evict_ns);
    assert!((r.block_ns - 16_000.0).abs() < 1e-6, "the block's service restarts after the eviction");
    assert!((r.stages_ns() - (r.end_ns - r.start_ns)).abs() < 1e-3);
    u.batch_done(end2, &mut res);
    u.check_invariants(&res).unwrap();
    // Block 0 again: block 1 goes; page 1 comes back from the host (a copy, not a zero-fill), no CPU unmap.
    u.raise(Fault { time: end2, ..fault(1, 0) });
    let Next::BatchDone(_) = u.service(end2, &mut link, &mut res) else { panic!() };
    let r = u.records.as_ref().unwrap()[2].clone();
    assert_eq!((r.evictions, r.bytes_h2d, r.zero_ns, r.unmap_ns, r.first_touch_ns), (1, 4096, 0.0, 0.0, 0.0));
    assert_eq!(u.shootdowns, vec![0, 1]);
    assert!(res.resident_pages() <= 2 * 512);
}

#[test]
fn eviction_policies_choose_their_victims() {
    // Blocks 0, 1 resident (0 first); block 0 serviced again; then block 2 needs room.
    for (policy, victim) in [(EvictionPolicy::Driver, 0), (EvictionPolicy::Lru, 1), (EvictionPolicy::Lfu, 1)] {
        let c = UvmConfig {
            gpu_memory_bytes: ByteSize(4 << 20),
            replay_policy: ReplayPolicy::Batch,
            eviction: EvictionConfig { policy, ..EvictionConfig::default() },
            ..UvmConfig::default()
        };
        let (mut u, mut link, mut res) = with(c);
        let mut t = 0;
        for vpn in [1, 513, 2, 1025] {
            u.raise(Fault { time: t, ..fault(vpn, 0) });
            let Next::BatchDone(end) = u.service(t, &mut link, &mut res) else { panic!() };
            u.batch_done(end, &mut res);
            t = end;
        }
        assert_eq!(u.shootdowns, vec![victim], "{policy:?}");
    }
}

#[test]
fn a_block_the_host_took_back_is_evicted_before_older_resident_ones() {
    // Two chunks: blocks 0 then 1 resident; the host takes block 1's page back (UNUSED); block 2 then
    // evicts block 1, with nothing to copy, not block 0, the head of USED.
    let c = UvmConfig { gpu_memory_bytes: ByteSize(4 << 20), replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = with(c);
    let mut t = 0;
    for vpn in [1, 513] {
        u.raise(Fault { time: t, ..fault(vpn, 0) });
        let Next::BatchDone(end) = u.service(t, &mut link, &mut res) else { panic!() };
        u.batch_done(end, &mut res);
        t = end;
    }
    t = u.host_access(t, 513..514, false, 1, &mut link, &mut res);
    assert!(!res.is_resident(513));
    u.shootdowns.clear(); // the host access's own (the world takes them)
    let d2h = u.stats.bytes_d2h;
    u.raise(Fault { time: t, ..fault(1025, 0) });
    let Next::BatchDone(end) = u.service(t, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert_eq!(u.shootdowns, vec![1], "the UNUSED block goes first");
    assert_eq!((u.stats.evictions, u.stats.bytes_d2h - d2h), (1, 0), "nothing left to copy back");
    assert!(res.is_resident(1) && res.is_resident(1025));
    u.check_invariants(&res).unwrap();
}

#[test]
fn a_batch_larger_than_gpu_memory_defers_blocks() {
    let c = UvmConfig { gpu_memory_bytes: ByteSize(2 << 20), records: true, fault_records: true, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = with(c);
    u.raise(fault(1, 0));
    u.raise(fault(513, 0));
    u.raise(fault(514, 0));
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert_eq!((u.stats.deferred_blocks, res.refault_epoch, res.is_resident(1), res.is_resident(513)), (1, 1, true, false));
    // One page serviced (unique), two deferred: the deferred block's pages are not counted as serviced
    // (before 2026-12: unique 3), in the metric, the batch row and the faults table alike.
    assert_eq!((u.stats.unique, u.stats.deferred_pages, res.resident_pages()), (1, 2, 1));
    let r = &u.records.as_ref().unwrap()[0];
    assert_eq!((r.unique, r.deferred), (1, 2));
    let outcomes: Vec<(u64, Outcome)> = u.fault_records.as_ref().unwrap().iter().map(|f| (f.page, f.outcome)).collect();
    assert_eq!(outcomes, vec![(1, Outcome::Serviced), (513, Outcome::Deferred), (514, Outcome::Deferred)]);
    u.check_invariants(&res).unwrap();
}
/// The polled model on a link with no latency and 16 GB/s (a 4 KiB page takes 256 ns),
/// every page host-resident, 4 µTLBs.
fn polled(limit: u32, prefetch: PrefetchConfig) -> (Uvm, Link, Residency) {
    polled_with(UvmConfig { utlb_fault_limit: limit, prefetch, ..UvmConfig::default() })
}

fn polled_with(c: UvmConfig) -> (Uvm, Link, Residency) {
    let c = UvmConfig { cost_model: CostModel::Polled, fault_latency_us: 20.0, ..c };
    let mut link_cfg = Config::default().link;
    (link_cfg.latency_ns, link_cfg.bandwidth_gbps) = (0.0, 16.0);
    let mut u = Uvm::new(&c, 4, 4, 0);
    u.add_allocation(0, POLLED_PAGES);
    u.host_touch(0, POLLED_PAGES, 1);
    (u, Link::new(&link_cfg), Residency::default())
}

fn fault_at(time: Ps, vpn: u64, utlb: u32) -> Fault {
    Fault { time, ..fault(vpn, utlb) }
}

/// Run the polled handler's events in time order until none is left; returns when each page became resident.
fn drain(u: &mut Uvm, link: &mut Link, res: &mut Residency) -> Vec<(u64, Ps)> {
    let mut landed = vec![];
    let mut queue: Vec<Next> = u.events.drain(..).collect();
    let mut steps = 0;
    while let Some(i) = (0..queue.len()).min_by_key(|&i| match queue[i] {
        Next::Service(t) | Next::BatchDone(t) => (t, matches!(queue[i], Next::Service(_))),
        Next::Nothing => (0, false),
    }) {
        steps += 1;
        assert!(steps <= 100_000, "the handler's events go on for ever");
        let next = match queue.swap_remove(i) {
            Next::Service(t) => u.service(t, link, res),
            Next::BatchDone(t) => {
                let before: Vec<u64> = (0..POLLED_PAGES).filter(|&p| res.is_resident(p)).collect();
                assert_eq!(u.batch_done(t, res), (Next::Nothing, true));
                landed.extend((0..POLLED_PAGES).filter(|&p| res.is_resident(p) && before.binary_search(&p).is_err()).map(|p| (p, t)));
                queue.extend(retry(u, 0).into_iter().filter(|n| *n != Next::Nothing));
                Next::Nothing
            }
            Next::Nothing => Next::Nothing,
        };
        queue.extend(std::iter::once(next).filter(|n| *n != Next::Nothing));
        queue.append(&mut u.events);
        u.check_invariants(res).unwrap();
    }
    landed
}

const PAGE_PS: Ps = 256_000; // 4 KiB at 16 GB/s
const POLLED_PAGES: u64 = 64 * 512;

fn near(got: Ps, want: Ps) -> bool {
    got.abs_diff(want) <= 2_000 // the link's bandwidth timeline rounds to a few ns
}

#[test]
fn polled_faults_overlap_each_taking_its_latency_from_its_arrival() {
    let (mut u, mut link, mut res) = polled(16, PrefetchConfig::default());
    assert_eq!(u.raise(fault_at(0, 1, 0)), Next::Nothing, "events go through `events`");
    u.raise(fault_at(5_000_000, 600, 1));
    let landed = drain(&mut u, &mut link, &mut res);
    // 20 µs after each arrival, then one page over the link: not 40 µs for the second (a batch later).
    assert_eq!(landed.len(), 2);
    assert!(landed[0].0 == 1 && near(landed[0].1, 20_000_000 + PAGE_PS), "{landed:?}");
    assert!(landed[1].0 == 600 && near(landed[1].1, 25_000_000 + PAGE_PS), "{landed:?}");
    assert_eq!((u.stats.unique, u.stats.batches, u.stats.replays), (2, 2, 2));
}

#[test]
fn polled_faults_arriving_together_queue_on_the_link() {
    let (mut u, mut link, mut res) = polled(16, PrefetchConfig::default());
    // 64 faults 1 ns apart, in 64 VA blocks: 64 rounds, whose pages share the link's bandwidth.
    for k in 0..64u64 {
        u.raise(fault_at(k * 1000, k * 512, (k % 4) as u32));
    }
    let landed = drain(&mut u, &mut link, &mut res);
    assert_eq!(landed.len(), 64);
    // Loaded latency: the k-th page waits for the k before it (the link's bandwidth timeline
    // has buckets of 2 µs, inside which two copy engines may overlap).
    let slack = 2_100_000;
    for (k, &(page, t)) in landed.iter().enumerate() {
        assert_eq!(page, k as u64 * 512);
        let queued = 20_000_000 + (k as Ps + 1) * PAGE_PS;
        assert!(t + slack >= queued && t <= queued + slack, "page {k} at {t}");
    }
}

#[test]
fn polled_mshr_limit_nacks_and_replays_after_a_fault_is_serviced() {
    let (mut u, mut link, mut res) = polled(1, PrefetchConfig::default());
    u.raise(fault_at(0, 1, 0));
    u.raise(fault_at(0, 2, 0)); // over the µTLB's one far-fault MSHR: held, raised when page 1 lands
    u.raise(fault_at(0, 3, 1)); // another µTLB: not held
    assert_eq!((u.stats.throttled, u.parked()), (1, 1));
    let landed = drain(&mut u, &mut link, &mut res);
    let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
    // Pages 1 and 3 reach the handler together: one round, one copy of their VA block.
    assert!(near(when(1), 20_000_000 + 2 * PAGE_PS) && when(3) == when(1), "{landed:?}");
    // Page 2's fault is retried when page 1's flight lands (after the 1 µs replay latency), then takes its 20 µs.
    assert!(near(when(2), when(1) + 1_000_000 + 20_000_000 + PAGE_PS), "{landed:?}");
}

#[test]
fn polled_fault_on_a_page_in_flight_waits_for_that_flight_and_blocks_its_utlb_until_then() {
    // Without merging, the second µTLB's fault waits out its own latency before it finds the flight.
    let (mut u, mut link, mut res) = polled_with(UvmConfig { merge_far_faults: false, ..UvmConfig::default() });
    u.raise(fault_at(0, 7, 0));
    u.raise(fault_at(100_000, 7, 1)); // the same page from another µTLB, 100 ns later
                                      // Poll at 20 µs: page 7 goes out, landing at 20.256 µs.
    let Next::BatchDone(end) = u.service(20_000_000, &mut link, &mut res) else { panic!() };
    u.events.clear();
    // Poll at 20.1 µs: page 7 is crossing the link; the fault joins that flight (nothing sent twice).
    let bytes = link_bytes(&link);
    u.service(20_100_000, &mut link, &mut res);
    assert_eq!(link_bytes(&link), bytes);
    assert_eq!(u.outstanding, vec![1, 1, 0, 0]);
    // The empty round of the second poll lands first: µTLB 1 still waits.
    let (_, replay) = u.batch_done(20_100_000, &mut res);
    assert!(replay);
    assert_eq!(u.take_resumed(), Some(vec![]));
    u.batch_done(end, &mut res);
    assert!(res.is_resident(7));
    assert_eq!((u.take_resumed(), u.outstanding.clone()), (Some(vec![0, 1]), vec![0, 0, 0, 0]));
    u.check_invariants(&res).unwrap();
}

#[test]
fn a_merged_fault_need_not_take_its_utlb_s_mshr() {
    for take in [true, false] {
        let (mut u, mut link, mut res) =
            polled_with(UvmConfig { utlb_fault_limit: 1, merged_faults_take_mshr: take, ..UvmConfig::default() });
        u.raise(fault_at(0, 7, 0));
        // Page 7 again, from µTLB 1: merges into µTLB 0's service.
        u.raise(fault_at(10_000_000, 7, 1));
        // µTLB 1's own far fault. Taking the MSHR: page 9 is held until page 7 lands (20.256 µs), retried
        // 1 µs later, lands at 41.512 µs. Not taking it: page 9 goes at once, is polled at 30 µs and lands
        // at 30.256 µs.
        u.raise(fault_at(10_000_000, 9, 1));
        assert_eq!(u.stats.throttled, take as u64);
        assert_eq!((u.outstanding.clone(), u.uncounted.len()), (vec![1, 1, 0, 0], !take as usize));
        u.check_invariants(&res).unwrap();
        let landed = drain(&mut u, &mut link, &mut res);
        let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
        assert!(near(when(7), 20_000_000 + PAGE_PS), "{landed:?}");
        assert!(near(when(9), if take { 41_512_000 } else { 30_000_000 + PAGE_PS }), "take {take}: {landed:?}");
        assert_eq!((u.stats.joined, u.stats.unique, u.stats.raw), (1, 2, 3));
        assert!(u.uncounted.is_empty() && u.outstanding == vec![0, 0, 0, 0]);
        u.check_invariants(&res).unwrap();
    }
}

#[test]
fn polled_faults_of_other_utlbs_merge_into_the_service_of_their_page() {
    for merge in [true, false] {
        let (mut u, mut link, mut res) = polled_with(UvmConfig { utlb_fault_limit: 1, merge_far_faults: merge, ..UvmConfig::default() });
        u.raise(fault_at(0, 7, 0));
        u.raise(fault_at(10_000_000, 7, 1)); // page 7 again, from µTLB 1, 10 µs later: its one MSHR
        u.raise(fault_at(10_000_000, 9, 1)); // held (Nack) until that MSHR frees
        let landed = drain(&mut u, &mut link, &mut res);
        let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
        assert!(near(when(7), 20_000_000 + PAGE_PS), "{landed:?}");
        // Merged: µTLB 1's fault ends when page 7 lands (20.256 µs), so page 9 is retried 1 µs later and
        // lands 20 µs + a page after that: 41.512 µs. Not merged: it waits out its own 20 µs (30 µs), then
        // finds page 7 resident; page 9 is retried at 31 µs and lands at 51.256 µs.
        let (nine, mean_ns) =
            if merge { (41_512_000, (20_256 + 10_256 + 20_256) / 3) } else { (51_256_000, (20_256 + 20_000 + 20_256) / 3) };
        assert!(near(when(9), nine), "merge {merge}: {landed:?}");
        assert!((u.stats.far_fault.mean_ns() - mean_ns as f64).abs() < 5.0, "{}", u.stats.far_fault.mean_ns());
        assert_eq!((u.stats.joined, u.stats.unique, u.stats.raw), (merge as u64, 2, 3));
    }
}

#[test]
fn polled_fault_on_a_page_crossing_the_link_joins_that_flight() {
    let (mut u, mut link, mut res) = polled(16, PrefetchConfig::default());
    u.raise(fault_at(0, 7, 0));
    let Next::BatchDone(end) = u.service(20_000_000, &mut link, &mut res) else { panic!() };
    assert!(near(end, 20_000_000 + PAGE_PS));
    // µTLB 1 faults on page 7 at 20.1 µs, while it crosses the link: no buffer entry, no second copy.
    u.raise(fault_at(20_100_000, 7, 1));
    assert_eq!((u.buffer.len(), u.outstanding.clone(), u.stats.joined), (0, vec![1, 1, 0, 0], 1));
    u.batch_done(end, &mut res);
    assert_eq!((u.take_resumed(), u.outstanding.clone()), (Some(vec![0, 1]), vec![0, 0, 0, 0]));
    assert_eq!((u.stats.unique, link_bytes(&link)), (1, 4096));
    u.check_invariants(&res).unwrap();
}

fn link_bytes(link: &Link) -> u64 {
    let mut m = Metrics::default();
    link.export(&mut m, 1);
    m.get("link.h2d.bytes").unwrap() as u64
}

/// Zheng's locality transfer sets, scaled down: 4 pages per set from a window of 6.
fn locality_sets_of_4(demand_waits_for_set: bool) -> PrefetchConfig {
    PrefetchConfig {
        policy: PrefetchPolicy::Locality,
        transfer_set_pages: 4,
        window_pages: 6,
        demand_waits_for_set,
        ..PrefetchConfig::default()
    }
}

#[test]
fn polled_transfer_sets_fill_each_interval_after_its_demand_pages() {
    for (wait, per_copy) in [(true, true), (false, true), (true, false), (false, false)] {
        let (mut u, mut link, mut res) = polled(16, locality_sets_of_4(wait));
        u.land_per_copy = per_copy;
        u.allocs = [(0, 14)].into_iter().collect();
        u.raise(fault_at(0, 5, 0));
        u.raise(fault_at(3_000_000, 9, 1));
        let landed = drain(&mut u, &mut link, &mut res);
        let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
        // Interval 1 is 0-20 µs (it starts with the first fault): page 5 goes out at 20 µs with 3
        // prefetches from the window after it (6, 7, 8). Per copy, page 5 crosses alone first and lands,
        // then the 3 prefetches; else the block's 4 pages are one copy that lands at once.
        let demand_lands = if per_copy { PAGE_PS } else { 4 * PAGE_PS };
        assert!(near(when(5), 20_000_000 + demand_lands), "{landed:?}");
        for p in [6, 7, 8] {
            assert!(near(when(p), 20_000_000 + 4 * PAGE_PS), "{p}: {landed:?}");
        }
        // Page 9 (faulted at 3 µs) reaches the handler at 23 µs, in interval 2 (20-40 µs), whose set has
        // it and 3 prefetches after it. Waiting for the set, it goes out with them at 40 µs (first, per
        // copy); not waiting, alone at 23 µs, and the 3 prefetches at 40 µs.
        if wait {
            assert!(near(when(9), 40_000_000 + demand_lands), "{landed:?}");
            for p in [10, 11, 12] {
                assert!(near(when(p), 40_000_000 + 4 * PAGE_PS), "{p}: {landed:?}");
            }
        } else {
            assert!(near(when(9), 23_000_000 + PAGE_PS), "{landed:?}");
            for p in [10, 11, 12] {
                assert!(near(when(p), 40_000_000 + 3 * PAGE_PS), "{p}: {landed:?}");
            }
        }
        // Interval 3, no fault: the window after 9 has 13 left, then the sequential fill (0, 1, 2);
        // interval 4: 3 and 4, the last pages; interval 5 finds nothing and the intervals stop.
        for p in [13, 0, 1, 2] {
            assert!(near(when(p), 60_000_000 + 4 * PAGE_PS), "{p}: {landed:?}");
        }
        for p in [3, 4] {
            assert!(near(when(p), 80_000_000 + 2 * PAGE_PS), "{p}: {landed:?}");
        }
        assert_eq!((res.resident_pages(), u.stats.prefetched, u.stats.unique), (14, 12, 2));
        assert!(u.events.is_empty() && u.poll_at.is_none() && u.interval_end.is_none());
        // Far-fault latency: page 5's 20 µs + its copy; page 9's 37 µs waiting for its set + its copy,
        // else 20 µs + a page.
        let nine = if wait { 37_000_000 + demand_lands } else { 20_000_000 + PAGE_PS };
        let mean = (20_000_000 + demand_lands + nine) as f64 / 2e3;
        assert!((u.stats.far_fault.mean_ns() - mean).abs() < 5.0, "wait {wait}: {} vs {mean}", u.stats.far_fault.mean_ns());
    }
}

#[test]
fn polled_demand_pages_cross_before_the_prefetches_of_lower_blocks() {
    // A demand page in block 1; the sequential set fills from page 0, in block 0. Per copy, the
    // demand page crosses first and its fault ends then; as one round, block 0's copy goes first
    // (VA order) and every page lands with the last copy.
    for per_copy in [true, false] {
        let prefetch = PrefetchConfig { policy: PrefetchPolicy::Sequential, transfer_set_pages: 4, ..PrefetchConfig::default() };
        let (mut u, mut link, mut res) = polled(16, prefetch);
        u.land_per_copy = per_copy;
        u.allocs = [(0, 1024)].into_iter().collect();
        u.raise(fault_at(0, 600, 0));
        let landed = drain(&mut u, &mut link, &mut res);
        let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
        let demand = if per_copy { 20_000_000 + PAGE_PS } else { 20_000_000 + 4 * PAGE_PS };
        assert!(near(when(600), demand), "{per_copy}: {landed:?}");
        for p in [0, 1, 2] {
            assert!(near(when(p), 20_000_000 + 4 * PAGE_PS), "{p}: {landed:?}");
        }
        assert!((u.stats.far_fault.mean_ns() - demand as f64 / 1e3).abs() < 5.0, "{}", u.stats.far_fault.mean_ns());
        // Each round's time is counted once, to its last landing.
        assert_eq!(u.stats.batch.count(), u.stats.batches);
    }
}

#[test]
fn polled_prefetch_stops_when_gpu_memory_is_full_unless_demand_faults_come() {
    // GPU memory of one 2 MiB chunk for the 64 blocks, or of 4 pages counted at 4 KiB (whose chunk
    // counters never fill: the handler used to go on prefetching every interval, each prefetch
    // evicting a page, and the polled oversubscribed runs thrashed on it). A demand fault in another
    // block then evicts block 0 (one chunk), or 4 pages.
    for page_granular in [false, true] {
        let prefetch = PrefetchConfig { policy: PrefetchPolicy::Locality, transfer_set_pages: 4, ..PrefetchConfig::default() };
        let (mut u, mut link, mut res) = polled(16, prefetch);
        if page_granular {
            u.page_evict = Some(Box::new(PageMemory {
                capacity: 4,
                pages: Pages::new(EvictionPolicy::Lru, 0),
                pinned: FxHashSet::default(),
                allocated: 0,
            }));
        } else {
            u.capacity_chunks = 1;
        }
        u.raise(fault_at(0, 0, 0));
        drain(&mut u, &mut link, &mut res);
        // Interval 1: page 0 and 3 prefetches fill the memory; interval 2 finds it full and no demand: no
        // prefetch, and the intervals stop (they would cycle the footprint through it).
        assert_eq!((res.resident_pages(), u.stats.prefetched, u.stats.evictions), (4, 3, 0));
        assert!(u.interval_end.is_none() && u.events.is_empty());
        // A demand fault still brings its window.
        u.raise(fault_at(100_000_000, 600, 1));
        drain(&mut u, &mut link, &mut res);
        assert_eq!((u.stats.evictions, u.stats.prefetched), (if page_granular { 4 } else { 1 }, 6));
        assert!((600..604).all(|p| res.is_resident(p)) && res.resident_pages() == 4);
    }
}

#[test]
fn demand_pages_wait_for_sets_only_while_sets_are_built() {
    // GPU memory (one chunk) fills in the first interval. Then pages 600 and 1200 (two other VA blocks)
    // fault at 100 and 105 µs.
    // Prefetching on (keep): a set is built every interval, so 1200 (at the handler at 125 µs) waits for its
    // interval's end, 140 µs. Stopped once full: no set, 1200 goes out as its 20 µs run out.
    for (when_full, waits) in [(WhenFull::Keep, true), (WhenFull::Stop, false)] {
        let prefetch = PrefetchConfig { policy: PrefetchPolicy::Locality, transfer_set_pages: 4, when_full, ..PrefetchConfig::default() };
        let (mut u, mut link, mut res) = polled(16, prefetch);
        u.capacity_chunks = 1;
        u.raise(fault_at(0, 0, 0));
        drain(&mut u, &mut link, &mut res);
        u.raise(fault_at(100_000_000, 600, 1));
        u.raise(fault_at(105_000_000, 1200, 2));
        let landed = drain(&mut u, &mut link, &mut res);
        let when = landed.iter().find(|l| l.0 == 1200).unwrap().1;
        if waits {
            assert!(when > 140_000_000, "{when_full:?}: {landed:?}");
        } else {
            assert!((125_000_000..135_000_000).contains(&when), "{when_full:?}: {landed:?}");
        }
    }
}

#[test]
fn polled_copies_of_a_full_round_evict_without_waiting_for_each_other() {
    // 4 pages of GPU memory, full; a 1 µs link. One round brings pages of 3 blocks, each evicting a page.
    for per_copy in [true, false] {
        let (mut u, _, mut res) = polled(16, PrefetchConfig::default());
        let mut link = Link::new(&{
            let mut l = Config::default().link;
            (l.latency_ns, l.bandwidth_gbps) = (1000.0, 16.0);
            l
        });
        u.land_per_copy = per_copy;
        u.page_evict = Some(Box::new(PageMemory {
            capacity: 4,
            pages: Pages::new(EvictionPolicy::Lru, 0),
            pinned: FxHashSet::default(),
            allocated: 0,
        }));
        for (i, p) in [0, 1, 2, 3].into_iter().enumerate() {
            u.raise(fault_at(i as Ps * 1_000_000, p, 0));
        }
        drain(&mut u, &mut link, &mut res);
        assert_eq!((res.resident_pages(), u.stats.evictions), (4, 0));
        for (i, p) in [600, 1200, 1800].into_iter().enumerate() {
            u.raise(fault_at(100_000_000, p, i as u32));
        }
        let landed = drain(&mut u, &mut link, &mut res);
        assert_eq!(u.stats.evictions, 3);
        let when = |p: u64| landed.iter().find(|l| l.0 == p).unwrap().1;
        // The handler takes the three at 120 µs. A page's copy takes 256 ns, and 1 µs more to land.
        let want = if per_copy {
            // Evictions back to back on the device-to-host engine (in at 121.256, 121.512, 121.768 µs); each
            // block's copy after its own eviction, queued on the host-to-device engine.
            [122_512_000, 122_768_000, 123_024_000]
        } else {
            // Each block's eviction starts when the previous one has landed (121.256, 122.512, 123.768 µs),
            // and the round lands with its last copy.
            [125_024_000; 3]
        };
        for (p, w) in [600, 1200, 1800].into_iter().zip(want) {
            assert!(near(when(p), w), "{per_copy}: {landed:?}");
        }
    }
}

#[test]
fn polled_sets_fill_only_what_the_link_has_free_once_memory_is_full() {
    // 8 pages of GPU memory, sets of 8, a window of 16. Page 0's interval fills memory: 0 and 7 prefetches.
    // Then page 600 faults at 100 µs; at its interval's end (120 µs) the link still has 5.5 pages to carry.
    // Counting them, the set has room for 8 - 1 - 5 = 2 prefetches (601, 602); by its demand page alone, 7.
    for (link_room, backlog, want) in [(true, 5.5, 2), (false, 5.5, 7), (true, 0.0, 7)] {
        let prefetch = PrefetchConfig {
            policy: PrefetchPolicy::Locality,
            transfer_set_pages: 8,
            window_pages: 16,
            full_link_room: link_room,
            ..PrefetchConfig::default()
        };
        let (mut u, mut link, mut res) = polled(16, prefetch);
        u.page_evict = Some(Box::new(PageMemory {
            capacity: 8,
            pages: Pages::new(EvictionPolicy::Lru, 0),
            pinned: FxHashSet::default(),
            allocated: 0,
        }));
        u.raise(fault_at(0, 0, 0));
        drain(&mut u, &mut link, &mut res);
        assert_eq!((res.resident_pages(), u.stats.prefetched, u.stats.evictions), (8, 7, 0));
        let at = 120_000_000;
        link.transfer(Dir::HostToDevice, (backlog * 4096.0) as u64, at, at);
        u.raise(fault_at(100_000_000, 600, 1));
        let landed = drain(&mut u, &mut link, &mut res);
        let got: Vec<u64> = landed.iter().map(|l| l.0).filter(|&p| p != 600).collect();
        assert_eq!(got, (601..601 + want).collect::<Vec<u64>>(), "link_room {link_room}, backlog {backlog}");
        assert_eq!((u.stats.prefetched, u.stats.pages_evicted), (7 + want, 1 + want), "link_room {link_room}, backlog {backlog}");
        assert!(res.is_resident(600) && res.resident_pages() == 8);
    }
}

/// Serve one fault on each of `vpns` in its own batch; returns the time after.
fn serve(u: &mut Uvm, link: &mut Link, res: &mut Residency, mut t: Ps, vpns: &[u64]) -> Ps {
    for &vpn in vpns {
        u.raise(Fault { time: t, ..fault(vpn, 0) });
        let Next::BatchDone(end) = u.service(t, link, res) else { panic!() };
        u.batch_done(end, res);
        t = end;
    }
    t
}

#[test]
fn page_granularity_evicts_single_pages_by_walk_recency() {
    // 8 pages of footprint at 2x oversubscription: 4 pages of GPU memory.
    for (policy, victim) in [(EvictionPolicy::Lru, 1), (EvictionPolicy::Driver, 0)] {
        let c = UvmConfig {
            oversubscription: 2.0,
            eviction: EvictionConfig { policy, granularity: EvictionGranularity::Page, ..EvictionConfig::default() },
            ..UvmConfig::default()
        };
        let (mut u, mut link, mut res) = with(c);
        res.keep_recency();
        u.add_allocation(0, 8);
        u.host_touch(0, 8, 1);
        let t = serve(&mut u, &mut link, &mut res, 0, &[0, 1, 2, 3]);
        assert!(u.full && u.stats.evictions == 0);
        // The GPU walks to page 0 again: LRU keeps it, the driver's FIFO does not care.
        assert!(res.access(0));
        serve(&mut u, &mut link, &mut res, t, &[4]);
        assert_eq!(u.shootdown_pages, vec![victim], "{policy:?}");
        assert_eq!((u.stats.evictions, u.stats.pages_evicted, u.stats.bytes_d2h), (1, 1, 4096));
        assert_eq!(u.shootdowns, Vec::<u64>::new(), "no block is shot down");
        assert!(!res.is_resident(victim) && res.is_resident(4) && res.resident_pages() == 4);
        assert!(u.cpu_resident(victim), "the evicted page is on the host");
        let r = u.records.as_ref().unwrap()[4].clone();
        assert_eq!((r.evictions, r.bytes_d2h, r.bytes_h2d), (1, 4096, 4096));
        let mut m = Metrics::default();
        u.export(&mut m, &res);
        assert_eq!(m.get("uvm.gpu_memory_bytes"), Some(4.0 * 4096.0));
        u.check_invariants(&res).unwrap();
    }
}

#[test]
fn when_full_stops_or_narrows_prefetching_once_memory_is_full() {
    // 64 pages at 4x oversubscription: 16 pages. Sequential transfer sets of 4 fill them in 4 batches.
    for (when_full, want) in [(WhenFull::Keep, vec![16, 17, 18]), (WhenFull::Stop, vec![]), (WhenFull::Locality, vec![21, 22])] {
        let mut c = UvmConfig {
            oversubscription: 4.0,
            eviction: EvictionConfig { granularity: EvictionGranularity::Page, ..EvictionConfig::default() },
            ..UvmConfig::default()
        };
        c.prefetch.policy = PrefetchPolicy::Sequential;
        c.prefetch.transfer_set_pages = 4;
        c.prefetch.window_pages = 2;
        c.prefetch.when_full = when_full;
        let (mut u, mut link, mut res) = with(c);
        u.add_allocation(0, 64);
        let t = serve(&mut u, &mut link, &mut res, 0, &[0, 4, 8]);
        assert!(!u.full && res.resident_pages() == 12);
        let t = serve(&mut u, &mut link, &mut res, t, &[12]);
        assert!(u.full && res.resident_pages() == 16 && u.stats.prefetched == 12, "{when_full:?}: warm-up prefetches");
        serve(&mut u, &mut link, &mut res, t, &[20]);
        let got: Vec<u64> = (16..64).filter(|&p| res.is_resident(p) && p != 20).collect();
        assert_eq!(got, want, "{when_full:?}");
        assert_eq!((u.stats.pages_evicted, res.resident_pages()), (1 + want.len() as u64, 16), "{when_full:?}");
    }
}

#[test]
fn locality_windows_count_the_resident_pages_they_skip_and_the_refaults_on_them() {
    // 64 pages at 4x oversubscription: 16 pages, evicted oldest first. Locality sets of 4, window 4.
    let mut c = UvmConfig {
        oversubscription: 4.0,
        eviction: EvictionConfig { granularity: EvictionGranularity::Page, policy: EvictionPolicy::Driver, ..EvictionConfig::default() },
        ..UvmConfig::default()
    };
    c.prefetch.policy = PrefetchPolicy::Locality;
    c.prefetch.transfer_set_pages = 4;
    c.prefetch.window_pages = 4;
    c.prefetch.when_full = WhenFull::Locality;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 64);
    // Pages 8..23 arrive (each fault brings the 3 after it): memory is full.
    let t = serve(&mut u, &mut link, &mut res, 0, &[8, 12, 16, 20]);
    assert!(u.full && (8..24).all(|p| res.is_resident(p)));
    assert_eq!(u.stats.window_skipped_resident, 0);
    // A fault on 6: its window 7..10 takes 7 and passes over 8, 9 and 10, still resident; 6 and 7 evict
    // the oldest, 8 and 9.
    let t = serve(&mut u, &mut link, &mut res, t, &[6]);
    assert!(res.is_resident(7) && !res.is_resident(8) && !res.is_resident(9));
    assert_eq!((u.stats.window_skipped_resident, u.stats.window_skipped_refaults), (3, 0));
    // 8 faults after its window passed it: a refault. Its window takes 9 (no longer counted as skipped),
    // passes over 10 (already counted), 11 and 12; 8 and 9 evict 10 and 11.
    let t = serve(&mut u, &mut link, &mut res, t, &[8]);
    assert!(res.is_resident(9) && !res.is_resident(10));
    assert_eq!((u.stats.window_skipped_resident, u.stats.window_skipped_refaults), (5, 1));
    // 10 was passed over too; 30 never was.
    serve(&mut u, &mut link, &mut res, t, &[10, 30]);
    assert_eq!(u.stats.window_skipped_refaults, 2);
    let mut m = Metrics::default();
    u.export(&mut m, &res);
    assert_eq!(m.get("uvm.prefetch.window_skipped_refaults"), Some(2.0));
}

#[test]
fn page_granularity_drops_prefetches_and_defers_what_finds_no_room() {
    // 2 pages of memory; a batch demanding 3 pages of one block: its first 2 go now, the third waits for the
    // next batch (since 5133a55; before, the whole block waited, and did at every batch).
    let mut c = UvmConfig {
        oversubscription: 4.0,
        eviction: EvictionConfig { granularity: EvictionGranularity::Page, ..EvictionConfig::default() },
        ..UvmConfig::default()
    };
    let (mut u, mut link, mut res) = with(c.clone());
    u.add_allocation(0, 8);
    for vpn in [0, 1, 2] {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert_eq!((u.stats.deferred_blocks, u.stats.deferred_pages, res.resident_pages(), res.refault_epoch), (0, 1, 2, 1));
    // A transfer set larger than memory: the demand page and one prefetch.
    c.prefetch.policy = PrefetchPolicy::Sequential;
    c.prefetch.transfer_set_pages = 4;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 8);
    serve(&mut u, &mut link, &mut res, 0, &[5]);
    assert_eq!((res.resident_pages(), u.stats.prefetched, u.stats.evictions), (2, 1, 0));
    assert!(res.is_resident(5) && res.is_resident(0));
    u.check_invariants(&res).unwrap();
}

/// A fault on a page crossing the link joins that copy at once only when a fault started the
/// page's service (the GMMU's far-fault MSHR for it notifies the other TLBs, seed paged-memory §3).
/// A page the handler sent as a prefetch has no such entry: the fault reaches the handler as any
/// other, after its 20 µs, and ends then (the page has landed), unless `merge_prefetched_faults`.
/// Locality sets of 4 in a window of 6: page 5 faults at 0 and goes out at 20 µs with 6, 7, 8; at
/// 20.1 µs µTLB 1 faults on page 5 (demand, landing at 20 µs + 1 page) and µTLB 2 on page 7
/// (prefetch, landing at 20 µs + 4 pages).
#[test]
fn polled_fault_on_a_prefetched_page_in_flight_goes_to_the_handler() {
    for merge_prefetched in [false, true] {
        let prefetch = locality_sets_of_4(false);
        let (mut u, mut link, mut res) =
            polled_with(UvmConfig { utlb_fault_limit: 16, prefetch, merge_prefetched_faults: merge_prefetched, ..UvmConfig::default() });
        u.allocs = [(0, 14)].into_iter().collect();
        u.raise(fault_at(0, 5, 0));
        // Run the handler up to the first set's copies, then fault on the pages in the air.
        while let Some(Next::Service(t)) = u.events.first().copied().filter(|n| matches!(n, Next::Service(t) if *t <= 20_000_000)) {
            u.events.remove(0);
            let next = u.service(t, &mut link, &mut res);
            u.events.push(next);
            u.events.retain(|n| *n != Next::Nothing);
        }
        u.raise(fault_at(20_100_000, 5, 1));
        u.raise(fault_at(20_100_000, 7, 2));
        assert_eq!(u.stats.joined, 1 + merge_prefetched as u64, "the demand page's fault joins; the prefetch's only if merged");
        drain(&mut u, &mut link, &mut res);
        // Far-fault latencies: page 5's first 20 µs + 1 page; its second from 20.1 µs to its landing;
        // page 7's to its landing (merged), else 20 µs (the handler takes it in at 40.1 µs, landed).
        let seven = if merge_prefetched { 20_000_000 + 4 * PAGE_PS - 20_100_000 } else { 20_000_000 };
        let mean = (20_000_000 + PAGE_PS + (20_000_000 + PAGE_PS - 20_100_000) + seven) as f64 / 3e3;
        assert!((u.stats.far_fault.mean_ns() - mean).abs() < 5.0, "{merge_prefetched}: {} vs {mean}", u.stats.far_fault.mean_ns());
        assert!(u.events.is_empty());
        u.check_invariants(&res).unwrap();
    }
}

/// A buffer of 3 entries, full with µTLB 0's pages 0..3; µTLB 0 holds 3 and 4, µTLB 1 holds 10 and 11. At the
/// replay the µTLBs retry side by side, one access each per round (3, 10, then 4), and each retry on its way
/// holds a buffer slot: after three retries the buffer (empty now) has no slot left, so 11 stays held.
#[test]
fn the_utlbs_retry_side_by_side_while_retries_hold_buffer_slots() {
    let c =
        UvmConfig { fault_buffer_entries: 3, batch_size: 3, replay_policy: ReplayPolicy::Batch, interrupt_us: 1.0, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    for (vpn, utlb) in [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (10, 1), (11, 1)] {
        u.raise(fault(vpn, utlb));
    }
    assert_eq!((u.stats.raw, u.stats.throttled, u.parked()), (3, 4, 4), "the ring is full after 3");
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    assert_eq!(u.batch_done(end, &mut res), (Next::Nothing, true));
    let retried: Vec<u64> = u.retries.iter().map(|f| f.vpn).collect();
    assert_eq!((retried, u.parked(), u.stats.retried), (vec![3, 10, 4], 1, 3));
    retry(&mut u, 0);
    assert_eq!(u.buffer.len(), 3, "the retries fill the ring again, no more");
    u.check_invariants(&res).unwrap();
}

/// The fetch reads PUT again only once it has taken every fault up to the PUT it read last
/// (fetch_fault_buffer_entries): pages 0..6 written at 0, PUT read at 0, batches of 4; page 20 is written
/// while the first batch is serviced. The second fetch takes 4 and 5 only; the third reads PUT again and takes 20.
#[test]
fn a_fetch_rereads_put_only_once_it_has_taken_every_fault_up_to_it() {
    let (mut u, mut link, mut res) = uvm(ReplayPolicy::Batch, 56);
    for vpn in 0..6 {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.raise(Fault { time: end / 2, ..fault(20, 0) });
    assert_eq!(u.batch_done(end, &mut res), (Next::Service(end), true));
    let Next::BatchDone(end2) = u.service(end, &mut link, &mut res) else { panic!() };
    assert_eq!((u.stats.fetched, u.buffer.iter().map(|f| f.vpn).collect::<Vec<_>>()), (6, vec![20]));
    assert_eq!(u.batch_done(end2, &mut res), (Next::Service(end2), true));
    let Next::BatchDone(_) = u.service(end2, &mut link, &mut res) else { panic!() };
    assert_eq!((u.stats.fetched, u.buffer.len()), (7, 0));
}

/// Batch-flush in the driver's order (fetch_after_replay_wait), max_batches_per_service 2, replay_us 5 µs,
/// interrupt 1 µs: a fetch after the replay wait that finds nothing ends the bottom half, so the next run
/// counts from zero; the run's second batch makes it yield: its next fetch waits for an interrupt too.
#[test]
fn ordered_batch_flush_yields_after_max_batches_and_an_empty_fetch_starts_a_new_run() {
    const US: Ps = crate::sim::PS_PER_US;
    let c = UvmConfig { batch_size: 4, max_batches_per_service: 2, interrupt_us: 1.0, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    assert_eq!(u.raise(fault(0, 0)), Next::Service(US));
    let Next::BatchDone(p1) = u.service(US, &mut link, &mut res) else { panic!() };
    assert_eq!(u.batch_done(p1, &mut res), (Next::Service(p1 + 5 * US), true), "run: 1 batch");
    assert_eq!(u.service(p1 + 5 * US, &mut link, &mut res), Next::Nothing, "empty: the run ends");
    let t = p1 + 10 * US;
    assert_eq!(u.raise(Fault { time: t, ..fault(1, 0) }), Next::Service(t + US));
    let Next::BatchDone(p2) = u.service(t + US, &mut link, &mut res) else { panic!() };
    assert_eq!(u.batch_done(p2, &mut res), (Next::Service(p2 + 5 * US), true), "a new run: 1 batch");
    u.raise(Fault { time: p2 + US, ..fault(2, 0) });
    let Next::BatchDone(p3) = u.service(p2 + 5 * US, &mut link, &mut res) else { panic!() };
    assert_eq!(u.batch_done(p3, &mut res), (Next::Service(p3 + 5 * US + US), true), "2 batches: wait + interrupt");
}

/// With a 1 ms per-SM throttle, SM 0's second fault is written at 1 ms. The first batch (well under 1 ms)
/// takes page 0 only; the fetch after the replay wait finds nothing written yet: the bottom half ends and the
/// fault written at 1 ms wakes it after its interrupt (1 µs).
#[test]
fn an_empty_fetch_waits_for_the_interrupt_of_a_fault_written_later() {
    const US: Ps = crate::sim::PS_PER_US;
    let c = UvmConfig { batch_size: 4, interrupt_us: 1.0, sm_fault_interval_ns: 1e6, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    u.raise(fault(0, 0));
    u.raise(fault(1, 0));
    assert_eq!(u.buffer.iter().map(|f| f.time).collect::<Vec<_>>(), vec![0, 1000 * US]);
    let Next::BatchDone(p1) = u.service(US, &mut link, &mut res) else { panic!() };
    assert!(p1 + 5 * US < 1000 * US, "{p1}");
    assert_eq!(u.batch_done(p1, &mut res), (Next::Service(p1 + 5 * US), true));
    assert_eq!(u.service(p1 + 5 * US, &mut link, &mut res), Next::Service(1000 * US + US));
    assert_eq!(u.stats.fetched, 1);
}

#[test]
fn the_per_fault_work_counts_faulted_pages_not_prefetched_ones() {
    let mut c = UvmConfig::default();
    c.prefetch.policy = PrefetchPolicy::Density;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 1024);
    u.host_touch(0, 1024, 1);
    u.raise(fault(1, 0));
    let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
    let r = u.records.as_ref().unwrap()[0].clone();
    // One faulted page (0.19 µs); its 15 prefetched neighbours cost no per-fault work.
    assert_eq!((r.unique, r.prefetched), (1, 15));
    assert!((r.fault_ns - 190.0).abs() < 1e-6, "{}", r.fault_ns);
}

/// 2 chunks of GPU memory, one root chunk per allocator call: after the first block the allocator's chunk
/// is taken but the allocator has one more, so memory is not full yet (prefetch.when_full must not apply);
/// the second block takes it with a second call (100 µs each), and then memory is full.
#[test]
fn gpu_memory_is_full_only_when_the_allocator_has_nothing_left() {
    let c =
        UvmConfig { gpu_memory_bytes: ByteSize(4 << 20), pma_chunk_blocks: 1, replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = with(c);
    let t = serve(&mut u, &mut link, &mut res, 0, &[1]);
    assert_eq!((u.allocated_chunks, u.free_chunks, u.full), (1, 0, false));
    serve(&mut u, &mut link, &mut res, t, &[513]);
    assert_eq!((u.allocated_chunks, u.free_chunks, u.full), (2, 0, true));
    let alloc: Vec<f64> = u.records.as_ref().unwrap().iter().map(|r| r.alloc_ns).collect();
    assert_eq!(alloc, vec![100_000.0, 100_000.0]);
}

/// The `block` policy waits for each block's work and replays after it: each block pays the tracker and the
/// replay. Pages 1 and 513, resident nowhere (zero-filled), first touch 0:
///   block 0 ends at fetch 10 + 2 x 0.01, block 8, fault 0.19, allocator call 100, zero 0.02, map 2,
///   tracker 5, replay 5 = 130.23 µs;
///   block 1 (a chunk left from that call) 20.21 µs later: 8 + 0.19 + 0.02 + 2 + 5 + 5.
#[test]
fn block_policy_charges_each_block_its_tracker_and_replay() {
    let c = UvmConfig { replay_policy: ReplayPolicy::Block, batch_size: 8, records: true, first_touch_us: 0.0, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    u.raise(fault(1, 0));
    u.raise(fault(513, 0));
    let Next::BatchDone(e1) = u.service(0, &mut link, &mut res) else { panic!() };
    assert_eq!(e1, 130_230_000);
    let (Next::BatchDone(e2), true) = u.batch_done(e1, &mut res) else { panic!() };
    assert_eq!(e2 - e1, 20_210_000);
    let r = u.records.as_ref().unwrap()[0].clone();
    assert_eq!((r.tracker_ns, r.replay_ns, r.end_ns), (10_000.0, 10_000.0, 150_440.0));
}

/// `once`: a fault the SM throttle writes only at 1 ms is not waiting in the buffer when the first batch ends
/// (well before): the buffer is drained as of then, so the driver replays, and fetches again at once.
#[test]
fn once_policy_replays_when_no_fault_written_by_the_batch_end_is_left() {
    let c = UvmConfig {
        replay_policy: ReplayPolicy::Once,
        batch_size: 4,
        interrupt_us: 1.0,
        sm_fault_interval_ns: 1e6,
        ..UvmConfig::default()
    };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    u.raise(fault(0, 0));
    u.raise(fault(1, 0)); // written at 1 ms
    let Next::BatchDone(end) = u.service(1_000_000, &mut link, &mut res) else { panic!() };
    assert!(end < 1_000_000_000);
    assert_eq!(u.batch_done(end, &mut res), (Next::Service(end), true));
    assert_eq!(u.stats.replays, 1);
}

/// Page granularity, 4 pages of GPU memory (8 pages at 2x oversubscription), one root chunk (512 pages) per
/// allocator call: the first batch's call covers all 4 pages (100 µs), later batches call no more, even the
/// one that fills memory exactly (page 3). Page 4's batch evicts page 0: evict_us (10 µs), the push of its
/// copy back (1 + 0.05 µs) and the copy itself, as its row in the migrations table times it.
#[test]
fn page_granularity_calls_the_allocator_once_per_root_chunks_and_charges_the_eviction() {
    let c = UvmConfig {
        oversubscription: 2.0,
        pma_chunk_blocks: 1,
        eviction: EvictionConfig { granularity: EvictionGranularity::Page, policy: EvictionPolicy::Driver, ..EvictionConfig::default() },
        ..UvmConfig::default()
    };
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 8);
    u.host_touch(0, 8, 1);
    serve(&mut u, &mut link, &mut res, 0, &[0, 1, 2, 3, 4]);
    let rows = u.records.as_ref().unwrap();
    assert_eq!(rows.iter().map(|r| r.alloc_ns).collect::<Vec<_>>(), vec![100_000.0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(u.shootdown_pages, vec![0]);
    let back: Vec<&MigrationRecord> = u.migrations.as_ref().unwrap().iter().filter(|m| m.cause == Cause::Eviction).collect();
    assert_eq!(back.len(), 1);
    let want = 10_000.0 + 1_050.0 + (back[0].end_ns - back[0].start_ns);
    assert!((rows[4].evict_ns - want).abs() < 1e-6, "{} vs {want}", rows[4].evict_ns);
}

#[test]
fn the_fetch_merges_an_equal_access_of_another_utlb_into_the_batchs_last() {
    let f = |vpn: u64, utlb: u32, write: bool| Fault { write, ..fault(vpn, utlb) };
    // Same page, another µTLB, an access as intrusive as the batch's last entry: merged.
    assert_eq!(fetch_coalesced(&[f(5, 0, false), f(5, 1, false)]), 1);
    assert_eq!(fetch_coalesced(&[f(5, 0, true), f(5, 1, true)]), 1);
    // Less intrusive: merged; more intrusive: kept.
    assert_eq!(fetch_coalesced(&[f(5, 0, true), f(5, 1, false)]), 1);
    assert_eq!(fetch_coalesced(&[f(5, 0, false), f(5, 1, true)]), 2);
}

/// A page the thrashing module throttles is not serviced: the batch bumps the refault epoch, so the warps
/// waiting on it re-execute after the replay and fault again (pages 5..8 thrash as in the test above).
#[test]
fn a_throttled_page_is_not_serviced_and_its_warps_fault_again() {
    let c = UvmConfig { replay_policy: ReplayPolicy::Batch, batch_size: 1, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    const US: Ps = crate::sim::PS_PER_US;
    for (i, p) in [Proc::Host, Proc::Gpu, Proc::Host, Proc::Gpu, Proc::Host].into_iter().enumerate() {
        u.thrashing.migrated(0, &[5, 6, 7, 8], p, i as Ps * 10 * US);
    }
    u.raise(fault(5, 0));
    let Next::BatchDone(end) = u.service(50 * US, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert_eq!(u.thrashing.stats.throttled_faults, 1);
    assert_eq!((u.stats.unique, res.refault_epoch, res.is_resident(5), u.in_service(0, 5)), (0, 1, false, false));
}

/// preferred-location-host: a batch maps the faulted pages remotely, per VA block: block 8 µs, the page
/// resident nowhere (1) zero-filled on the host (0.02 µs; page 0 is host data), map 2 µs; no chunk, no copy.
#[test]
fn a_remote_mapping_zero_fills_only_pages_resident_nowhere_and_counts_its_pages() {
    let mut c = UvmConfig { replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
    c.advise.policy = Advice::PreferredLocationHost;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 1024);
    u.host_touch(0, 1, 1);
    u.raise(fault(0, 0));
    u.raise(fault(1, 0));
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    let r = u.records.as_ref().unwrap()[0].clone();
    assert_eq!((r.block_ns, r.zero_ns, r.map_ns), (8000.0, 20.0, 2000.0));
    assert_eq!((r.remote_mapped, r.va_blocks, r.bytes_h2d, u.stats.remote_mapped), (2, 0, 0, 2));
    assert!(res.is_remote(0) && res.is_remote(1) && !res.is_resident(1));
}

#[test]
fn batch_flush_records_the_faults_it_discards() {
    let c = UvmConfig { batch_size: 4, records: true, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    for vpn in 0..6 {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    // 4 fetched, the 2 left flushed.
    assert_eq!((u.stats.flushed, u.records.as_ref().unwrap()[0].flushed), (2, 2));
}

/// A held fault whose page was mapped meanwhile ends at the replay (the GPU's sleeping warps on it resume):
/// µTLB 1 (limit 2) writes pages 0 and 1 and holds 2, 3, 4; page 3 becomes resident; at the replay 2 and 4
/// are retried, 3 ends with the batch's 0 and 1.
#[test]
fn a_held_fault_on_a_page_mapped_meanwhile_ends_at_the_replay() {
    let (mut u, mut link, mut res) = uvm(ReplayPolicy::Batch, 2);
    for vpn in 0..5 {
        u.raise(fault(vpn, 1));
    }
    res.make_resident(3);
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert_eq!(u.take_ended(), vec![0, 1, 3]);
    assert!(!u.in_service(1, 3) && u.in_service(1, 2) && u.in_service(1, 4));
}

/// A host access to pages the host never mapped: one CPU fault (cpu_fault_us, 20 µs) for the block, nothing to
/// copy back; the block is host-mapped afterwards, so the next access costs nothing.
#[test]
fn a_host_access_to_an_unmapped_block_costs_one_cpu_fault() {
    let (mut u, mut link, mut res) = with(UvmConfig::default());
    assert_eq!(u.host_access(0, 0..4, false, 1, &mut link, &mut res), 20_000_000);
    assert_eq!(u.host_access(20_000_000, 0..4, false, 1, &mut link, &mut res), 20_000_000);
    assert_eq!(u.stats.host_faults, 1);
    // The pages it touched are populated on the host (zero-filled), no others.
    assert!((0..4).all(|p| u.cpu_resident(p)) && !u.cpu_resident(4));
}

/// Preemptive unmapping, sync, allocation granularity: the fault on block 0 unmaps the allocation's three
/// host-mapped blocks in one call: 3 x 1.6 µs + 1536 pages x 0.163 µs (one thread: no shootdown extra).
#[test]
fn a_sync_allocation_unmap_counts_the_faulting_block_with_the_rest() {
    let mut c = UvmConfig { replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
    c.preunmap.granularity = UnmapGranularity::Allocation;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 1536);
    u.host_touch(0, 1536, 1);
    u.raise(fault(1, 0));
    let Next::BatchDone(_) = u.service(0, &mut link, &mut res) else { panic!() };
    let r = u.records.as_ref().unwrap()[0].clone();
    let want = 3.0 * 1.6 + 1536.0 * 0.163;
    assert!((r.unmap_ns / 1000.0 - want).abs() < 1e-6, "{} vs {want}", r.unmap_ns / 1000.0);
    assert_eq!(u.stats.unmaps_sync, 3);
}

/// An access-counter migration keeps the bottom half busy until it ends: a batch due before waits for it, one
/// due at its end runs then.
#[test]
fn a_batch_waits_for_an_access_counter_migration_until_its_end_only() {
    let (mut u, mut link, mut res) = with(UvmConfig::default());
    u.add_allocation(0, 512);
    u.host_touch(0, 512, 1);
    for p in 0..16 {
        res.map_remote(p);
    }
    let end = u.service_counters(0, &[(0, 1)], &mut link, &mut res).expect("pages to move");
    u.counters_done(end, &mut res);
    u.raise(fault(100, 0));
    assert_eq!(u.service(1, &mut link, &mut res), Next::Service(end));
    assert!(matches!(u.service(end, &mut link, &mut res), Next::BatchDone(_)));
}

/// Once GPU memory is full (one 2 MiB chunk here), a batch's end tells the GPU every page it mapped, prefetched
/// ones too (the replay completes the lanes on all of them): page 1 faulted, density brought 0..16.
#[test]
fn with_memory_full_a_batch_ends_the_faults_on_every_page_it_mapped() {
    let mut c = UvmConfig { gpu_memory_bytes: ByteSize(2 << 20), replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
    c.prefetch.policy = PrefetchPolicy::Density;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 1024);
    u.host_touch(0, 1024, 1);
    u.raise(fault(1, 0));
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert!(u.full);
    let mut ended = u.take_ended();
    ended.sort_unstable();
    ended.dedup();
    assert_eq!(ended, (0..16).collect::<Vec<u64>>());
}

#[test]
fn a_batch_may_take_the_whole_fault_buffer() {
    assert!(UvmConfig { fault_buffer_entries: 256, batch_size: 256, ..UvmConfig::default() }.validate().is_ok());
    let c = UvmConfig { fault_buffer_entries: 256, batch_size: 257, ..UvmConfig::default() };
    assert_eq!(c.validate().unwrap_err().0, "uvm.batch_size");
}

/// A host read of a read-mostly page the GPU holds alone (populated there, not a duplicate) copies it
/// back and leaves the GPU a read-only duplicate: one CPU fault (20 µs) although the block is host-mapped,
/// the map (2 µs: the GPU's write permission goes, a shootdown), the push (1 + 0.05 µs) and the 4 KiB copy;
/// the page stays resident, now a duplicate, and the row's cause is the hint. A host write of such a page
/// takes it back instead.
#[test]
fn a_host_read_of_a_read_mostly_page_copies_it_back_and_the_gpu_keeps_a_duplicate() {
    let mut c = UvmConfig::default();
    c.advise.policy = Advice::ReadMostly;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 8);
    u.host_touch(0, 1, 1);
    res.make_resident(1);
    res.make_resident(2);
    let end = u.host_access(0, 1..2, false, 1, &mut link, &mut res);
    let copy = Link::new(&Config::default().link).transfer_on(Dir::DeviceToHost, 4096, 0, 0).1;
    let want = 23_050_000 + copy;
    assert!(end.abs_diff(want) < 5000, "{end} vs {want}");
    assert_eq!((u.stats.host_faults, u.stats.dup_host_copies, u.stats.host_pages_d2h), (1, 1, 0));
    assert!(res.is_resident(1) && res.is_dup(1));
    assert_eq!(u.shootdowns, vec![0]);
    let row = u.migrations.as_ref().unwrap().last().unwrap().clone();
    assert_eq!((row.cause, row.direction, row.first_page, row.pages), (Cause::Hint, "d2h", 1, 1));
    let mut m = Metrics::default();
    u.export(&mut m, &res);
    assert_eq!((m.get("uvm.read_dup.host_copies"), m.get("uvm.read_dup.copies")), (Some(1.0), Some(0.0)));
    // A write: page 2 comes back to the host and leaves the GPU.
    u.host_access(end, 2..3, true, 1, &mut link, &mut res);
    assert!(!res.is_resident(2) && !res.is_dup(2));
    assert_eq!((u.stats.host_pages_d2h, u.stats.dup_host_copies), (1, 1));
}

/// Page granularity, 2 pages of GPU memory (1024 pages at 512x). A block whose demand fits in GPU memory but
/// not beside the batch's earlier pages waits whole; one whose demand is larger than GPU memory itself is
/// serviced in part (its first pages), unless no page is left at all (it then waits whole too).
#[test]
fn page_granularity_defers_a_block_whole_unless_its_demand_outgrows_gpu_memory() {
    let run = |vpns: &[u64], cursor: u64| {
        let c = UvmConfig {
            oversubscription: 512.0,
            eviction: EvictionConfig { granularity: EvictionGranularity::Page, ..EvictionConfig::default() },
            ..UvmConfig::default()
        };
        let (mut u, mut link, mut res) = with(c);
        u.add_allocation(0, 1024);
        u.seq_cursor = cursor;
        for &vpn in vpns {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        u.batch_done(end, &mut res);
        u.check_invariants(&res).unwrap();
        let held = u.page_evict.as_ref().unwrap().pages.len();
        (u.stats.deferred_blocks, u.stats.deferred_pages, u.stats.va_blocks, res.resident_pages(), held, res.refault_epoch, u.seq_cursor)
    };
    // Page 0 takes 1 page; block 1's 2 pages (= GPU memory) find 1 left: the block waits; one new epoch.
    assert_eq!(run(&[0, 512, 513], 0), (1, 2, 1, 1, 1, 1, 0));
    // Pages 0 and 1 fill it; block 1's 3 pages (> GPU memory) find none left: the block waits.
    assert_eq!(run(&[0, 1, 512, 513, 514], 0), (1, 3, 1, 2, 2, 1, 0));
    // Block 1 alone, 3 pages: its first 2 go now (2 pages held, no more), 514 waits; the sequential scan goes
    // back to the block's start (from 600).
    assert_eq!(run(&[512, 513, 514], 600), (0, 1, 1, 2, 2, 1, 512));
}

/// Page granularity, 4 pages of GPU memory (6 pages at 1.5x): allocations [0, 2), [512, 515), [1024, 1025).
/// Faults on 0, 1 and 1024; the sequential transfer set (6) adds 512, 513, 514 (the scan starts at 0).
/// Block 0 takes 2 pages (pinned); block 1's prefetches may take only what block 2's demand page leaves:
/// 4 - 2 held - 1 needed = 1 page (512); block 2's page then finds room. Nothing is deferred or evicted.
#[test]
fn page_granularity_prefetches_leave_the_room_a_later_block_demands() {
    let mut c = UvmConfig {
        replay_policy: ReplayPolicy::Batch,
        oversubscription: 1.5,
        eviction: EvictionConfig { granularity: EvictionGranularity::Page, ..EvictionConfig::default() },
        ..UvmConfig::default()
    };
    (c.prefetch.policy, c.prefetch.transfer_set_pages) = (PrefetchPolicy::Sequential, 6);
    let (mut u, mut link, mut res) = with(c);
    for (first, end) in [(0, 2), (512, 515), (1024, 1025)] {
        u.add_allocation(first, end);
    }
    for vpn in [0, 1, 1024] {
        u.raise(fault(vpn, 0));
    }
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    let resident: Vec<u64> = [0, 1, 512, 513, 514, 1024].into_iter().filter(|&p| res.is_resident(p)).collect();
    assert_eq!(resident, vec![0, 1, 512, 1024]);
    assert_eq!((u.stats.prefetched, u.stats.deferred_blocks, u.stats.evictions), (1, 0, 0));
    u.check_invariants(&res).unwrap();
}

/// Block granularity: a transfer set's prefetch-only block takes a chunk only if the batch's later demand
/// blocks keep one each (free chunks and unpinned ones); with `capacity` chunks, the allocations and faults
/// given, the sequential set (`set` pages) from page 0. Returns the resident pages of `probe`, the pages
/// prefetched and the blocks deferred.
#[test]
fn a_prefetch_only_block_takes_no_chunk_a_later_demand_block_needs() {
    let run = |capacity: u64, allocs: &[(u64, u64)], vpns: &[u64], set: u32, probe: &[u64]| {
        let mut c =
            UvmConfig { replay_policy: ReplayPolicy::Batch, gpu_memory_bytes: ByteSize(capacity * (2 << 20)), ..UvmConfig::default() };
        (c.prefetch.policy, c.prefetch.transfer_set_pages) = (PrefetchPolicy::Sequential, set);
        let (mut u, mut link, mut res) = with(c);
        for &(first, end) in allocs {
            u.add_allocation(first, end);
        }
        for &vpn in vpns {
            u.raise(fault(vpn, 0));
        }
        let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
        u.batch_done(end, &mut res);
        u.check_invariants(&res).unwrap();
        let resident: Vec<u64> = probe.iter().copied().filter(|&p| res.is_resident(p)).collect();
        (resident, u.stats.prefetched, u.stats.deferred_blocks)
    };
    // 2 chunks; block 0 demands (1 chunk), block 1 only prefetches (512, 513), block 2 demands: one chunk is
    // left (free 1, unpinned 0) and block 2 needs it, so block 1's prefetches are dropped.
    let allocs = [(0, 1), (512, 514), (1024, 1025)];
    assert_eq!(run(2, &allocs, &[0, 1024], 4, &[0, 512, 513, 1024]), (vec![0, 1024], 0, 0));
    // Blocks 1 and 2 only prefetch, no later demand: block 1 takes the chunk left (free 1 > need 0), block 2
    // finds none (free 0, unpinned 0) and is dropped.
    let allocs = [(0, 1), (512, 514), (1024, 1026)];
    assert_eq!(run(2, &allocs, &[0], 5, &[0, 512, 513, 1024, 1025]), (vec![0, 512, 513], 2, 0));
    // 1 chunk; block 0 demands 0 and prefetches 1, 2 in its own chunk (a demand block keeps its prefetches),
    // block 2 then finds no chunk and waits.
    let allocs = [(0, 3), (1024, 1025)];
    assert_eq!(run(1, &allocs, &[0, 1024], 4, &[0, 1, 2, 1024]), (vec![0, 1, 2], 2, 1));
}

/// Read-mostly: a batch's reads duplicate the pages the host holds; a page resident nowhere is
/// populated on the GPU alone (it is the only copy, no duplicate).
#[test]
fn a_read_mostly_batch_duplicates_only_the_pages_the_host_holds() {
    let mut c = UvmConfig { replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
    c.advise.policy = Advice::ReadMostly;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 8);
    u.host_touch(0, 1, 1);
    u.raise(fault(0, 0));
    u.raise(fault(1, 0));
    let Next::BatchDone(end) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert!(res.is_resident(0) && res.is_resident(1));
    assert_eq!((res.is_dup(0), res.is_dup(1), u.stats.dup_copies), (true, false, 1));
}

/// `block` policy, one chunk of GPU memory: block 0 is serviced and replayed; block 1 then costs its checks
/// and finds no chunk (block 0's is the batch's): deferred after the last block serviced, its faults need a
/// replay of their own: tracker and replay twice (2 x 5 µs each).
#[test]
fn block_policy_replays_again_for_blocks_deferred_after_the_last_serviced() {
    let c = UvmConfig { replay_policy: ReplayPolicy::Block, records: true, gpu_memory_bytes: ByteSize(2 << 20), ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    u.raise(fault(0, 0));
    u.raise(fault(512, 0));
    let Next::BatchDone(e1) = u.service(0, &mut link, &mut res) else { panic!() };
    u.batch_done(e1, &mut res);
    let r = u.records.as_ref().unwrap()[0].clone();
    assert_eq!((r.deferred, r.tracker_ns, r.replay_ns), (1, 10_000.0, 10_000.0));
}

/// Page-granular eviction, read-mostly advice, GPU memory 1 / `oversubscription` of the managed data:
/// one 8-page allocation the host has touched (the two duplicate tests' set-up).
fn read_mostly_pages(oversubscription: f64) -> (Uvm, Link, Residency) {
    let mut c = UvmConfig {
        oversubscription,
        eviction: EvictionConfig { granularity: EvictionGranularity::Page, ..EvictionConfig::default() },
        ..UvmConfig::default()
    };
    c.advise.policy = Advice::ReadMostly;
    let (mut u, link, res) = with(c);
    u.add_allocation(0, 8);
    u.host_touch(0, 8, 1);
    (u, link, res)
}

/// Page granularity, 1 page of GPU memory, read-mostly data the host holds: page 0 is read-duplicated; the
/// fault on page 1 evicts it, and nothing goes back (the host holds the page too): a clean eviction.
#[test]
fn page_granularity_evicts_a_read_only_duplicate_without_copying_it_back() {
    let (mut u, mut link, mut res) = read_mostly_pages(8.0);
    let t = serve(&mut u, &mut link, &mut res, 0, &[0]);
    assert!(res.is_dup(0));
    serve(&mut u, &mut link, &mut res, t, &[1]);
    assert_eq!((u.stats.evictions, u.stats.pages_evicted_clean, u.stats.bytes_d2h), (1, 1, 0));
    assert!(!res.is_resident(0) && res.is_resident(1));
}

/// The watchdog's report: when the last batch's throttled pages' naps end (500 µs each). Pages 5 and 6
/// thrash (as in the test above). At 50 µs page 6 is throttled until 550 µs; at the next batch (t2 ≥ 60 µs)
/// page 5 is throttled until t2 + 500 µs and 6 still naps until 550 µs: the later, t2 + 500 µs, counts (not
/// the last page's). A batch that throttles nothing clears it.
#[test]
fn the_last_batchs_throttled_pages_nap_until_the_latest_of_their_naps() {
    let c = UvmConfig { replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
    let (mut u, mut link, mut res) = (Uvm::new(&c, 2, 4, 0), Link::new(&Config::default().link), Residency::default());
    const US: Ps = crate::sim::PS_PER_US;
    for (i, p) in [Proc::Host, Proc::Gpu, Proc::Host, Proc::Gpu, Proc::Host].into_iter().enumerate() {
        u.thrashing.migrated(0, &[5, 6], p, i as Ps * 10 * US);
    }
    u.raise(Fault { time: 50 * US, ..fault(6, 0) });
    let Next::BatchDone(end) = u.service(50 * US, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert_eq!(u.throttled_until(), Some(550 * US));
    let t2 = end.max(60 * US);
    u.raise(Fault { time: t2, ..fault(5, 0) });
    u.raise(Fault { time: t2, ..fault(6, 1) });
    let Next::BatchDone(end) = u.service(t2, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert_eq!(u.throttled_until(), Some(t2 + 500 * US));
    u.raise(Fault { time: end, ..fault(100, 0) });
    let Next::BatchDone(end) = u.service(end, &mut link, &mut res) else { panic!() };
    u.batch_done(end, &mut res);
    assert_eq!(u.throttled_until(), None);
}

/// Polled, every page hinted to stay on the host: the fault on page 5 is mapped remotely and the transfer
/// set (6, 7, 8) is no set (hinted pages are not prefetched): the intervals stop after the next one
/// instead of polling for ever.
#[test]
fn polled_intervals_stop_when_the_transfer_set_holds_only_pages_not_to_prefetch() {
    let (mut u, mut link, mut res) = polled(16, locality_sets_of_4(false));
    u.advised = vec![(0, POLLED_PAGES, Advice::PreferredLocationHost)];
    u.allocs = [(0, 14)].into_iter().collect();
    u.raise(fault_at(0, 5, 0));
    drain(&mut u, &mut link, &mut res);
    assert_eq!((u.stats.remote_mapped, u.stats.prefetched, u.stats.batches), (1, 0, 1));
    assert!(u.interval_end.is_none() && u.events.is_empty());
}

/// The deadlock report's driver line names the faults held at µTLBs and the µTLBs' outstanding count:
/// µTLB 1 (limit 3) writes pages 0, 1, 2 and holds 3 and 4.
#[test]
fn the_driver_line_counts_held_faults_and_outstanding_ones() {
    let (mut u, _, _) = uvm(ReplayPolicy::Batch, 3);
    for vpn in 0..5 {
        u.raise(fault(vpn, 1));
    }
    let mut out = vec![];
    u.describe(&mut out);
    assert!(out[0].ends_with("3 faults buffered, 0 rounds in flight, 2 held at µTLBs (3 outstanding)"), "{}", out[0]);
    // The state line: the 3 outstanding are the 3 buffered, none in service yet.
    let line = u.state_line(&Residency::default());
    assert!(line.contains("faults: 3 buffered, 0 in service, 2 held at µTLBs"), "{line}");
}

/// Polled, 20 pages of GPU memory counted at 4 KiB, sequential-local prefetch (a fault's 64 KiB group), each
/// round one copy. Round 1 (20 µs) sends page 0 and 1..15: 16 pages on the link until about 24 µs, which
/// cannot be evicted. Round 2 (20.1 µs) faults on 512 and 1024: block 1's prefetches may take only what the
/// pages on the link and the round's 2 demand pages leave, 20 - 16 - 2 = 2 (513, 514); block 2's group then
/// gets none (20 - 19 held - 1), and its demand page finds room: 15 + 2 pages prefetched, 20 resident, nothing
/// deferred.
#[test]
fn polled_prefetches_leave_the_room_that_pages_on_the_link_and_later_demand_take() {
    let prefetch = PrefetchConfig { policy: PrefetchPolicy::SequentialLocal, ..PrefetchConfig::default() };
    let (mut u, mut link, mut res) = polled(16, prefetch);
    u.land_per_copy = false;
    u.page_evict =
        Some(Box::new(PageMemory { capacity: 20, pages: Pages::new(EvictionPolicy::Lru, 0), pinned: FxHashSet::default(), allocated: 0 }));
    u.raise(fault_at(0, 0, 0));
    u.raise(fault_at(100_000, 512, 1));
    u.raise(fault_at(100_000, 1024, 2));
    drain(&mut u, &mut link, &mut res);
    assert_eq!((u.stats.deferred_blocks, u.stats.prefetched, res.resident_pages()), (0, 17, 20));
    assert!(res.is_resident(512) && res.is_resident(514) && !res.is_resident(515) && res.is_resident(1024));
}

/// A block's host threads are the most that touched it: 4 threads initialise pages 0..4, 1 thread 4..8.
#[test]
fn a_host_mapped_block_keeps_the_most_threads_that_touched_it() {
    let (mut u, _, _) = with(UvmConfig::default());
    u.host_touch(0, 4, 4);
    u.host_touch(4, 8, 1);
    assert_eq!(u.cpu_mapped[&0].threads, 4);
}

/// Accessed-by: host-resident pages not on the GPU are mapped remotely; a GPU-resident page (1) and pages
/// resident nowhere (2..8) are not.
#[test]
fn accessed_by_maps_only_host_resident_pages_not_on_the_gpu_remotely() {
    let mut c = UvmConfig::default();
    c.advise.policy = Advice::AccessedBy;
    let (mut u, _, mut res) = with(c);
    u.add_allocation(0, 8);
    u.host_touch(0, 2, 1);
    res.make_resident(1);
    u.apply_advice(&mut res);
    assert_eq!((0..8).filter(|&p| res.is_remote(p)).collect::<Vec<_>>(), vec![0]);
}

/// Pins (thrashing, pin_threshold 1): pages 5 and 6 thrash, each is throttled once, then pinned at the host's
/// fault at 60 µs, for 300 lapses (150 ms). One wake-up is scheduled for the deadline, however often the
/// pins are collected. At the deadline their remote mappings go: one shootdown for their block, one new
/// refault epoch per page whose mapping went.
#[test]
fn pinned_pages_are_unpinned_at_their_deadline_once_per_block() {
    const US: Ps = crate::sim::PS_PER_US;
    let mut c = UvmConfig::default();
    c.thrashing.pin_threshold = 1;
    let (mut u, _, mut res) = with(c);
    for (i, p) in [Proc::Host, Proc::Gpu, Proc::Host, Proc::Gpu, Proc::Host].into_iter().enumerate() {
        u.thrashing.migrated(0, &[5, 6], p, i as Ps * 10 * US);
    }
    for vpn in [5, 6] {
        assert_eq!(u.thrashing.hint(vpn, Proc::Gpu, 50 * US), Hint::Throttle(550 * US));
        assert_eq!(u.thrashing.hint(vpn, Proc::Host, 60 * US), Hint::Pin);
        res.map_remote(vpn);
    }
    u.collect_unpins();
    u.collect_unpins();
    let deadline = 60 * US + 150_000 * US;
    assert_eq!(u.unpin_wakeups, vec![deadline]);
    u.unpin_due(deadline, &mut res);
    assert!(!res.is_remote(5) && !res.is_remote(6));
    assert_eq!((u.shootdowns.clone(), res.refault_epoch), (vec![0], 2));
}

/// A host access to a page pinned on the host (thrashing): it comes back and the GPU maps it remotely.
#[test]
fn a_host_access_to_a_pinned_page_leaves_the_gpu_a_remote_mapping() {
    const US: Ps = crate::sim::PS_PER_US;
    let mut c = UvmConfig::default();
    c.thrashing.pin_threshold = 1;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 8);
    for (i, p) in [Proc::Host, Proc::Gpu, Proc::Host, Proc::Gpu, Proc::Host].into_iter().enumerate() {
        u.thrashing.migrated(0, &[5], p, i as Ps * 10 * US);
    }
    assert_eq!(u.thrashing.hint(5, Proc::Gpu, 50 * US), Hint::Throttle(550 * US));
    res.make_resident(5);
    u.host_access(60 * US, 5..6, false, 1, &mut link, &mut res);
    assert!(!res.is_resident(5) && res.is_remote(5));
    assert_eq!((u.stats.remote_mapped, u.stats.host_pages_d2h), (1, 1));
}

/// Accessed-by: a page the host takes back stays mapped on the GPU, remotely.
#[test]
fn accessed_by_pages_the_host_takes_back_stay_mapped_remotely() {
    let mut c = UvmConfig::default();
    c.advise.policy = Advice::AccessedBy;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 8);
    res.make_resident(0);
    u.host_access(0, 0..1, true, 1, &mut link, &mut res);
    assert!(!res.is_resident(0) && res.is_remote(0));
}

/// A page's GPU-to-host move is a thrashing event: a batch brings page 3 to the GPU, the host takes it back
/// within the lapse (500 µs): the block alternates, tracked from now on.
#[test]
fn the_host_taking_a_page_back_is_a_thrashing_event() {
    let (mut u, mut link, mut res) = with(UvmConfig { replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() });
    u.add_allocation(0, 8);
    u.host_touch(0, 8, 1);
    let end = serve(&mut u, &mut link, &mut res, 0, &[3]);
    assert!(!u.thrashing.tracking());
    u.host_access(end, 3..4, false, 1, &mut link, &mut res);
    assert!(u.thrashing.tracking());
}

/// Page granularity, read-mostly: a host write invalidates the GPU's duplicate of page 0, and its 4 KiB of
/// GPU memory are free again.
#[test]
fn a_host_write_to_a_duplicate_frees_its_page_of_gpu_memory() {
    let (mut u, mut link, mut res) = read_mostly_pages(2.0);
    let t = serve(&mut u, &mut link, &mut res, 0, &[0]);
    assert_eq!(u.page_evict.as_ref().unwrap().pages.len(), 1);
    u.host_access(t, 0..1, true, 1, &mut link, &mut res);
    assert_eq!((res.is_resident(0), u.stats.dup_invalidations, u.page_evict.as_ref().unwrap().pages.len()), (false, 1, 0));
}

/// A hint covers its allocation's pages, not the page after it.
#[test]
fn a_hint_ends_with_its_allocation() {
    let mut c = UvmConfig::default();
    c.advise.per_buffer = vec![Advice::ReadMostly, Advice::None];
    let (mut u, _, _) = with(c);
    u.add_allocation(0, 8);
    u.add_allocation(8, 16);
    assert_eq!((u.advice_of(7), u.advice_of(8)), (Advice::ReadMostly, Advice::None));
}

/// GPU memory is limited by a chunk capacity (`gpu_memory_bytes`) as by a page one; not by default.
#[test]
fn gpu_memory_is_limited_by_a_chunk_capacity() {
    let (u, _, _) = with(UvmConfig { gpu_memory_bytes: ByteSize(2 << 20), ..UvmConfig::default() });
    assert!(u.memory_limited());
    let (u, _, _) = with(UvmConfig::default());
    assert!(!u.memory_limited());
}

/// Sequential-local prefetch at an allocation's end: the fault on page 0 of an 8-page allocation prefetches
/// its 64 KiB group's other pages within the allocation, 1..8 (7 pages), none past it.
#[test]
fn a_blocks_prefetch_stops_at_its_allocations_end() {
    let mut c = UvmConfig { replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
    c.prefetch.policy = PrefetchPolicy::SequentialLocal;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 8);
    serve(&mut u, &mut link, &mut res, 0, &[0]);
    assert_eq!((u.stats.prefetched, res.resident_pages()), (7, 8));
}

/// Preemptive unmap, sync, allocation granularity, an allocation of 600 pages (block 0 and part of block 1):
/// the fault on page 0 unmaps both blocks.
#[test]
fn an_allocation_unmap_takes_its_last_partial_block() {
    let mut c = UvmConfig { replay_policy: ReplayPolicy::Batch, ..UvmConfig::default() };
    c.preunmap.granularity = UnmapGranularity::Allocation;
    let (mut u, mut link, mut res) = with(c);
    u.add_allocation(0, 600);
    u.host_touch(0, 600, 1);
    serve(&mut u, &mut link, &mut res, 0, &[0]);
    assert_eq!((u.stats.unmaps_sync, u.cpu_mapped.len()), (2, 0));
}

/// The `migrations` table keeps at most `migration_records_max` rows: two copies, one row, one dropped.
#[test]
fn the_migrations_table_keeps_at_most_its_max_rows() {
    let (mut u, mut link, mut res) =
        with(UvmConfig { replay_policy: ReplayPolicy::Batch, migration_records_max: 1, ..UvmConfig::default() });
    u.add_allocation(0, 8);
    u.host_touch(0, 8, 1);
    serve(&mut u, &mut link, &mut res, 0, &[0, 1]);
    assert_eq!((u.migrations.as_ref().unwrap().len(), u.migration_records_dropped), (1, 1));
}
