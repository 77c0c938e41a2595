//! A pool of page-table walkers with page-walk caches (PWCs).
//!
//! How it works: a walk waits for a queue slot (threads + queue depth), then
//! for the earliest walker thread free for as long as the walk takes. Walks
//! are computed in the order the engine reaches them, which is not always
//! their request order (a retried fault's walk is booked at the end of its
//! batch, an invalidation at its arrival), so a thread and a queue slot are
//! held only over the walk's own interval: a walk requested earlier than
//! walks already booked takes a thread idle at its time (a gap before them)
//! instead of queueing behind them. The PWC entries of the non-leaf levels
//! are probed from the level just above the leaf upwards; a hit at level l
//! means the walk reads only levels l-1 down to the leaf. Each entry read costs
//! either a fixed latency or a DRAM access (IOMMU walkers read PTEs from
//! memory). The levels read are then cached, upper levels first, so the
//! lowest is the most recently used.
//!
//! Organisations (`pwc_organization`): one cache per non-leaf level, or one
//! unified translation cache (UTC, Barr et al. ISCA 2010) whose entries are
//! tagged by level and share one LRU order. In a UTC only the deepest hit is
//! refreshed, so upper-level entries age while lower-level ones hit and are
//! evicted by the lower-level entries of new regions.

use super::space::{level_shift, pte_addr};
use super::Outstanding;
use crate::assoc::{Replacement, SetAssoc};
use crate::config::{PwcOrganization, WalkerConfig};
use crate::mem::Dram;
use crate::sim::{ns_to_ps, Ps, PS_PER_NS};
use crate::stats::{Latency, Metrics};
use serde::Serialize;

