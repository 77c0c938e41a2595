//! The data side: per-SM L1 data caches, a shared L2 and DRAM.
//!
//! How it works: caches are physically tagged, so an access reaches them only
//! after its translation is ready. Each line slot remembers when its data
//! arrives (`ready`): a later access to a line still in flight merges with the
//! pending miss (an MSHR hit) instead of being counted as a hit. DRAM is a
//! fixed latency plus a per-channel [`Timeline`] of bandwidth. Requests are
//! processed in simulated-time order of issue, so the hierarchy computes the
//! completion time of an access directly, without an event per level.

mod timeline;

pub use timeline::Timeline;

use crate::assoc::{SetAssoc, Slot};
use crate::config::{CacheConfig, DramConfig, GpuConfig};
use crate::sim::{mix64, ns_to_ps, Clock, Ps};
use crate::stats::Metrics;

/// A cached line: when its data arrives, and (top bit) whether it is dirty;
/// packed in 8 bytes because the line array of a large L2 is walked per miss.
#[derive(Debug, Clone, Copy, Default)]
struct Line(u64);

const DIRTY: u64 = 1 << 63;

impl Line {
    fn new(ready: Ps, dirty: bool) -> Line {
        Line(ready | if dirty { DIRTY } else { 0 })
    }
    fn ready(self) -> Ps {
        self.0 & !DIRTY
    }
    fn dirty(self) -> bool {
        self.0 & DIRTY != 0
    }
}

/// Counters of one cache.
#[derive(Debug, Clone, Default)]
pub struct CacheStats {
    pub accesses: u64,
    pub hits: u64,
    pub mshr_hits: u64,
    pub misses: u64,
    pub writebacks: u64,
}

impl CacheStats {
    fn export(&self, m: &mut Metrics, p: &str) {
        m.int(format!("{p}.accesses"), self.accesses);
        m.int(format!("{p}.hits"), self.hits);
        m.int(format!("{p}.mshr_hits"), self.mshr_hits);
        m.int(format!("{p}.misses"), self.misses);
        m.int(format!("{p}.writebacks"), self.writebacks);
        m.ratio(format!("{p}.hit_rate"), self.hits, self.accesses);
    }
}

/// A set-associative cache of lines keyed by physical line number.
#[derive(Debug, Clone)]
pub struct Cache {
    arr: SetAssoc<Line>,
    /// Per slot, when its line's fill began (the miss left the cache); kept for the L1s
    /// on the back-pressured path only, whose directory locks a way from then until the
    /// fill's `ready`; empty otherwise.
    starts: Vec<Ps>,
    latency: Ps,
    pub stats: CacheStats,
}

/// Result of a cache lookup at time `t`.
enum Probe {
    /// Data available at this time (a hit, or a merge with an in-flight miss).
    Done(Ps),
    /// Not present: go to the next level at this time; the fill goes to this slot.
    Miss(Ps, Slot),
}

impl Cache {
    /// `starts`: keep each slot's fill start (for [`MemSystem::l1_accept`], which only the
    /// back-pressured path calls: the store per fill cost 4-5% of a TLB-hit replay).
    fn new(c: &CacheConfig, line_bytes: u32, clock: Clock, starts: bool) -> Option<Cache> {
        let entries = (c.size_bytes.0 / line_bytes as u64) as usize;
        (c.size_bytes.0 > 0).then(|| Cache {
            arr: SetAssoc::new(entries, c.ways as usize, c.replacement),
            starts: if starts { vec![0; entries] } else { vec![] },
            latency: clock.cycles(c.latency_cycles as u64),
            stats: CacheStats::default(),
        })
    }

    #[inline]
    fn probe(&mut self, line: u64, t: Ps) -> Probe {
        self.stats.accesses += 1;
        let at = t + self.latency;
        match self.arr.lookup_or_slot(line) {
            Ok(l) if l.ready() <= t => {
                self.stats.hits += 1;
                Probe::Done(at)
            }
            Ok(l) => {
                self.stats.mshr_hits += 1;
                Probe::Done(at.max(l.ready()))
            }
            Err(slot) => {
                self.stats.misses += 1;
                Probe::Miss(at, slot)
            }
        }
    }

