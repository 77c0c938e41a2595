//! Access-counter migration between the host and one GPU (spec/uvm-driver.md
//! "Residency, hints, access counters": 2 MiB regions, threshold 256,
//! notifications with a 32 × 64 KiB sub-region mask; migration on by default
//! only on ATS systems, not on x86 + PCIe).
//!
//! How it works: the GPU counts its remote accesses (one per line request
//! over the link) per 2 MiB region of the pages it maps remotely, and marks
//! the 64 KiB sub-regions it touched; when a region's count reaches the
//! threshold it raises a notification (region, mask) and the count starts
//! again. After `notify_us` (interrupt and bottom-half wake-up) the driver
//! migrates the remotely mapped pages of the marked sub-regions to the GPU
//! (`Uvm::migrate_to_gpu`: per-block costs, chunk or eviction, copy, map) in
//! the same bottom half as the fault batches: it waits for a batch in
//! service, and batches wait for it. The pages stay remotely mapped (and are
//! read over the link) until their copy ends; then their GPU translations
//! are shot down and the next access finds them local.
//!
//! ASSUMPTIONS: pages pinned by thrashing mitigation and pages whose
//! preferred location is the host are not migrated (the residency order of
//! the spec puts the pin and the preferred location first); accessed-by pages
//! are. The driver's batching of notifications (256 per batch) is not
//! modelled: each notification pending at a service is handled by it.

use super::{Cause, Residency, Uvm, BLOCK_PAGES};
use crate::link::{Dir, Link};
use crate::sim::{ns_to_ps, Ps};
use crate::stats::Metrics;
use rustc_hash::FxHashMap;

section! {
    /// GPU access counters and the migrations they trigger (spec/uvm-driver.md "access counters"; single GPU and host).
    pub struct AccessCounterConfig {
        /// Migrate remotely mapped pages the GPU accesses often (the driver enables it by default only on ATS systems: Grace Hopper, POWER9; off on x86 + PCIe). One GPU: the multi-GPU model refuses it (its own is multi.migration = "access-counter"). A migration still in service when the program ends counts only the copies that had started.
        pub migrate: bool = false,
        /// Remote accesses (line requests) to one 2 MiB region that raise a notification (uvm_perf_access_counter_threshold, default 256).
        pub threshold: u32 = 256,
        /// From a notification to the driver's service of it (interrupt and bottom-half wake-up), in µs. ASSUMPTION: as uvm.interrupt_us.
        pub notify_us: f64 = 5.0,
    }
}

impl AccessCounterConfig {
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !(1..=65535).contains(&self.threshold) {
            return Err(("uvm.access_counters.threshold".into(), format!("must be between 1 and 65535, got {}", self.threshold)));
        }
        // Bounded as the driver's other costs (uvm.*_us): a time beyond u64 picoseconds would wrap the clock.
        if !(self.notify_us.is_finite() && (0.0..=1e6).contains(&self.notify_us)) {
            return Err(("uvm.access_counters.notify_us".into(), format!("must be between 0 and 1000000 µs, got {}", self.notify_us)));
        }
        Ok(())
    }
}

/// 4 KiB pages per 64 KiB sub-region.
const SUB_PAGES: u64 = 16;

/// The GPU's counters: per 2 MiB region, the count and the touched sub-regions.
#[derive(Debug, Clone)]
pub struct AccessCounters {
    threshold: u32,
    pub notify: Ps,
    regions: FxHashMap<u64, (u32, u32)>,
    /// Notifications raised and not yet serviced: (region, sub-region mask).
    pub notifications: Vec<(u64, u32)>,
    pub raised: u64,
}

impl AccessCounters {
    pub fn new(c: &AccessCounterConfig) -> AccessCounters {
        AccessCounters {
            threshold: c.threshold,
            notify: ns_to_ps(c.notify_us * 1000.0),
            regions: FxHashMap::default(),
            notifications: vec![],
            raised: 0,
        }
    }

    /// `requests` remote line requests to page `vpn`.
    #[inline]
    pub fn count(&mut self, vpn: u64, requests: u32) {
        let (region, sub) = (vpn / BLOCK_PAGES, (vpn % BLOCK_PAGES) / SUB_PAGES);
        let e = self.regions.entry(region).or_insert((0, 0));
        e.0 += requests;
        e.1 |= 1 << sub;
        if e.0 >= self.threshold {
            let mask = e.1;
            self.regions.remove(&region);
            self.notifications.push((region, mask));
            self.raised += 1;
        }
    }
}

/// What the driver did with the notifications.
#[derive(Debug, Clone, Default)]
pub struct CounterStats {
    pub serviced: u64,
    pub pages: u64,
    pub bytes_h2d: u64,
    pub evictions: u64,
    pub time_ps: Ps,
}