#[derive(Debug, Clone, Default)]
pub struct WalkerStats {
    pub walks: u64,
    pub pte_reads: u64,
    pub latency: Latency,
    pub queue_wait: Latency,
    /// Thread time spent walking: each walk's start on a thread to its leaf entry read.
    pub busy_ps: u64,
    /// Indexed by level (0 and 1 unused: the leaf level is never cached).
    pub pwc_hits: [u64; 6],
    pub pwc_misses: [u64; 6],
    /// Walks by page-table entries read, indexed by that count (1..=levels).
    pub reads_hist: [u64; 8],
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
    /// Per thread, the busy intervals [start, end) of its walks not yet over (`Busy`: sorted, and disjoint
    /// but where a DRAM-read walk overran its gap).
    threads: Vec<Busy>,
    /// Each thread's first two busy intervals (`threads[i][..2]`; unset where it has fewer), side
    /// by side: a saturated pool's walk examines every thread, and most threads' answer follows
    /// from these without reading their list (most hold one or two intervals).
    heads: Vec<[(Ps, Ps); 2]>,
    /// Queue slots (threads + queue depth), each held from a walk's admission to its end.
    slots: Outstanding,
    /// Per-level PWCs, index = level (2..=levels); empty with a unified PWC.
    pwc: Vec<Option<SetAssoc<()>>>,
    /// The unified PWC (UTC): keys are the level above the entry's tag.
    utc: Option<SetAssoc<()>>,
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
        let unified = c.pwc_organization == PwcOrganization::Unified;
        let cache = || SetAssoc::new(c.pwc_entries as usize, c.pwc_ways as usize, Replacement::Lru);
        Walker {
            threads: vec![Busy { gallop: !c.pte_from_dram, ..Busy::default() }; c.threads as usize],
            heads: vec![[(0, 0); 2]; c.threads as usize],
            // In usize: a u32 sum would wrap for a queue depth near u32::MAX (release builds) and leave almost no slots.
            slots: Outstanding::new(c.threads as usize + c.queue_depth as usize),
            pwc: (0..=levels).map(|l| (l >= 2 && c.pwc_entries > 0 && !unified).then(cache)).collect(),
            utc: (c.pwc_entries > 0 && unified).then(cache),
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

    /// When a walk issued at `t` would get a thread (no change): the earliest gap that holds the
    /// shortest walk (one entry read); a full queue's extra wait is not counted.
    pub fn start_at(&self, t: Ps) -> Ps {
        if self.unlimited || self.threads.is_empty() {
            return t;
        }
        let d = self.pwc_latency + self.level_latency;
        self.threads.iter().map(|th| gap(th.list(), t, d, &mut { th.finger }, th.gallop)).min().unwrap_or(t)
    }

    /// Requests admitted and waiting for a thread at `t`: walks holding a queue slot at `t`
    /// less the threads busy then (each busy thread runs one of them). Trans-FW's
    /// forwarding threshold reads it.
    pub fn queued_at(&mut self, t: Ps) -> usize {
        if self.unlimited {
            return 0;
        }
        self.held_at(t).saturating_sub(self.busy_at(t))
    }

    /// No walk running at `t` (IDYLL's IRMB writes back then).
    pub fn idle_at(&self, t: Ps) -> bool {
        self.unlimited || self.busy_at(t) == 0
    }

    fn busy_at(&self, t: Ps) -> usize {
        self.threads.iter().map(Busy::list).filter(|th| th.get(th.partition_point(|&(_, e)| e <= t)).is_some_and(|&(a, _)| a <= t)).count()
    }

    fn held_at(&self, t: Ps) -> usize {
        self.slots.held_at(t)
    }

    /// Limit-study oracle (infinite walker threads): every walk starts when it arrives.
    pub fn set_unlimited(&mut self) {
        self.unlimited = true;
    }

    /// Page-table levels (the root's level).
    pub fn levels(&self) -> u32 {
        self.levels
    }

    /// Latency of one entry read (without DRAM queueing).
    pub fn level_latency(&self) -> Ps {
        self.level_latency
    }

    /// Walk for `va` whose leaf entry is at `leaf`, requested at `t`; returns when the walk is done.
    pub fn walk(&mut self, va: u64, leaf: u32, t: Ps, now: Ps, dram: &mut Dram) -> Ps {
        // Deepest cached level: read from the level below it.
        let mut first = self.levels;
        for l in leaf + 1..=self.levels {
            if let Some(hit) = self.pwc_lookup(l, va) {
                if hit {
                    self.stats.pwc_hits[l as usize] += 1;
                    first = l - 1;
                    break;
                }
                self.stats.pwc_misses[l as usize] += 1;
            }
        }
        // Intervals over before both this walk's request and the engine's time are pruned.
        let floor = now.min(t);
        let (slot, admitted, start) = if self.unlimited {
            (usize::MAX, t, t)
        } else {
            let admitted = self.slots.admit(t, floor);
            // Fixed-latency reads make this the walk's length; DRAM queueing may lengthen it.
            let d = self.pwc_latency + (first - leaf + 1) as Ps * self.level_latency;
            // The walk takes the thread that can start it first (ties to the lower thread). The first
            // thread with the least bound (see `start_bound`) usually starts at that bound, and then no
            // thread starts earlier: the others are not read. Otherwise every thread is searched, the
            // candidate again (in order, pruning their lists: reusing the candidate's start pruned fewer
            // and cost more, docs/performance.md session 77), each passed over where its bound shows it
            // cannot start before the best so far (a saturated walker's walk read every thread's list:
            // a fifth of bench row oversub-stream-driver; then checked every thread's bound: a tenth of
            // faults-sgemm).
            let mut cand = (Ps::MAX, usize::MAX);
            for (i, head) in self.heads.iter().enumerate() {
                let b = start_bound(head, admitted, d);
                if b < cand.0 {
                    cand = (b, i);
                    if b == admitted {
                        break;
                    }
                }
            }
            let mut best = (usize::MAX, Ps::MAX);
            if let Some(th) = self.threads.get_mut(cand.1) {
                if thread_start(th, &mut self.heads[cand.1], admitted, d, floor, Ps::MAX) == Some(cand.0) {
                    best = (cand.1, cand.0);
                }
            }
            if best.0 == usize::MAX {
                for (i, th) in self.threads.iter_mut().enumerate() {
                    let head = &mut self.heads[i];
                    if start_bound(head, admitted, d) >= best.1 {
                        continue;
                    }
                    let Some(s) = thread_start(th, head, admitted, d, floor, best.1) else { continue };
                    if s < best.1 {
                        best = (i, s);
                        if s == admitted {
                            break;
                        }
                    }
                }
            }
            if self.threads.is_empty() {
                (usize::MAX, admitted, admitted)
            } else {
                (best.0, admitted, best.1)
            }
        };
        let mut time = start + self.pwc_latency;
        for l in (leaf..=first).rev() {
            time =
                if self.pte_from_dram { dram.pte_read(pte_addr(l, va), time, now, self.level_latency) } else { time + self.level_latency };
            self.stats.pte_reads += 1;
            if l > leaf {
                self.pwc_insert(l, va);
            }
        }
        if let Some(th) = self.threads.get_mut(slot) {
            book(th, start, time);
            self.heads[slot] = heads_of(th.list());
            self.slots.push_interval(admitted, time);
        }
        self.last_wait = start - t;
        self.last_reads = first - leaf + 1;
        if let Some(r) = self.records.as_mut() {
            r.offer(va, t, start, time, first - leaf + 1);
        }
        self.stats.walks += 1;
        self.stats.reads_hist[(first - leaf + 1) as usize] += 1;
        self.stats.latency.record(time - t);
        self.stats.queue_wait.record(start - t);
        self.stats.busy_ps += time - start;
        time
    }

    /// Probe the PWC for `va`'s level-`l` entry: None if no cache holds level `l`.
    #[inline]
    fn pwc_lookup(&mut self, l: u32, va: u64) -> Option<bool> {
        match self.utc.as_mut() {
            Some(u) => Some(u.lookup(utc_key(l, va)).is_some()),
            None => self.pwc[l as usize].as_mut().map(|p| p.lookup(va >> level_shift(l)).is_some()),
        }
    }

    #[inline]
    fn pwc_insert(&mut self, l: u32, va: u64) {
        match self.utc.as_mut() {
            Some(u) => {
                u.insert(utc_key(l, va), ());
            }
            None => {
                if let Some(p) = self.pwc[l as usize].as_mut() {
                    p.insert(va >> level_shift(l), ());
                }
            }
        }
    }

    /// A PWC (of either organisation) caches level `l`.
    fn caches(&self, l: usize) -> bool {
        self.utc.is_some() || self.pwc.get(l).is_some_and(|p| p.is_some())
    }

    /// Export `{p}.*`; `span` (ps) is the run's length, over which the threads' busy time is averaged.
    pub fn export(&self, m: &mut Metrics, p: &str, span: Ps) {
        let s = &self.stats;
        m.int(format!("{p}.walks"), s.walks);
        m.float(format!("{p}.busy_ns"), s.busy_ps as f64 / PS_PER_NS as f64);
        // Little's law: the mean number of walks on threads; over the thread count, the fraction busy.
        let in_flight = if span > 0 { s.busy_ps as f64 / span as f64 } else { 0.0 };
        m.float(format!("{p}.walks_in_flight_mean"), in_flight);
        m.float(format!("{p}.utilization"), in_flight / self.threads.len().max(1) as f64);
        m.int(format!("{p}.pte_reads"), s.pte_reads);
        m.ratio(format!("{p}.pte_reads_per_walk"), s.pte_reads, s.walks);
        s.latency.export(m, &format!("{p}.latency_ns"));
        s.queue_wait.export(m, &format!("{p}.queue_wait_ns"));
        for k in 1..=self.levels as usize {
            m.int(format!("{p}.reads.{k}"), s.reads_hist[k]);
        }
        for l in 2..=self.levels as usize {
            if self.caches(l) {
                m.int(format!("{p}.pwc.l{l}.hits"), s.pwc_hits[l]);
                m.int(format!("{p}.pwc.l{l}.misses"), s.pwc_misses[l]);
            }
        }
    }
}

/// The earliest start at or after `t` of a `d`-long interval free in `busy` (sorted, disjoint).
/// With `gallop`, `finger` is where to start looking for the first interval ending after `t` (any
/// index will do); it is left there.
#[inline]
fn gap(busy: &[(Ps, Ps)], t: Ps, d: Ps, finger: &mut usize, gallop: bool) -> Ps {
    match busy.last() {
        None => return t,
        Some(&(_, e)) if e <= t => return t,
        _ => {}
    }
    let mut s = t;
    *finger = partition_near(busy, gallop.then_some(*finger), |&(_, e)| e <= t);
    for &(a, e) in &busy[*finger..] {
        if s + d <= a {
            break;
        }
        s = s.max(e);
    }
    s
}

/// A bound below which a thread whose first two held intervals are `head` cannot start a `d`-long
/// walk admitted at `admitted`: the end of the first of them that ends after `admitted` when it
/// overlaps [admitted, admitted + d) (no start before that end fits), else `admitted`. (The second
/// counts when the first is over: a thread's intervals are pruned only when it is searched.)
#[inline(always)]
fn start_bound(head: &[(Ps, Ps); 2], admitted: Ps, d: Ps) -> Ps {
    let (a, e) = if head[0].1 > admitted { head[0] } else { head[1] };
    if e > admitted && a < admitted + d {
        e
    } else {
        admitted
    }
}

/// When thread `th` (its first two intervals `head`) can start a `d`-long walk admitted at
/// `admitted`: `gap(th, admitted, d)`, or `None` when its heads show it cannot start before
/// `limit`. Its intervals over by `floor` are dropped first.
#[inline(always)]
fn thread_start(busy: &mut Busy, head: &mut [(Ps, Ps); 2], admitted: Ps, d: Ps, floor: Ps, limit: Ps) -> Option<Ps> {
    if !busy.list().is_empty() && head[0].1 <= floor {
        // Few intervals end between two prunes: a thread that gallops does so from the front.
        let n = partition_near(busy.list(), busy.gallop.then_some(0), |&(_, e)| e <= floor);
        busy.drop_front(n);
        *head = heads_of(busy.list());
    }
    let (th, finger, gallop) = (&busy.v[busy.over..], &mut busy.finger, busy.gallop);
    debug_assert_eq!(*head, heads_of(th), "a thread's heads are its first intervals");
    // `gap(th, admitted, d)`, from the first interval ending after `admitted` when it is one of the
    // two held here: intervals are disjoint and sorted, so their ends are too.
    let n = th.len();
    let k = if n == 0 || head[0].1 > admitted {
        0
    } else if n >= 2 && head[1].1 > admitted {
        1
    } else if n <= 2 {
        n // none ends after `admitted`: free from then on
    } else {
        usize::MAX // not known here
    };
    Some(if k == n {
        admitted
    } else if k == usize::MAX {
        gap(th, admitted, d, finger, gallop)
    } else {
        let (a, e) = head[k];
        if admitted + d <= a {
            admitted
        } else if e >= limit {
            // It starts at e or later: no earlier than `limit`.
            return None;
        } else if k + 1 == n {
            e
        } else {
            gap(th, admitted, d, finger, gallop)
        }
    })
}

/// `busy.partition_point(pred)`, searched outwards from `hint` with steps doubling (galloping), then
/// by bisection within the last step: O(log k) probes for an answer k places from the hint, most of
/// them near it (in cache), where a bisection of the whole list touches lines far apart. Without a
/// hint, or on a short list, a bisection of the whole list, as `partition_point`.
#[inline]
fn partition_near(busy: &[(Ps, Ps)], hint: Option<usize>, pred: impl Fn(&(Ps, Ps)) -> bool) -> usize {
    let n = busy.len();
    let Some(hint) = hint.filter(|_| n > 16) else {
        return busy.partition_point(pred); // a short list is one or two cache lines: no gallop
    };
    let h = hint.min(n);
    let mut step = 1;
    if h < n && pred(&busy[h]) {
        // The answer is after `h`; `pred` holds below `lo`.
        let mut lo = h + 1;
        loop {
            let probe = lo + step - 1;
            if probe >= n {
                return lo + busy[lo..].partition_point(&pred);
            }
            if !pred(&busy[probe]) {
                return lo + busy[lo..probe].partition_point(&pred);
            }
            lo = probe + 1;
            step *= 2;
        }
    }
    // The answer is at or before `h`; `pred` fails from `hi` on.
    let mut hi = h;
    loop {
        if hi < step {
            return busy[..hi].partition_point(&pred);
        }
        let probe = hi - step;
        if pred(&busy[probe]) {
            return probe + 1 + busy[probe + 1..hi].partition_point(&pred);
        }
        hi = probe;
        step *= 2;
    }
}

/// One walker thread's busy intervals [start, end), sorted by start and disjoint (but where a walk
/// overran its gap: see `gallop`): `list()`. Those over are dropped from its front (`drop_front`);
/// a long list drops them from memory only in bulk, when a quarter of it is over, and skips them
/// until then: dropping a few at a time moved the thousands of intervals booked ahead each time
/// (32 GPUs with on-touch migration: a sixth of the run).
#[derive(Debug, Clone, Default)]
struct Busy {
    v: Vec<(Ps, Ps)>,
    /// Intervals at the front of `v` that are over: not in the list.
    over: usize,
    /// Where in the list the last search found the first interval ending after the walk's admission:
    /// the next search gallops from there. Walks booked in time order search near one another, far
    /// into a long list (32 GPUs with on-touch migration: invalidation walks booked ahead leave
    /// thousands of intervals per thread, and a bisection of the whole list missed the cache at each
    /// step). Only a hint: a stale one costs a longer gallop, not a different answer.
    finger: usize,
    /// Search from `finger` (else bisect the whole list). Only where walks take their fixed length:
    /// a walk whose PTE reads queue at DRAM can run past the gap it was given and overlap the next
    /// interval, `book` then leaves intervals whose ends are out of order, and a gallop and a
    /// bisection may stop at different places in such a list (the kaveri-apu IOMMU's walks: a
    /// changed run of experiment apu-divergence).
    gallop: bool,
}

impl Busy {
    #[inline]
    fn list(&self) -> &[(Ps, Ps)] {
        &self.v[self.over..]
    }

