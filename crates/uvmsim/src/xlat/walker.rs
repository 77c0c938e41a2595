//! A pool of page-table walkers with per-level page-walk caches (PWCs).
//!
//! How it works: a walk waits for a queue slot (threads + queue depth), then
//! for the earliest free walker thread. The PWCs of the non-leaf levels are
//! probed from the level just above the leaf upwards; a hit at level l means
//! the walk reads only levels l-1 down to the leaf. Each entry read costs
//! either a fixed latency or a DRAM access (IOMMU walkers read PTEs from
//! memory). The levels read are then cached in the PWCs.

use super::space::{level_shift, pte_addr};
use super::Outstanding;
use crate::assoc::{Replacement, SetAssoc};
use crate::config::WalkerConfig;
use crate::mem::Dram;
use crate::sim::{ns_to_ps, Ps};
use crate::stats::{Latency, Metrics};
use serde::Serialize;

#[derive(Debug, Clone, Default)]
pub struct WalkerStats {
    pub walks: u64,
    pub pte_reads: u64,
    pub latency: Latency,
    pub queue_wait: Latency,
    /// Indexed by level (0 and 1 unused: the leaf level is never cached).
    pub pwc_hits: [u64; 6],
    pub pwc_misses: [u64; 6],
}

/// One sampled page walk (the `walks` table).
#[derive(Debug, Clone, Serialize)]
pub struct WalkRecord {
    /// Which walker: "gmmu" or "iommu", and the GPU it belongs to (set when the tables are collected).
    pub walker: &'static str,
    pub gpu: u32,
    /// The walk's sequence number at its walker (every `walk_records_every`-th is kept).
    pub walk: u64,
    /// The virtual page walked (address >> 12).
    pub page: u64,
    /// Request reaching the walker, walk starting on a thread, leaf entry read.
    pub request_ns: f64,
    pub start_ns: f64,
    pub end_ns: f64,
    /// Page-table entries read (levels below the deepest page-walk-cache hit).
    pub levels_read: u32,
}

/// Keeps every `every`-th walk, up to `max`.
#[derive(Debug, Clone)]
pub struct WalkSampler {
    every: u64,
    max: usize,
    seen: u64,
    pub rows: Vec<WalkRecord>,
}

impl WalkSampler {
    pub fn new(every: u64, max: u64) -> WalkSampler {
        WalkSampler { every: every.max(1), max: max as usize, seen: 0, rows: vec![] }
    }

    #[inline]
    fn offer(&mut self, va: u64, t: Ps, start: Ps, end: Ps, levels_read: u32) {
        let n = self.seen;
        self.seen += 1;
        if n % self.every == 0 && self.rows.len() < self.max {
            let ns = |p: Ps| p as f64 / 1000.0;
            self.rows.push(WalkRecord {
                walker: "",
                gpu: 0,
                walk: n,
                page: va >> 12,
                request_ns: ns(t),
                start_ns: ns(start),
                end_ns: ns(end),
                levels_read,
            });
        }
    }
}

#[derive(Debug, Clone)]
pub struct Walker {
    threads: Vec<Ps>,
    queue: Outstanding,
    /// PWC per level, index = level (2..=levels).
    pwc: Vec<Option<SetAssoc<()>>>,
    levels: u32,
    level_latency: Ps,
    pte_from_dram: bool,
    pwc_latency: Ps,
    /// Limit-study oracle: a walk never waits for a thread or a queue slot.
    unlimited: bool,
    /// Sampled walk records (`translation.walk_records_every`).
    pub records: Option<Box<WalkSampler>>,
    /// Queue wait and entries read of the last walk (the multi-GPU latency breakdown reads them).
    pub last_wait: Ps,
    pub last_reads: u32,
    pub stats: WalkerStats,
}

impl Walker {
    pub fn new(c: &WalkerConfig, levels: u32) -> Walker {
        Walker {
            threads: vec![0; c.threads as usize],
            queue: Outstanding::new((c.threads + c.queue_depth) as usize),
            pwc: (0..=levels)
                .map(|l| {
                    (l >= 2 && c.pwc_entries > 0).then(|| SetAssoc::new(c.pwc_entries as usize, c.pwc_ways as usize, Replacement::Lru))
                })
                .collect(),
            levels,
            level_latency: ns_to_ps(c.level_latency_ns),
            pte_from_dram: c.pte_from_dram,
            pwc_latency: if c.pwc_entries > 0 { ns_to_ps(c.pwc_latency_ns) } else { 0 },
            unlimited: false,
            records: None,
            last_wait: 0,
            last_reads: 0,
            stats: WalkerStats::default(),
        }
    }