    /// Fill `line` into the slot its probe just found (the set has not changed
    /// since), its fill begun at `start`; returns a dirty victim's line number.
    #[inline]
    fn fill(&mut self, slot: Slot, line: u64, start: Ps, ready: Ps, dirty: bool) -> Option<u64> {
        if let Some(s) = self.starts.get_mut(slot.index()) {
            *s = start;
        }
        match self.arr.fill_slot(slot, line, Line::new(ready, dirty)) {
            Some((victim, l)) if l.dirty() => {
                self.stats.writebacks += 1;
                Some(victim)
            }
            _ => None,
        }
    }
}

/// DRAM: latency plus per-channel bandwidth.
#[derive(Debug, Clone)]
pub struct Dram {
    channels: Vec<Timeline>,
    /// Lines per interleaving block (channel = line / this mod channels); 0 = hashed.
    interleave_lines: u64,
    latency: Ps,
    line_bytes: u64,
    pub reads: u64,
    pub writes: u64,
    pub pte_reads: u64,
}

impl Dram {
    pub fn new(c: &DramConfig, line_bytes: u32) -> Dram {
        let per_channel_gbps = c.bandwidth_gbps / c.channels as f64;
        Dram {
            channels: (0..c.channels).map(|_| Timeline::new(per_channel_gbps, line_bytes as u64)).collect(),
            interleave_lines: c.interleave_bytes.0 / line_bytes as u64,
            latency: ns_to_ps(c.latency_ns),
            line_bytes: line_bytes as u64,
            reads: 0,
            writes: 0,
            pte_reads: 0,
        }
    }

    #[inline]
    fn channel(&self, line: u64) -> usize {
        // Block interleaving (MGPUSim: 128 B blocks, one DRAM controller per L2 bank); 0 lines = hashed.
        if let Some(block) = line.checked_div(self.interleave_lines) {
            return (block % self.channels.len() as u64) as usize;
        }
        // Hash the line number so that power-of-two strides spread over channels;
        // multiply-high maps the hash onto the channel count without a division.
        ((mix64(line) as u128 * self.channels.len() as u128) >> 64) as usize
    }

    /// Read one line arriving at `t`; returns when its data is back.
    #[inline]
    pub fn read(&mut self, line: u64, t: Ps, now: Ps) -> Ps {
        self.reads += 1;
        let ch = self.channel(line);
        self.channels[ch].reserve(t, self.line_bytes, now) + self.latency
    }

    /// Write one line back arriving at `t` (occupies bandwidth; nobody waits for it).
    pub fn write(&mut self, line: u64, t: Ps, now: Ps) {
        self.writes += 1;
        let ch = self.channel(line);
        self.channels[ch].reserve(t, self.line_bytes, now);
    }

    /// A page-table-entry read that bypasses the data caches (svm-apu §IV.A: the
    /// IOMMU walker "does not have fast access to CPU caches"): it takes DRAM
    /// bandwidth, and `latency` is the walker's own memory latency.
    pub fn pte_read(&mut self, pa: u64, t: Ps, now: Ps, latency: Ps) -> Ps {
        self.pte_reads += 1;
        let line = pa / self.line_bytes;
        let ch = self.channel(line);
        self.channels[ch].reserve(t, 64, now) + latency
    }

    fn export(&self, m: &mut Metrics, p: &str) {
        m.int(format!("{p}.reads"), self.reads);
        m.int(format!("{p}.writes"), self.writes);
        m.int(format!("{p}.pte_reads"), self.pte_reads);
        m.int(format!("{p}.bytes"), (self.reads + self.writes) * self.line_bytes + self.pte_reads * 64);
    }
}

/// The data hierarchy of one GPU.
#[derive(Debug, Clone)]
pub struct MemSystem {
    l1d: Vec<Option<Cache>>,
    l2d: Option<Cache>,
    pub dram: Dram,
}