    /// Drop the list's first `n` intervals.
    #[inline]
    fn drop_front(&mut self, n: usize) {
        self.over += n;
        self.finger = self.finger.saturating_sub(n);
        if self.v.len() <= LONG_LIST || self.over * 4 >= self.v.len() {
            self.v.drain(..self.over);
            self.over = 0;
        }
    }
}

/// A thread's list longer than this drops its intervals that are over from memory only in bulk.
const LONG_LIST: usize = 64;

/// The first two intervals of `busy`, (0, 0) where it has fewer.
#[inline]
fn heads_of(busy: &[(Ps, Ps)]) -> [(Ps, Ps); 2] {
    [busy.first().copied().unwrap_or_default(), busy.get(1).copied().unwrap_or_default()]
}

/// Mark [s, e) busy in `busy`'s list, merging it with the intervals it touches so that a thread's
/// back-to-back walks are one interval (a burst of walks stays one entry long). Its place in the list
/// is looked for from the thread's finger (the walk's start is near it).
fn book(b: &mut Busy, s: Ps, e: Ps) {
    let o = b.over;
    let busy = &mut b.v;
    let i = o + partition_near(&busy[o..], b.gallop.then_some(b.finger), |&(a, _)| a < s);
    let prev = i > o && busy[i - 1].1 >= s;
    let next = i < busy.len() && busy[i].0 <= e;
    match (prev, next) {
        (true, true) => {
            busy[i - 1].1 = busy[i].1.max(e);
            busy.remove(i);
        }
        (true, false) => busy[i - 1].1 = busy[i - 1].1.max(e),
        (false, true) => busy[i] = (s, busy[i].1.max(e)),
        (false, false) => busy.insert(i, (s, e)),
    }
}

/// A unified PWC's key for `va`'s level-`l` entry: the level above the entry's
/// tag (va >> 21 or more is below 2^43 for 5-level 57-bit addresses).
#[inline]
fn utc_key(l: u32, va: u64) -> u64 {
    (l as u64) << 56 | va >> level_shift(l)
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

    /// Walks `(engine time step, request ahead of it, 2 MiB leaf)` in ns, booked in this order on a
    /// walker of `threads` threads: their starts, the reference pool's, the most intervals a thread's
    /// list skipped (over, not yet dropped from memory), and the walker.
    fn starts_and_reference(reqs: &[(u64, u64, bool)], threads: usize) -> (Vec<Ps>, Vec<Ps>, usize, Walker) {
        let mut c = cfg(threads as u32, 0);
        c.queue_depth = 10_000;
        let mut w = Walker::new(&c, 4);
        let mut d = dram();
        let mut now = 0;
        let mut walks = vec![];
        let mut starts = vec![];
        let mut skipped = 0;
        for (i, &(step, ahead, big)) in reqs.iter().enumerate() {
            now += step * 1_000;
            let t = now + ahead * 1_000;
            let leaf = if big { 2 } else { 1 };
            let end = w.walk((i as u64) << 40, leaf, t, now, &mut d);
            let len = (5 - leaf) as Ps * 100_000;
            walks.push((t, len));
            starts.push(end - len);
            skipped = skipped.max(w.threads.iter().map(|b| b.over).max().unwrap_or(0));
        }
        (starts, reference_starts(&walks, threads), skipped, w)
    }

    /// A long list skips its intervals that are over until a quarter of it is, then drops them; the
    /// walks start where the reference pool starts them throughout.
    #[test]
    fn a_long_list_skips_intervals_that_are_over_and_drops_them_in_bulk() {
        // One thread; walks of 400 ns requested 1 µs apart, 100 µs ahead of the engine's time, which
        // moves 1 µs a walk: about 100 intervals held, one over at each walk.
        let reqs: Vec<(u64, u64, bool)> = (0..400).map(|i| (if i == 0 { 0 } else { 1_000 }, 100_000, false)).collect();
        let (starts, expected, skipped, w) = starts_and_reference(&reqs, 1);
        assert_eq!(starts, expected);
        // The list holds no interval that is over: the engine's time is at the last walk's request.
        let now: Ps = reqs.iter().map(|r| r.0 * 1_000).sum();
        assert!(lists(&w)[0].iter().all(|&(_, e)| e > now));
        // Never more than a quarter of the ~135 in memory (33 here); never dropped, 300 would be.
        assert!((1..=34).contains(&skipped), "skipped up to {skipped}");
    }

    /// A long list's intervals that are over are not in it, and a walk booked to start where one of
    /// them ended is an interval of its own, not merged into the skipped one (which would hide it).
    #[test]
    fn a_walk_starting_where_a_skipped_interval_ended_is_booked_in_the_list() {
        // One thread busy 0.4 µs of every µs, 70 times (more than LONG_LIST); a 400 ns walk at
        // 0.4 µs, with the engine there: the first interval is over (skipped, still in memory) and
        // the walk fits the 0.4-1.0 µs gap.
        let u = 1_000_000;
        let mut w = Walker::new(&cfg(1, 0), 4);
        set_lists(&mut w, vec![(0..70).map(|k| (k * u, k * u + 400_000)).collect()]);
        assert_eq!(w.walk(0, 1, 400_000, 400_000, &mut dram()), 800_000);
        assert_eq!(w.threads[0].over, 1, "skipped, not dropped");
        let list = &lists(&w)[0];
        assert_eq!((list.len(), list[0], list[1]), (70, (400_000, 800_000), (u, u + 400_000)));
        // Another walk then is not given the thread at 0.4 µs again: it takes the 1.4-2.0 µs gap.
        assert_eq!(w.walk(1 << 40, 1, 400_000, 400_000, &mut dram()), u + 800_000);
    }

    /// Only walkers whose walks take their fixed length search from the finger: a DRAM-read walk can
    /// overrun its gap, leaving ends out of order, where a gallop and a bisection may disagree.
    #[test]
    fn only_fixed_latency_walkers_gallop() {
        let mut c = cfg(2, 0);
        assert!(Walker::new(&c, 4).threads.iter().all(|b| b.gallop));
        c.pte_from_dram = true;
        assert!(Walker::new(&c, 4).threads.iter().all(|b| !b.gallop));
        // Such a list: ends 10, 30, 20; "ends by 20" holds, fails, holds again: no search can stop at
        // one place that splits it, and without a hint the walker bisects as it always did.
        let busy = [(0, 10), (15, 30), (16, 20)];
        assert_eq!(busy.map(|(_, e)| e <= 20), [true, false, true]);
        assert_eq!(partition_near(&busy, None, |&(_, e)| e <= 20), busy.partition_point(|&(_, e)| e <= 20));
    }

    /// Give the walker's threads these busy lists.
    fn set_lists(w: &mut Walker, lists: Vec<Vec<(Ps, Ps)>>) {
        w.threads = lists.into_iter().map(|v| Busy { v, gallop: !w.pte_from_dram, ..Busy::default() }).collect();
        w.heads = w.threads.iter().map(|th| heads_of(th.list())).collect();
    }

    /// The walker's threads' busy lists.
    fn lists(w: &Walker) -> Vec<Vec<(Ps, Ps)>> {
        w.threads.iter().map(|th| th.list().to_vec()).collect()
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
            pwc_organization: PwcOrganization::PerLevel,
        }
    }