    /// When a walk issued at `t` would get a thread (no change; a full queue's extra wait is not counted).
    pub fn start_at(&self, t: Ps) -> Ps {
        if self.unlimited {
            return t;
        }
        self.threads.iter().copied().min().map_or(t, |f| f.max(t))
    }

    /// Requests admitted and waiting for a thread at `t`: walks not finished at `t`
    /// less the threads busy then (each busy thread runs one of them). Trans-FW's
    /// forwarding threshold reads it. Retires the walks done by `t`, as `walk` would.
    pub fn queued_at(&mut self, t: Ps) -> usize {
        if self.unlimited {
            return 0;
        }
        let busy = self.threads.iter().filter(|&&f| f > t).count();
        self.queue.in_flight(t).saturating_sub(busy)
    }

    /// No walk running or queued at `t` (IDYLL's IRMB writes back then).
    pub fn idle_at(&self, t: Ps) -> bool {
        self.unlimited || self.threads.iter().all(|&f| f <= t)
    }

    /// Limit-study oracle (infinite walker threads): every walk starts when it arrives.
    pub fn set_unlimited(&mut self) {
        self.unlimited = true;
    }

    /// Latency of one entry read (without DRAM queueing).
    pub fn level_latency(&self) -> Ps {
        self.level_latency
    }

    /// Walk for `va` whose leaf entry is at `leaf`, requested at `t`; returns when the walk is done.
    pub fn walk(&mut self, va: u64, leaf: u32, t: Ps, now: Ps, dram: &mut Dram) -> Ps {
        let (slot, start) = if self.unlimited {
            (usize::MAX, t)
        } else {
            let admitted = self.queue.admit(t);
            let (slot, free) = self.threads.iter().copied().enumerate().min_by_key(|&(_, f)| f).unwrap_or((0, t));
            (slot, admitted.max(free))
        };
        // Deepest cached level: read from the level below it.
        let mut first = self.levels;
        for l in leaf + 1..=self.levels {
            if let Some(pwc) = self.pwc[l as usize].as_mut() {
                if pwc.lookup(va >> level_shift(l)).is_some() {
                    self.stats.pwc_hits[l as usize] += 1;
                    first = l - 1;
                    break;
                }
                self.stats.pwc_misses[l as usize] += 1;
            }
        }
        let mut time = start + self.pwc_latency;
        for l in (leaf..=first).rev() {
            time =
                if self.pte_from_dram { dram.pte_read(pte_addr(l, va), time, now, self.level_latency) } else { time + self.level_latency };
            self.stats.pte_reads += 1;
            if l > leaf {
                if let Some(pwc) = self.pwc[l as usize].as_mut() {
                    pwc.insert(va >> level_shift(l), ());
                }
            }
        }
        if let Some(th) = self.threads.get_mut(slot) {
            *th = time;
            self.queue.push(time);
        }
        self.last_wait = start - t;
        self.last_reads = first - leaf + 1;
        if let Some(r) = self.records.as_mut() {
            r.offer(va, t, start, time, first - leaf + 1);
        }
        self.stats.walks += 1;
        self.stats.latency.record(time - t);
        self.stats.queue_wait.record(start - t);
        time
    }