impl MemSystem {
    pub fn new(g: &GpuConfig) -> MemSystem {
        let clock = Clock::from_mhz(g.core_mhz);
        MemSystem {
            l1d: (0..g.sms).map(|_| Cache::new(&g.l1d, g.line_bytes, clock, g.vmem.backpressure)).collect(),
            l2d: Cache::new(&g.l2d, g.line_bytes, clock, false),
            dram: Dram::new(&g.dram, g.line_bytes),
        }
    }

    /// When SM `sm`'s L1 directory can take a read of `line` that reaches it at `t`: at
    /// once if the line is present or pending (a hit or a merge), else once a way of its
    /// set is not waiting for a fill (Akita's write-around directory holds a read miss
    /// while every way is locked). A way is locked from its fill's start to its data's
    /// arrival: a fill that began after `t` (a warp issued ahead of this one) does not
    /// hold this read. No state changes; `t` without an L1.
    pub fn l1_accept(&self, sm: usize, line: u64, t: Ps) -> Ps {
        match &self.l1d[sm] {
            Some(l1) => {
                l1.arr.absent_min(line, |i, l| if l1.starts.get(i).is_some_and(|&s| s > t) { t } else { t.max(l.ready()) }).unwrap_or(t)
            }
            None => t,
        }
    }

    /// Read physical line `line` for SM `sm`, translation ready at `t`; returns when the data is back.
    #[inline(always)]
    pub fn read(&mut self, sm: usize, line: u64, t: Ps, now: Ps) -> Ps {
        // Both levels' sets are cold in the CPU's caches on a streaming access: load them together.
        if let Some(l2) = &self.l2d {
            l2.arr.prefetch_set(line);
        }
        let Some(l1) = &mut self.l1d[sm] else {
            return self.read_l2(line, t, now);
        };
        match l1.probe(line, t) {
            Probe::Done(d) => d,
            Probe::Miss(at, slot) => {
                let done = self.read_l2(line, at, now);
                if let Some(l1) = &mut self.l1d[sm] {
                    l1.fill(slot, line, t, done, false);
                }
                done
            }
        }
    }

    /// Read line `line` for SM `sm` through its L1 only: a miss is fetched by `fetch` from the
    /// time it leaves the L1 and fills the L1, not the L2 (a remote GPU's memory, reached by an
    /// RDMA engine below the L1s). Without an L1, `fetch` at `t`.
    #[inline]
    pub fn read_l1_then(&mut self, sm: usize, line: u64, t: Ps, fetch: impl FnOnce(Ps) -> Ps) -> Ps {
        let Some(l1) = &mut self.l1d[sm] else {
            return fetch(t);
        };
        match l1.probe(line, t) {
            Probe::Done(d) => d,
            Probe::Miss(at, slot) => {
                let done = fetch(at);
                if let Some(l1) = &mut self.l1d[sm] {
                    l1.fill(slot, line, t, done, false);
                }
                done
            }
        }
    }

    #[inline(always)]
    fn read_l2(&mut self, line: u64, t: Ps, now: Ps) -> Ps {
        let Some(l2) = &mut self.l2d else {
            return self.dram.read(line, t, now);
        };
        match l2.probe(line, t) {
            Probe::Done(d) => d,
            Probe::Miss(m, slot) => {
                let done = self.dram.read(line, m, now);
                let l2 = self.l2d.as_mut().expect("checked above");
                if let Some(victim) = l2.fill(slot, line, t, done, false) {
                    self.dram.write(victim, done, now);
                }
                done
            }
        }
    }

    /// Prefetch physical line `line` into the L2 (prefetch.global.L2): returns when it is there.
    #[inline(never)]
    pub fn prefetch(&mut self, line: u64, t: Ps, now: Ps) -> Ps {
        self.read_l2(line, t, now)
    }