    fn dram() -> Dram {
        Dram::new(&DramConfig { latency_ns: 50.0, bandwidth_gbps: 1000.0, channels: 4, ..DramConfig::default() }, 128)
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
        // Four 400 ns walks on two threads: 1.6 µs of thread time; over a 1 µs run that is 1.6 walks in
        // flight on average, 80% of the threads; over 2 µs, 0.8 and 40%.
        for (span, in_flight) in [(1_000_000, 1.6), (2_000_000, 0.8)] {
            let mut m = Metrics::default();
            w.export(&mut m, "w", span);
            assert_eq!(m.get("w.busy_ns"), Some(1600.0));
            assert_eq!(m.get("w.walks_in_flight_mean"), Some(in_flight));
            assert_eq!(m.get("w.utilization"), Some(in_flight / 2.0));
        }
    }

    #[test]
    fn a_walk_requested_before_walks_already_booked_takes_an_idle_gap() {
        // One thread, 400 ns walks. A is booked first for 1.0 µs; B, booked next but requested at
        // 0, runs before it on the idle thread (holding the thread from A's booking would end B at
        // 1.8 µs); C (0.3 µs) waits for B and fits the 0.4–1.0 µs gap; D (0.5 µs) does not fit
        // what is left before A and runs after it.
        let mut w = Walker::new(&cfg(1, 0), 4);
        let mut d = dram();
        let ends: Vec<Ps> = [1_000_000, 0, 300_000, 500_000].into_iter().map(|t| w.walk(t << 16, 1, t, 0, &mut d)).collect();
        assert_eq!(ends, vec![1_400_000, 400_000, 800_000, 1_800_000]);
        assert_eq!(w.stats.queue_wait.mean_ns(), (100.0 + 900.0) / 4.0);
        assert!(w.idle_at(900_000) && !w.idle_at(1_000_000) && !w.idle_at(1_400_000) && w.idle_at(1_800_000));
        // The shortest walk (one read, 100 ns) at 0.2 µs would get the thread after C; at
        // 0.85 µs at once (the gap before A); at 1.1 µs after D.
        assert_eq!([200_000, 850_000, 1_100_000].map(|t| w.start_at(t)), [800_000, 850_000, 1_800_000]);
    }