    pub fn export(&self, m: &mut Metrics, p: &str) {
        let s = &self.stats;
        m.int(format!("{p}.walks"), s.walks);
        m.int(format!("{p}.pte_reads"), s.pte_reads);
        m.ratio(format!("{p}.pte_reads_per_walk"), s.pte_reads, s.walks);
        s.latency.export(m, &format!("{p}.latency_ns"));
        s.queue_wait.export(m, &format!("{p}.queue_wait_ns"));
        for l in 2..=self.levels as usize {
            if self.pwc[l].is_some() {
                m.int(format!("{p}.pwc.l{l}.hits"), s.pwc_hits[l]);
                m.int(format!("{p}.pwc.l{l}.misses"), s.pwc_misses[l]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DramConfig, WalkerConfig};
    use crate::xlat::space::{class_of, leaf_level};
    use proptest::prelude::*;

    #[test]
    fn sampler_keeps_every_nth_walk_up_to_its_bound() {
        let mut w = Walker::new(&cfg(4, 0), 4);
        w.records = Some(Box::new(WalkSampler::new(3, 2)));
        let mut dram = Dram::new(&DramConfig::default(), 128);
        for i in 0..10u64 {
            w.walk(i << 12, 1, i * 1000, i * 1000, &mut dram);
        }
        let rows = &w.records.as_ref().unwrap().rows;
        // Walks 0, 3, 6 qualify; the bound keeps two.
        assert_eq!(rows.iter().map(|r| (r.walk, r.page)).collect::<Vec<_>>(), vec![(0, 0), (3, 3)]);
        assert!(rows.iter().all(|r| r.request_ns <= r.start_ns && r.start_ns < r.end_ns && r.levels_read == 4));
    }

    fn cfg(threads: u32, pwc: u32) -> WalkerConfig {
        WalkerConfig {
            threads,
            queue_depth: 1000,
            level_latency_ns: 100.0,
            pte_from_dram: false,
            pwc_entries: pwc,
            pwc_ways: pwc.max(1),
            pwc_latency_ns: 0.0,
        }
    }

    fn dram() -> Dram {
        Dram::new(&DramConfig { latency_ns: 50.0, bandwidth_gbps: 1000.0, channels: 4 }, 128)
    }

    #[test]
    fn memory_reads_per_walk_by_page_size_and_levels() {
        // Without PWCs a walk reads every level from the root to the leaf.
        for (levels, page, reads) in
            [(4, 4096u64, 4u64), (4, 64 << 10, 4), (4, 2 << 20, 3), (4, 1 << 30, 2), (5, 4096, 5), (5, 2 << 20, 4), (5, 1 << 30, 3)]
        {
            let mut w = Walker::new(&cfg(1, 0), levels);
            let end = w.walk(0x1234_5678_9000, leaf_level(class_of(page)), 0, 0, &mut dram());
            assert_eq!(w.stats.pte_reads, reads, "levels {levels} page {page}");
            assert_eq!(end, reads * 100_000);
        }
    }

    #[test]
    fn pwc_hits_skip_upper_levels() {
        let mut w = Walker::new(&cfg(1, 16), 4);
        let mut d = dram();
        w.walk(0x40_0000_0000, 1, 0, 0, &mut d); // cold: 4 reads
        assert_eq!(w.stats.pte_reads, 4);
        // Next page in the same 2 MiB region: the level-2 entry is cached, 1 read.
        w.walk(0x40_0000_1000, 1, 1_000_000, 1_000_000, &mut d);
        assert_eq!(w.stats.pte_reads, 5);
        assert_eq!(w.stats.pwc_hits[2], 1);
        // Another 2 MiB region in the same 1 GiB: level 3 hits, 2 reads.
        w.walk(0x40_0020_0000, 1, 2_000_000, 2_000_000, &mut d);
        assert_eq!(w.stats.pte_reads, 7);
        assert_eq!((w.stats.pwc_hits[3], w.stats.pwc_misses[2]), (1, 2));
        // A 2 MiB page in that region: its leaf is level 2, level 3 cached: 1 read.
        w.walk(0x40_0040_0000, 2, 3_000_000, 3_000_000, &mut d);
        assert_eq!(w.stats.pte_reads, 8);
    }

    #[test]
    fn walks_beyond_the_thread_count_queue() {
        let mut w = Walker::new(&cfg(2, 0), 4);
        let mut d = dram();
        let ends: Vec<Ps> = (0..4).map(|i| w.walk(i << 40, 1, 0, 0, &mut d)).collect();
        assert_eq!(ends, vec![400_000, 400_000, 800_000, 800_000]);
        assert_eq!(w.stats.queue_wait.mean_ns(), 200.0);
    }

    #[test]
    fn dram_ptes_cost_dram_latency() {
        let mut c = cfg(1, 0);
        c.pte_from_dram = true;
        let mut w = Walker::new(&c, 4);
        let end = w.walk(0, 1, 0, 0, &mut dram());
        // 4 dependent reads of the walker's 100 ns each, plus 64 B at 250 GB/s per channel.
        assert!((400_000..=402_000).contains(&end), "{end}");
        assert_eq!(w.stats.pte_reads, 4);
    }

    proptest! {
        /// Against a reference: reads = levels from the deepest cached prefix to the leaf,
        /// with an unbounded PWC (a set of all prefixes seen) standing in for a large one.
        #[test]
        fn pte_reads_match_reference(vas in proptest::collection::vec(0u64..(1 << 36), 1..60), big in any::<bool>()) {
            let leaf = if big { 2 } else { 1 };
            let mut w = Walker::new(&cfg(4, 4096), 4);
            let mut d = dram();
            let mut seen: std::collections::HashSet<(u32, u64)> = Default::default();
            let mut expect = 0u64;
            for (i, &va) in vas.iter().enumerate() {
                let va = va << 12;
                let deepest = (leaf + 1..=4).find(|&l| seen.contains(&(l, va >> level_shift(l))));
                let first = deepest.map_or(4, |l| l - 1);
                expect += (first - leaf + 1) as u64;
                for l in leaf + 1..=first { seen.insert((l, va >> level_shift(l))); }
                w.walk(va, leaf, i as u64 * 1_000_000, i as u64 * 1_000_000, &mut d);
                prop_assert_eq!(w.stats.pte_reads, expect);
            }
        }
    }
}