impl Uvm {
    /// Can the bottom half take notifications at `now`? Not while a batch is in service or a migration runs (until its end has been applied).
    pub fn counters_can_run(&self, now: Ps) -> bool {
        matches!(self.state, super::State::Idle | super::State::Woken) && now >= self.busy_until && self.counter_pages.is_empty()
    }

    /// When to try again if `counters_can_run(now)` is false: the end of the
    /// batch or migration in service (None: a migration's end is not applied
    /// yet; its `Ev::UvmCountersDone` is due at `busy_until`, try just after).
    pub fn counters_retry_at(&self, now: Ps) -> Ps {
        let batch_end = match &self.state {
            super::State::Servicing { segments, .. } => segments.back().map_or(now, |s| s.end),
            _ => now,
        };
        batch_end.max(self.busy_until).max(now) + 1
    }

    /// Service `notes` at `now`: start migrating their sub-regions' remote
    /// pages. Returns when the copies end (then call `counters_done`), or
    /// None if nothing is to move.
    pub fn service_counters(&mut self, now: Ps, notes: &[(u64, u32)], link: &mut Link, residency: &mut Residency) -> Option<Ps> {
        let mut pages = vec![];
        for &(region, mask) in notes {
            for sub in (0..32).filter(|s| mask >> s & 1 == 1) {
                let first = region * BLOCK_PAGES + sub * SUB_PAGES;
                pages.extend((first..first + SUB_PAGES).filter(|&p| residency.is_remote(p) && self.prefetchable(p)));
            }
        }
        self.counters.serviced += notes.len() as u64;
        pages.sort_unstable();
        pages.dedup();
        let (end, moved, later) = self.migrate_to_gpu(now, &pages, Cause::AccessCounter, link, residency, false);
        let c = &mut self.counters;
        (c.pages, c.bytes_h2d, c.evictions) = (c.pages + moved.pages, c.bytes_h2d + moved.bytes_h2d, c.evictions + moved.evictions);
        if later.is_empty() {
            return None;
        }
        (self.busy_until, self.counter_start) = (end, now);
        self.counter_pages = later;
        self.counter_copies = moved.copies;
        Some(end)
    }

    /// The access-counter migration ended at `now`: its pages are GPU-resident;
    /// their blocks' translations (remote) are left in `shootdowns`.
    pub fn counters_done(&mut self, now: Ps, residency: &mut Residency) {
        self.counters.time_ps += now - self.counter_start;
        self.counter_copies.clear();
        let pages = std::mem::take(&mut self.counter_pages);
        for group in pages.chunk_by(|a, b| a / BLOCK_PAGES == b / BLOCK_PAGES) {
            // (A page the host took meanwhile is no longer remote: it stays there.)
            let group: Vec<u64> = group.iter().copied().filter(|&p| residency.is_remote(p)).collect();
            let Some(&first) = group.first() else { continue };
            self.make_gpu_resident(&group, residency);
            self.shootdowns.push(first / BLOCK_PAGES);
        }
    }
}

impl Uvm {
    /// The program ended at `end`. An access-counter migration still in service is planned
    /// beyond it (its blocks' CPU work, allocation and copies were laid out when it started), but
    /// the run stops there: the copies that had not started by `end` are taken back out of the
    /// counts (`uvm.access_counters.pages` and `bytes_h2d`, `uvm.bytes_h2d`, the link's, the
    /// `migrations` table). Copies in flight at `end` stay counted; the migration's time is not
    /// (`uvm.access_counters.time_ns` sums finished ones, as `uvm.time_ns` finished batches).
    pub fn program_ended(&mut self, end: Ps, link: &mut Link) {
        let late: Vec<_> = self.counter_copies.drain(..).filter(|c| c.start > end).collect();
        for c in &late {
            self.counters.pages -= c.pages;
            self.counters.bytes_h2d -= c.bytes;
            self.stats.bytes_h2d -= c.bytes;
            if c.bytes > 0 {
                link.retract(Dir::HostToDevice, (c.start, c.end), c.bytes);
            }
        }
        if let Some(rows) = self.migrations.as_mut().filter(|_| !late.is_empty()) {
            let end_ns = end as f64 / 1000.0;
            rows.retain(|r| !(r.cause == Cause::AccessCounter && r.start_ns > end_ns));
        }
    }
}