    #[test]
    fn a_tie_goes_to_the_lower_thread_when_the_least_bound_misleads() {
        // U = 100 ns; a walk reads 4 levels: 4U. Thread 0 is busy over [0, 2U); thread 1 over [0, U)
        // and [1.5U, 2U). Thread 1's first interval ends first (its bound U), but a 4U walk does not
        // fit before 1.5U: it could start at 2U, as thread 0 can (bound 2U, free from then on). The
        // tie goes to thread 0, whose [0, 2U) and the walk's [2U, 6U) merge into one interval.
        let u_ps = 100_000;
        let mut w = Walker::new(&cfg(2, 0), 4);
        set_lists(&mut w, vec![vec![(0, 2 * u_ps)], vec![(0, u_ps), (3 * u_ps / 2, 2 * u_ps)]]);
        assert_eq!(w.walk(0, 1, 0, 0, &mut dram()), 6 * u_ps);
        assert_eq!(lists(&w), vec![vec![(0, 6 * u_ps)], vec![(0, u_ps), (3 * u_ps / 2, 2 * u_ps)]]);
    }

    #[test]
    fn a_walk_fits_exactly_before_a_threads_next_interval() {
        // U = 100 ns; a 4U walk at 0. Thread 0 is idle until 4U: the walk fits exactly before its
        // interval [4U, 10U) and starts at once, although thread 1 frees up first (at U).
        let u_ps = 100_000;
        let mut w = Walker::new(&cfg(2, 0), 4);
        set_lists(&mut w, vec![vec![(4 * u_ps, 10 * u_ps)], vec![(0, u_ps)]]);
        assert_eq!(w.walk(0, 1, 0, 0, &mut dram()), 4 * u_ps);
        assert_eq!(lists(&w), vec![vec![(0, 10 * u_ps)], vec![(0, u_ps)]]);
    }

