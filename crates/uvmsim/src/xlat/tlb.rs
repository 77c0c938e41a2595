//! A TLB level: set-associative entries that remember when their
//! translation arrives, MSHRs that bound outstanding misses, and counters.

use super::Outstanding;
use crate::assoc::SetAssoc;
use crate::config::TlbConfig;
use crate::sim::{Clock, Ps};
use crate::stats::{Latency, Metrics};

#[derive(Debug, Clone, Copy, Default)]
pub struct Entry {
    /// Physical address of the page.
    pub pa: u64,
    /// When the translation is (or was) filled: later lookups before then merge into the miss.
    pub ready: Ps,
}

#[derive(Debug, Clone, Default)]
pub struct TlbStats {
    pub accesses: u64,
    pub hits: u64,
    pub mshr_hits: u64,
    pub misses: u64,
    pub miss_latency: Latency,
}

/// Outcome of a lookup at time `t`.
pub enum Lookup {
    /// Translation available at this time.
    Done(Ps, u64),
    /// Miss: ask the next level at this time (after the lookup and any MSHR wait).
    Miss(Ps),
}

#[derive(Debug, Clone)]
pub struct Tlb {
    arr: SetAssoc<Entry>,
    latency: Ps,
    mshrs: Outstanding,
    pub stats: TlbStats,
}

impl Tlb {
    pub fn new(c: &TlbConfig, clock: Clock) -> Option<Tlb> {
        (c.entries > 0).then(|| Tlb {
            arr: SetAssoc::new(c.entries as usize, c.ways as usize, c.replacement),
            latency: clock.cycles(c.latency_cycles as u64),
            mshrs: Outstanding::new(c.mshrs as usize),
            stats: TlbStats::default(),
        })
    }

    /// A TLB with explicit geometry and latency (IOMMU TLB).
    pub fn with(entries: usize, ways: usize, latency: Ps, mshrs: usize) -> Tlb {
        Tlb {
            arr: SetAssoc::new(entries, ways, crate::assoc::Replacement::Lru),
            latency,
            mshrs: Outstanding::new(mshrs),
            stats: TlbStats::default(),
        }
    }

    #[inline]
    pub fn lookup(&mut self, key: u64, t: Ps) -> Lookup {
        self.stats.accesses += 1;
        let at = t + self.latency;
        match self.arr.lookup(key) {
            Some(e) if e.ready <= t => {
                self.stats.hits += 1;
                Lookup::Done(at, e.pa)
            }
            Some(e) => {
                self.stats.mshr_hits += 1;
                Lookup::Done(at.max(e.ready), e.pa)
            }
            None => {
                self.stats.misses += 1;
                Lookup::Miss(self.mshrs.admit(at))
            }
        }
    }

    /// Complete a miss that was looked up at `t`: fill and free its MSHR at `ready`.
    pub fn fill_miss(&mut self, key: u64, pa: u64, t: Ps, ready: Ps) {
        self.arr.insert(key, Entry { pa, ready });
        self.mshrs.push(ready);
        self.stats.miss_latency.record(ready.saturating_sub(t));
    }

    /// Insert a translation nobody is waiting for (a prefetch); keeps an existing entry.
    pub fn fill_prefetch(&mut self, key: u64, pa: u64, ready: Ps) -> bool {
        if self.arr.probe(key).is_some() {
            return false;
        }
        self.arr.insert(key, Entry { pa, ready });
        true
    }

    /// Control protocol: drop one translation, or all.
    pub fn invalidate(&mut self, key: u64) -> bool {
        self.arr.invalidate(key)
    }
    pub fn flush(&mut self) {
        self.arr.flush()
    }

    pub fn export(&self, m: &mut Metrics, p: &str) {
        export_stats(&self.stats, self.mshrs.full_waits, m, p);
    }
}

/// Export the counters of one TLB level (or the sum of several).
pub fn export_stats(s: &TlbStats, full_waits: u64, m: &mut Metrics, p: &str) {
    m.int(format!("{p}.accesses"), s.accesses);
    m.int(format!("{p}.hits"), s.hits);
    m.int(format!("{p}.mshr_hits"), s.mshr_hits);
    m.int(format!("{p}.misses"), s.misses);
    m.int(format!("{p}.mshr_full_waits"), full_waits);
    m.ratio(format!("{p}.hit_rate"), s.hits, s.accesses);
    s.miss_latency.export(m, &format!("{p}.miss_latency_ns"));
}

/// Sum the counters of several TLBs of one level (per-SM L1s).
pub fn sum(tlbs: &[Tlb]) -> (TlbStats, u64) {
    let mut s = TlbStats::default();
    let mut w = 0;
    for t in tlbs {
        s.accesses += t.stats.accesses;
        s.hits += t.stats.hits;
        s.mshr_hits += t.stats.mshr_hits;
        s.misses += t.stats.misses;
        w += t.mshrs.full_waits;
    }
    s.miss_latency = merged_latency(tlbs);
    (s, w)
}

fn merged_latency(tlbs: &[Tlb]) -> Latency {
    let mut l = Latency::default();
    for t in tlbs {
        l.merge(&t.stats.miss_latency);
    }
    l
}