impl CounterStats {
    pub fn export(&self, raised: u64, m: &mut Metrics) {
        m.int("uvm.access_counters.notifications", raised);
        m.int("uvm.access_counters.serviced", self.serviced);
        m.int("uvm.access_counters.pages", self.pages);
        m.int("uvm.access_counters.bytes_h2d", self.bytes_h2d);
        m.int("uvm.access_counters.evictions", self.evictions);
        m.float("uvm.access_counters.time_ns", self.time_ps as f64 / 1000.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn a_region_notifies_at_the_threshold_with_its_touched_sub_regions() {
        let mut a = AccessCounters::new(&AccessCounterConfig { threshold: 4, ..Default::default() });
        a.count(0, 1);
        a.count(1, 1);
        a.count(BLOCK_PAGES, 3); // another region
        assert!(a.notifications.is_empty());
        a.count(3 * SUB_PAGES + 2, 2); // 4 in region 0: sub-regions 0 and 3
        assert_eq!(a.notifications, vec![(0, 0b1001)]);
        // The count starts again.
        a.count(0, 3);
        assert_eq!(a.notifications.len(), 1);
        a.count(BLOCK_PAGES + 511, 1);
        assert_eq!(a.notifications[1], (1, 1 | 1 << 31));
        assert_eq!(a.raised, 2);
    }

    #[test]
    fn the_driver_migrates_only_remote_pages_of_marked_sub_regions_when_the_copy_ends() {
        let cfg = Config::default();
        let mut u = Uvm::new(&cfg.uvm, 4, 4, 1);
        u.add_allocation(0, BLOCK_PAGES);
        u.host_touch(0, BLOCK_PAGES, 1);
        let (mut link, mut r) = (Link::new(&cfg.link), Residency::default());
        for p in 0..BLOCK_PAGES {
            if p != 5 {
                r.map_remote(p);
            }
        }
        assert!(u.counters_can_run(0));
        // Sub-regions 0 and 2: 31 remote pages (page 5 is not mapped at all).
        let end = u.service_counters(0, &[(0, 0b101)], &mut link, &mut r).expect("pages to move");
        assert!(end > 0 && !u.counters_can_run(end));
        assert!(r.is_remote(0) && !r.is_resident(0), "remote until the copy ends");
        assert_eq!(u.counters.time_ps, 0, "a migration's time counts when it ends");
        u.counters_done(end, &mut r);
        // It ran from 0 (the service) to `end`.
        assert_eq!(u.counters.time_ps, end);
        assert!(u.counters_can_run(end));
        // A try refused while the driver is busy comes back just past the end, not every picosecond.
        assert_eq!(u.counters_retry_at(0), end + 1);
        let moved: Vec<u64> = (0..BLOCK_PAGES).filter(|&p| r.is_resident(p)).collect();
        let want: Vec<u64> = (0..16).chain(32..48).filter(|&p| p != 5).collect();
        assert_eq!(moved, want);
        assert!(moved.iter().all(|&p| !r.is_remote(p)));
        assert_eq!((u.counters.pages, u.counters.bytes_h2d), (31, 31 * 4096));
        assert_eq!(u.shootdowns, vec![0]);
        // Nothing left to move in those sub-regions; the notification still counts as serviced (2 in all).
        assert_eq!(u.service_counters(end, &[(0, 0b101)], &mut link, &mut r), None);
        assert_eq!((u.counters.serviced, u.counters.pages, u.counters.time_ps), (2, 31, end));
    }

    #[test]
    fn a_migration_cut_by_the_end_of_the_program_keeps_only_the_copies_that_had_started() {
        let cfg = Config::default();
        let mut u = Uvm::new(&cfg.uvm, 4, 4, 1);
        u.add_allocation(0, 2 * BLOCK_PAGES);
        u.host_touch(0, 2 * BLOCK_PAGES, 1);
        let (mut link, mut r) = (Link::new(&cfg.link), Residency::default());
        for p in 0..2 * BLOCK_PAGES {
            r.map_remote(p);
        }
        // Sub-region 0 of regions 0 and 1: 16 pages of each block, one copy per block.
        u.service_counters(0, &[(0, 1), (1, 1)], &mut link, &mut r).expect("pages to move");
        let copies = u.counter_copies.clone();
        assert_eq!(copies.iter().map(|c| (c.pages, c.bytes)).collect::<Vec<_>>(), vec![(16, 16 * 4096); 2]);
        assert!(copies[0].start < copies[1].start, "block 1's copy is pushed after block 0's");
        assert_eq!((u.counters.pages, u.stats.bytes_h2d, link.stats[Dir::HostToDevice as usize].bytes), (32, 32 * 4096, 32 * 4096));
        // The program ends exactly when block 0's copy starts: that copy had started and stays counted;
        // block 1's had not: its 16 pages are taken back out of every count.
        u.program_ended(copies[0].start, &mut link);
        assert_eq!((u.counters.pages, u.counters.bytes_h2d, u.stats.bytes_h2d), (16, 16 * 4096, 16 * 4096));
        assert_eq!(link.stats[Dir::HostToDevice as usize].bytes, 16 * 4096);
        assert!(u.counter_copies.is_empty());
    }
}