    #[test]
    fn a_full_queue_admits_when_a_slot_held_at_the_arrival_is_released() {
        // 1 thread + 1 queue slot: walks at 0 and 0 hold both slots until 400 and 800 ns; a third
        // at 100 ns is admitted at 400 ns and starts after the second, at 800 ns. A walk booked
        // later but requested at 1.5 µs, when no slot is held, is admitted at once.
        let mut c = cfg(1, 0);
        c.queue_depth = 1;
        let mut w = Walker::new(&c, 4);
        let mut d = dram();
        let ends: Vec<Ps> = [0, 0, 100_000].into_iter().map(|t| w.walk(t << 16, 1, t, 0, &mut d)).collect();
        assert_eq!(ends, vec![400_000, 800_000, 1_200_000]);
        assert_eq!(w.slots.full_waits, 1);
        assert_eq!(w.queued_at(500_000), 1);
        assert_eq!(w.walk(7 << 40, 1, 1_500_000, 0, &mut d), 1_900_000);
        assert_eq!(w.slots.full_waits, 1);
    }

    #[test]
    fn a_queue_depth_near_u32_max_is_not_wrapped_to_a_few_slots() {
        // threads + queue_depth overflows u32: the queue must still hold every walk (as with a deep queue), not
        // wrap to one slot and back-pressure the second walk.
        let mut c = cfg(2, 0);
        c.queue_depth = u32::MAX;
        let mut w = Walker::new(&c, 4);
        let mut d = dram();
        let ends: Vec<Ps> = (0..6).map(|i| w.walk(i << 40, 1, 0, 0, &mut d)).collect();
        assert_eq!(ends, vec![400_000, 400_000, 800_000, 800_000, 1_200_000, 1_200_000]);
    }

    #[test]
    fn dram_ptes_cost_dram_latency() {
        let mut c = cfg(1, 0);
        c.pte_from_dram = true;
        let mut w = Walker::new(&c, 4);
        let mut d = dram();
        let end = w.walk(0, 1, 0, 0, &mut d);
        // 4 dependent reads of the walker's 100 ns each, plus 64 B at 250 GB/s per channel
        // (256 ps, each read in an idle bucket): 4 x 100_256 ps. Fixed-latency reads end at 400_000.
        assert_eq!(end, 4 * 100_256);
        assert_eq!((w.stats.pte_reads, d.pte_reads), (4, 4));
    }

    fn utc(entries: u32) -> WalkerConfig {
        WalkerConfig { pwc_organization: PwcOrganization::Unified, ..cfg(1, entries) }
    }

    #[test]
    fn unified_pwc_lower_level_entries_evict_upper_ones() {
        // 4 levels, one 3-entry fully associative UTC. A (cold) reads 4 entries and caches
        // its level-4, -3 and -2 entries in that order (level 2 most recent).
        let (a, b, c) = (0x40_0000_0000u64, 0x40_0020_0000, 0x40_4000_0000);
        let mut d = dram();
        let mut w = Walker::new(&utc(3), 4);
        w.walk(a, 1, 0, 0, &mut d);
        assert_eq!((w.stats.pte_reads, w.stats.reads_hist[4]), (4, 1));
        // B: another 2 MiB region of A's 1 GiB: level 2 misses, level 3 hits (refreshed), 2 reads;
        // its level-2 entry evicts the least recently used entry, A's level-4 one.
        w.walk(b, 1, 1_000_000, 1_000_000, &mut d);
        assert_eq!((w.stats.pte_reads, w.stats.pwc_hits[3], w.stats.reads_hist[2]), (6, 1, 1));
        // C: another 1 GiB region of A's 512 GiB: its level-4 entry was evicted, so 4 reads.
        w.walk(c, 1, 2_000_000, 2_000_000, &mut d);
        assert_eq!((w.stats.pte_reads, w.stats.pwc_misses[4], w.stats.reads_hist[4]), (10, 2, 2));
        // Per-level caches of one entry each (3 in all) keep A's level-4 entry: C reads 3.
        let mut p = Walker::new(&cfg(1, 1), 4);
        for (i, va) in [a, b, c].into_iter().enumerate() {
            p.walk(va, 1, i as u64 * 1_000_000, i as u64 * 1_000_000, &mut d);
        }
        assert_eq!((p.stats.pte_reads, p.stats.pwc_hits[4], p.stats.reads_hist[3]), (9, 1, 1));
    }