    /// Write physical line `line`: L1 is write-through without allocation, L2
    /// write-back with allocation (GPU practice). Returns when the L2 (or DRAM) has it.
    pub fn write(&mut self, sm: usize, line: u64, t: Ps, now: Ps) -> Ps {
        let mut at = t;
        if let Some(l1) = &mut self.l1d[sm] {
            at += l1.latency;
        }
        match &mut self.l2d {
            None => {
                self.dram.write(line, at, now);
                at + self.dram.latency
            }
            Some(l2) => {
                l2.arr.prefetch_set(line);
                l2.stats.accesses += 1;
                let done = at + l2.latency;
                match l2.arr.lookup_or_slot(line) {
                    Ok(l) => {
                        // A store merges into a line still being filled (byte-masked write).
                        if l.ready() > at {
                            l2.stats.mshr_hits += 1;
                        } else {
                            l2.stats.hits += 1;
                        }
                        *l = Line::new(l.ready(), true);
                    }
                    Err(slot) => {
                        l2.stats.misses += 1;
                        if let Some(victim) = l2.fill(slot, line, at, done, true) {
                            self.dram.write(victim, done, now);
                        }
                    }
                }
                done
            }
        }
    }

    pub fn export(&self, m: &mut Metrics, p: &str) {
        let mut l1 = CacheStats::default();
        for c in self.l1d.iter().flatten() {
            l1.accesses += c.stats.accesses;
            l1.hits += c.stats.hits;
            l1.mshr_hits += c.stats.mshr_hits;
            l1.misses += c.stats.misses;
        }
        l1.export(m, &format!("{p}.l1d"));
        self.l2d.as_ref().map(|c| c.stats.clone()).unwrap_or_default().export(m, &format!("{p}.l2d"));
        self.dram.export(m, &format!("{p}.dram"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assoc::Replacement;
    use crate::config::{ByteSize, Config};

    fn gpu() -> GpuConfig {
        let mut g = Config::default().gpu;
        g.core_mhz = 1000.0;
        g.l1d = CacheConfig { size_bytes: ByteSize(1024), ways: 2, latency_cycles: 10, replacement: Replacement::Lru };
        g.l2d = CacheConfig { size_bytes: ByteSize(4096), ways: 4, latency_cycles: 100, replacement: Replacement::Lru };
        g.dram = DramConfig { latency_ns: 200.0, bandwidth_gbps: 1000.0, channels: 1, ..DramConfig::default() };
        g
    }

    #[test]
    fn miss_then_hit_then_pending_merge() {
        let mut m = MemSystem::new(&gpu());
        // Cold: L1 10 ns + L2 100 ns + DRAM (128 B at 1000 GB/s = 0.128 ns) + 200 ns.
        let d = m.read(0, 7, 0, 0);
        assert!((310_000..=310_200).contains(&d), "{d}");
        // Same line from another SM before the data is back: L1 miss there, L2 merges with the pending line.
        let d2 = m.read(1, 7, 50_000, 50_000);
        assert_eq!(d2, d);
        assert_eq!(m.l2d.as_ref().unwrap().stats.mshr_hits, 1);
        // After arrival: an L1 hit costs the L1 latency.
        assert_eq!(m.read(0, 7, 400_000, 400_000), 410_000);
    }

    #[test]
    fn a_read_through_the_l1_only_fetches_on_a_miss_and_never_fills_the_l2() {
        let mut m = MemSystem::new(&gpu());
        let mut fetched = vec![];
        // Miss: leaves the L1 after its 10 ns; the fetch (a remote GPU, say 500 ns) decides the time.
        let d = m.read_l1_then(0, 9, 0, |at| {
            fetched.push(at);
            at + 500_000
        });
        assert_eq!((d, fetched.as_slice()), (510_000, &[10_000][..]));
        // A second read while the line is in flight merges with it; one after it arrives hits.
        assert_eq!(m.read_l1_then(0, 9, 100_000, |_| unreachable!("merged")), 510_000);
        assert_eq!(m.read_l1_then(0, 9, 600_000, |_| unreachable!("hit")), 610_000);
        let l1 = &m.l1d[0].as_ref().unwrap().stats;
        assert_eq!((l1.misses, l1.mshr_hits, l1.hits), (1, 1, 1));
        // Another SM's L1 does not have it, and the L2 never saw it.
        assert_eq!(m.read_l1_then(1, 9, 600_000, |at| at + 1), 610_001);
        assert_eq!(m.l2d.as_ref().unwrap().stats.accesses, 0);
    }

    #[test]
    fn a_read_miss_is_accepted_once_a_way_of_its_set_is_not_filling() {
        let mut g = gpu();
        g.vmem.backpressure = true;
        let mut m = MemSystem::new(&g);
        // L1: 1 KiB of 128 B lines, 2 ways: 4 sets; lines 0, 4, 8 share set 0.
        assert_eq!(m.l1_accept(0, 0, 5), 5, "empty set");
        let d0 = m.read(0, 0, 0, 0);
        assert_eq!(m.l1_accept(0, 8, 5), 5, "one way still empty");
        let d4 = m.read(0, 4, 1000, 1000);
        assert!(d0 < d4);
        // Both ways fill: line 8 waits for the earlier fill; lines 0 and 4 (pending) do not wait.
        assert_eq!(m.l1_accept(0, 8, 2000), d0);
        assert_eq!(m.l1_accept(0, 0, 2000), 2000);
        assert_eq!(m.l1_accept(0, 4, 2000), 2000);
        // Another set, or another SM's L1, is free.
        assert_eq!(m.l1_accept(0, 1, 2000), 2000);
        assert_eq!(m.l1_accept(1, 8, 2000), 2000);
        // After the fills nothing waits.
        assert_eq!(m.l1_accept(0, 8, d4 + 1), d4 + 1);
        // A read at 500, before line 4's fill began (1000), finds that way unlocked: a warp
        // processed after one issued ahead of it is not held by that warp's later misses.
        assert_eq!(m.l1_accept(0, 8, 500), 500);
    }

    #[test]
    fn a_way_is_locked_only_from_its_fills_start() {
        let mut g = gpu();
        g.vmem.backpressure = true;
        let mut m = MemSystem::new(&g);
        // Set 0 (lines 0, 4, 8): both ways fill from 3000 and 4000.
        let d0 = m.read(0, 0, 3000, 3000);
        let d4 = m.read(0, 4, 4000, 4000);
        // Before 3000 both ways were free; at 3500 one is; from 4000 both are locked.
        assert_eq!(m.l1_accept(0, 8, 2000), 2000);
        assert_eq!(m.l1_accept(0, 8, 3500), 3500);
        assert_eq!(m.l1_accept(0, 8, 4000), d0.min(d4));
        // The L2 keeps no fill starts: only the L1s' directories lock ways, and only on that path.
        assert!(m.l2d.as_ref().unwrap().starts.is_empty());
        assert!(MemSystem::new(&gpu()).l1d[0].as_ref().unwrap().starts.is_empty());
    }

    #[test]
    fn block_interleaved_channels_follow_the_address() {
        // MGPUSim's R9 Nano: 64 B lines, 128 B blocks over 16 channels.
        let c = DramConfig { latency_ns: 100.0, bandwidth_gbps: 512.0, channels: 16, interleave_bytes: ByteSize(128) };
        let d = Dram::new(&c, 64);
        let ch: Vec<usize> = [0u64, 1, 2, 3, 30, 31, 32, 33, 64, 64 * 7 + 5].iter().map(|&l| d.channel(l)).collect();
        assert_eq!(ch, [0, 0, 1, 1, 15, 15, 0, 0, 0, 2]);
        // 4 KiB-strided lines (64 lines apart) all land in one channel, as in MGPUSim.
        assert!((0..100u64).all(|k| d.channel(64 * k + 6) == 3));
        // The hashed default spreads the same lines over several channels.
        let h = Dram::new(&DramConfig { interleave_bytes: ByteSize(0), ..c }, 64);
        let used: std::collections::HashSet<usize> = (0..100u64).map(|k| h.channel(64 * k + 6)).collect();
        assert!(used.len() > 8, "{used:?}");
    }

    #[test]
    fn lines_of_one_channel_queue_behind_each_other() {
        // 32 GB/s per channel: a 64 B line takes 2 ns; latency 100 ns.
        let c = DramConfig { latency_ns: 100.0, bandwidth_gbps: 512.0, channels: 16, interleave_bytes: ByteSize(128) };
        let mut d = Dram::new(&c, 64);
        // The channel's bucketed timeline rounds to a few ps.
        let near = |got: Ps, want: Ps| got.abs_diff(want) <= 10;
        let r = [d.read(0, 0, 0), d.read(1, 0, 0), d.read(2, 0, 0), d.read(32, 0, 0)];
        assert!(near(r[0], 102_000), "{r:?}");
        assert!(near(r[1], 104_000), "line 1 shares line 0's 128 B block: {r:?}");
        assert!(near(r[2], 102_000), "line 2 is the next channel's: {r:?}");
        assert!(near(r[3], 106_000), "line 32 wraps round to channel 0: {r:?}");
    }

    #[test]
    fn dirty_victims_are_written_back() {
        let mut m = MemSystem::new(&gpu());
        // L2: 32 lines, 4-way, 8 sets. Write 5 lines mapping to set 0: the 5th evicts a dirty one.
        for i in 0..5u64 {
            m.write(0, i * 8, i * 1000, i * 1000);
        }
        assert_eq!(m.l2d.as_ref().unwrap().stats.writebacks, 1);
        assert_eq!(m.dram.writes, 1);
    }

    #[test]
    fn clean_victims_are_dropped_and_a_line_stored_to_becomes_dirty() {
        let mut m = MemSystem::new(&gpu());
        let wb = |m: &MemSystem| (m.l2d.as_ref().unwrap().stats.writebacks, m.dram.writes);
        // L2 set 1 (lines 1, 9, 17, ...; 4 ways): five reads, the fifth evicts line 1, clean.
        for (i, line) in [1u64, 9, 17, 25, 33].into_iter().enumerate() {
            m.read(0, line, i as u64 * 1000, i as u64 * 1000);
        }
        assert_eq!(wb(&m), (0, 0), "a clean victim is not written back");
        // A store to line 9 after its data arrived (about 310 ns): a hit, which dirties it.
        m.write(0, 9, 1_000_000, 1_000_000);
        assert_eq!(m.l2d.as_ref().unwrap().stats.hits, 1);
        // Four new lines evict the set's four (17, 25, 33, 9): only line 9 is written back.
        for (i, line) in [41u64, 49, 57, 65].into_iter().enumerate() {
            let t = 2_000_000 + i as u64 * 1000;
            m.read(0, line, t, t);
        }
        assert_eq!(wb(&m), (1, 1));
    }

    /// A store passes the L1 (write-through, 10 ns) and is done when the L2 (100 ns) has it: 110 ns;
    /// without an L2, when DRAM has it: 10 + 200 ns (its 128 B at 1000 GB/s take far less than the
    /// latency, and nobody waits for them).
    #[test]
    fn a_store_takes_the_l1_and_the_next_levels_latency() {
        let mut m = MemSystem::new(&gpu());
        assert_eq!(m.write(0, 3, 0, 0), 110_000);
        let mut g = gpu();
        g.l2d.size_bytes = ByteSize(0);
        let mut m = MemSystem::new(&g);
        assert_eq!(m.write(0, 3, 0, 0), 210_000);
    }

    /// A store to a line whose data arrives exactly when the store reaches the L2 is a hit, not a
    /// merge: line 9 is read at 0 (ready at d, about 310 ns); a store at d - 10 ns reaches the L2 at d.
    #[test]
    fn a_store_reaching_the_l2_as_the_line_arrives_is_a_hit() {
        let mut m = MemSystem::new(&gpu());
        let d = m.read(0, 9, 0, 0);
        m.write(0, 9, d - 10_000, d - 10_000);
        let l2 = &m.l2d.as_ref().unwrap().stats;
        assert_eq!((l2.hits, l2.mshr_hits), (1, 0));
    }

    /// A read merging with a line in flight is answered at the later of the line's arrival and its
    /// own lookup: line 9 arrives in the L1 at 510 ns; a read at 505 ns is answered after its
    /// 10 ns lookup, at 515.
    #[test]
    fn a_merge_is_answered_no_earlier_than_the_lookup() {
        let mut m = MemSystem::new(&gpu());
        assert_eq!(m.read_l1_then(0, 9, 0, |at| at + 500_000), 510_000);
        assert_eq!(m.read_l1_then(0, 9, 505_000, |_| unreachable!("merged")), 515_000);
    }
}