    #[test]
    fn unified_pwc_deepest_hit_skips_the_upper_levels() {
        let mut w = Walker::new(&utc(8), 5);
        let mut d = dram();
        // Cold: 5 reads, 4 entries cached.
        w.walk(0x40_0000_0000, 1, 0, 0, &mut d);
        // Same 2 MiB region: the level-2 entry hits first, 1 read; upper levels are not probed.
        w.walk(0x40_0000_1000, 1, 1_000_000, 1_000_000, &mut d);
        assert_eq!(w.stats.pte_reads, 6);
        assert_eq!((w.stats.pwc_hits[2], w.stats.pwc_misses[3], w.stats.pwc_misses[5]), (1, 1, 1));
        assert_eq!(w.stats.reads_hist[..6], [0, 1, 0, 0, 0, 1]);
        // Entries of different levels with equal tags do not alias: va 0's level-2 tag is 0, as is
        // the cached level-4 entry's; the walk hits that level-4 entry (3 reads), not a level-2 one.
        w.walk(0, 1, 2_000_000, 2_000_000, &mut d);
        assert_eq!((w.stats.pte_reads, w.stats.pwc_hits[4]), (9, 1));
        w.walk(0x1000, 1, 3_000_000, 3_000_000, &mut d);
        assert_eq!(w.stats.pte_reads, 10);
    }

    /// Reference UTC: a list of (level, tag), most recent last, at most `cap` long.
    fn reference_reads(vas: &[u64], leaf: u32, levels: u32, cap: usize) -> Vec<u32> {
        let mut lru: Vec<(u32, u64)> = vec![];
        let mut out = vec![];
        for &va in vas {
            let mut first = levels;
            for l in leaf + 1..=levels {
                if let Some(i) = lru.iter().position(|&e| e == (l, va >> level_shift(l))) {
                    let e = lru.remove(i);
                    lru.push(e);
                    first = l - 1;
                    break;
                }
            }
            for l in (leaf + 1..=first).rev() {
                lru.retain(|&e| e != (l, va >> level_shift(l)));
                if lru.len() == cap {
                    lru.remove(0);
                }
                lru.push((l, va >> level_shift(l)));
            }
            out.push(first - leaf + 1);
        }
        out
    }

    /// Reference pool: every walk's interval is kept; a walk requested at `t` starts at the
    /// earliest candidate (`t` or an interval's end) where some thread is free for its length.
    fn reference_starts(walks: &[(Ps, Ps)], threads: usize) -> Vec<Ps> {
        let mut busy: Vec<Vec<(Ps, Ps)>> = vec![vec![]; threads];
        let mut out = vec![];
        for &(t, d) in walks {
            let mut cands: Vec<Ps> = busy.iter().flatten().map(|&(_, e)| e).filter(|&e| e > t).collect();
            cands.push(t);
            cands.sort_unstable();
            let free = |th: &Vec<(Ps, Ps)>, s: Ps| th.iter().all(|&(a, e)| s + d <= a || e <= s);
            let (s, i) = cands.iter().find_map(|&s| busy.iter().position(|th| free(th, s)).map(|i| (s, i))).unwrap();
            busy[i].push((s, s + d));
            out.push(s);
        }
        out
    }

    proptest! {
        /// Walks booked in any order against the reference: each starts at the earliest time a
        /// thread is free for its whole length, and no thread runs two walks at once. The
        /// engine's time (`now`) only grows and never passes a request, so pruning loses nothing.
        #[test]
        fn out_of_order_walks_match_the_reference_pool(
            reqs in proptest::collection::vec((0u64..50, 0u64..3_000, any::<bool>()), 1..80),
            threads in 1usize..5,
        ) {
            let (starts, expected, _, _) = starts_and_reference(&reqs, threads);
            prop_assert_eq!(starts, expected);
        }

        /// The same with walks booked up to 60 µs ahead while the engine's time moves on: lists
        /// longer than `LONG_LIST`, whose intervals that are over are skipped before they are dropped.
        #[test]
        fn long_lists_match_the_reference_pool(
            reqs in proptest::collection::vec((0u64..1_500, 0u64..60_000, any::<bool>()), 150..400),
            threads in 1usize..3,
        ) {
            let (starts, expected, _, _) = starts_and_reference(&reqs, threads);
            prop_assert_eq!(starts, expected);
        }

        /// The gallop from any hint (inside the list or past its end) finds what a bisection of
        /// the whole list finds, for both searches the walker makes (by end and by start).
        #[test]
        fn partition_near_matches_partition_point(
            gaps in proptest::collection::vec((0u64..5, 1u64..5), 0..300),
            hint in 0usize..320,
            t in 0u64..2_000,
        ) {
            let mut busy = vec![];
            let mut x = 0;
            for (gap, len) in gaps {
                busy.push((x + gap, x + gap + len));
                x += gap + len;
            }
            prop_assert_eq!(partition_near(&busy, Some(hint), |&(_, e)| e <= t), busy.partition_point(|&(_, e)| e <= t));
            prop_assert_eq!(partition_near(&busy, Some(hint), |&(a, _)| a < t), busy.partition_point(|&(a, _)| a < t));
        }

        /// Against a reference: reads = levels from the deepest cached prefix to the leaf,
        /// with an unbounded PWC (a set of all prefixes seen) standing in for a large one. Pages
        /// in a few 512 GiB / 1 GiB / 2 MiB regions, so that every level hits (pages drawn from all
        /// of 2^36 almost never shared a 1 GiB region: only the root level's entries ever hit).
        #[test]
        fn pte_reads_match_reference(picks in proptest::collection::vec((0u64..3, 0u64..4, 0u64..4, 0u64..8), 1..60), big in any::<bool>()) {
            let leaf = if big { 2 } else { 1 };
            let mut w = Walker::new(&cfg(4, 4096), 4);
            let mut d = dram();
            let mut seen: std::collections::HashSet<(u32, u64)> = Default::default();
            let mut expect = 0u64;
            for (i, &(a, b, c, e)) in picks.iter().enumerate() {
                let va = a << 39 | b << 30 | c << 21 | e << 12;
                let deepest = (leaf + 1..=4).find(|&l| seen.contains(&(l, va >> level_shift(l))));
                let first = deepest.map_or(4, |l| l - 1);
                expect += (first - leaf + 1) as u64;
                for l in leaf + 1..=first { seen.insert((l, va >> level_shift(l))); }
                w.walk(va, leaf, i as u64 * 1_000_000, i as u64 * 1_000_000, &mut d);
                prop_assert_eq!(w.stats.pte_reads, expect);
            }
        }

        /// A fully associative unified PWC against the reference LRU list: entries read per walk.
        /// Addresses span few 2 MiB / 1 GiB / 512 GiB regions so that every level hits and evicts.
        #[test]
        fn unified_pwc_matches_reference(
            picks in proptest::collection::vec((0u64..4, 0u64..4, 0u64..4, 0u64..8), 1..80),
            cap in 1u32..10,
            big in any::<bool>(),
        ) {
            let leaf = if big { 2 } else { 1 };
            let vas: Vec<u64> = picks.iter().map(|&(a, b, c, e)| a << 39 | b << 30 | c << 21 | e << 12).collect();
            let expect = reference_reads(&vas, leaf, 5, cap as usize);
            let mut w = Walker::new(&utc(cap), 5);
            let mut d = dram();
            for (i, &va) in vas.iter().enumerate() {
                w.walk(va, leaf, i as u64 * 1_000_000, i as u64 * 1_000_000, &mut d);
                prop_assert_eq!(w.last_reads, expect[i], "walk {}", i);
            }
        }
    }

    /// Each walk first probes the page-walk cache (`pwc_latency_ns`, here 10 ns), then reads its
    /// entries (100 ns each): a cold 4-level walk ends at 10 + 400 = 410 ns; one in the same 2 MiB
    /// region (1 read) requested at 1 µs ends at 1 µs + 10 + 100 ns. The shortest walk a thread
    /// can take is 110 ns: the one thread, busy over [1.0, 1.11) µs, fits one at 0.5 µs, not at 0.895 µs
    /// (a 100 ns one would fit then).
    #[test]
    fn the_page_walk_cache_probe_comes_before_the_reads() {
        let mut c = cfg(1, 16);
        c.pwc_latency_ns = 10.0;
        let mut w = Walker::new(&c, 4);
        let mut d = dram();
        assert_eq!(w.walk(0x40_0000_0000, 1, 0, 0, &mut d), 410_000);
        assert_eq!(w.walk(0x40_0000_1000, 1, 1_000_000, 1_000_000, &mut d), 1_110_000);
        assert_eq!(w.start_at(500_000), 500_000);
        assert_eq!(w.start_at(895_000), 1_110_000);
    }

    /// A walk requested before the engine's time (booked late) still queues behind the walks that
    /// held the thread at its request: only intervals over by both times are forgotten. One thread:
    /// A at 0 holds it over [0, 400) ns; B, requested at 100 ns when the engine is at 500 ns,
    /// starts at 400 ns (pruning at 500 ns dropped A and let B start at 100).
    #[test]
    fn a_walk_booked_after_its_request_waits_for_the_walks_before_it() {
        let mut w = Walker::new(&cfg(1, 0), 4);
        let mut d = dram();
        assert_eq!(w.walk(0, 1, 0, 0, &mut d), 400_000);
        assert_eq!(w.walk(1 << 40, 1, 100_000, 500_000, &mut d), 800_000);
        assert_eq!(w.last_wait, 300_000);
    }

    /// `start_at` finds a gap that holds the shortest walk (one read, 100 ns) exactly: the thread
    /// is busy over [0, 100) and [200, 300) ns, so a walk at 100 ns fits before the second interval.
    #[test]
    fn the_shortest_walk_fits_exactly_into_a_gap() {
        let u = 100_000;
        let mut w = Walker::new(&cfg(1, 0), 4);
        set_lists(&mut w, vec![vec![(0, u), (2 * u, 3 * u)]]);
        assert_eq!([u, u + 1, 3 * u].map(|t| w.start_at(t)), [u, 3 * u, 3 * u]);
    }
}
