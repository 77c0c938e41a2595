//! The vector memory path from an SM's L1 TLB to its L1 data cache under
//! back-pressure (`gpu.vmem.backpressure`), as in MGPUSim v4: the L1 TLB's
//! answers pass through a bounded chain of buffers (its top port, the address
//! translator's ports, the cache's top port) to the cache's intake, which takes
//! a request only while the cache has fewer than `l1_transactions` in flight and
//! its directory's buffers have room; the directory takes requests in order and
//! holds a read miss while every way of its set waits for a fill.
//!
//! How it works: per SM, the answers' intervals in each part of the path:
//! `[entered, accepted)` in the buffers before the cache (`buffer_entries`),
//! `[accepted, checked)` before the directory's check (`dir_entries`) and
//! `[accepted, done)` as a cache transaction (`l1_transactions`). An answer ready
//! at `r` enters the chain at the first time from `r` with room, counting only
//! the answers in it then: a merged or missed request is answered (and enters)
//! when its translation arrives, so it takes no room before. A hit that has to
//! wait holds the TLB's later lookups until it is sent (Akita's lookup stage
//! retries the request at its head); a miss or a merge is answered from the MSHR
//! and holds nothing. The cache takes answers in the order they entered the
//! chain. The directory takes them in the order they reach it (a miss's answer
//! after the hits that overtook it, as the translator forwards them): a read it
//! holds for its set holds every answer that reaches it later.

use crate::config::GpuConfig;
use crate::sim::{Clock, Ps};
use crate::stats::Metrics;

#[derive(Debug, Clone, Default)]
struct SmPath {
    /// Answers in the buffers before the cache: [entered, accepted by the cache).
    chain: Occupancy,
    /// Accepted requests not yet checked by the directory: [accepted, checked).
    dir: Occupancy,
    /// Cache transactions: [accepted, done).
    trans: Occupancy,
    /// The latest answer passed to [`VmemPath::send`]: when it entered the chain and the cache.
    entered: Ps,
    accepted: Ps,
    /// The same for the answer that entered the chain latest: the cache takes the next after it.
    last_in: (Ps, Ps),
    /// No lookup before this: a hit waits for room at the head of the TLB's lookup stage.
    floor: Ps,
    /// The latest read the directory held for its set: (when it reached the directory,
    /// when it was taken). Answers reaching it from then on wait behind it.
    held: (Ps, Ps),
}

/// Counters of the vector memory path.
#[derive(Debug, Clone, Default)]
pub struct VmemStats {
    /// Lookups that waited behind a hit with no room for its answer, and the time they waited.
    pub held_lookups: u64,
    pub held_ps: Ps,
    /// Answers that waited for room in the buffers before the cache, and the time they waited.
    pub full_waits: u64,
    pub full_ps: Ps,
    /// Answers the cache took late (transactions at the cap, or its directory's buffers full).
    pub intake_waits: u64,
    pub intake_ps: Ps,
    /// Reads the directory held because every way of their set was waiting for a fill, and for how long.
    pub set_waits: u64,
    pub set_ps: Ps,
}

/// The L1 TLB → L1 data cache path of every SM of one GPU.
#[derive(Debug, Clone)]
pub struct VmemPath {
    sms: Vec<SmPath>,
    room: usize,
    dir_room: usize,
    trans_room: usize,
    transit: Ps,
    pub stats: VmemStats,
}

/// Intervals `[from, to)` in one part of the path: the count at the last time asked
/// about is folded into `base`, the changes after it (starts minus ends per time) are
/// kept in [`Changes`], a B+ tree whose inner nodes hold each child's sum and lowest
/// running sum, so counting at a time and finding the first time with room take
/// O(log n) (amortized) however far apart the queries are; a walk over the changes
/// from a recent query's time took most of the preset's replay time while a part
/// stayed full for long. `F` (entries per node) is a parameter for the tests' deep trees.
#[derive(Debug, Clone, Default)]
struct Occupancy<const F: usize = FANOUT> {
    /// Intervals holding at `at`, and the time it is for.
    base: usize,
    at: Ps,
    /// Intervals not ended by `at`.
    live: usize,
    /// The starts and ends after `at`.
    changes: Changes<F>,
}

impl<const F: usize> Occupancy<F> {
    /// Nothing before `t` is asked about again (times come in order).
    fn advance(&mut self, t: Ps) {
        if t <= self.at {
            return;
        }
        self.at = t;
        if self.changes.first().is_some_and(|f| f <= t) {
            let (delta, ends) = self.changes.drop_to(t);
            self.base = (self.base as i64 + delta) as usize;
            self.live -= ends as usize;
        }
    }

    /// An interval `[from, to)`, `to` after `from`. `from` may be before the last
    /// [`Self::advance`]: the warp-driven GPU issues a warp's next instructions before other
    /// warps' slightly earlier ones (`Gpu::run_warp`), so an SM's answers can start, and even
    /// end, a few cycles before the time reached. Such an interval counts from `at` (its end,
    /// kept until an advance passes it, cancels it for any time after), and the same late
    /// queries of `count_at` see it until its end.
    fn add(&mut self, from: Ps, to: Ps) {
        debug_assert!(from < to);
        self.live += 1;
        if from <= self.at {
            self.base += 1;
        } else {
            self.changes.add(from, 1, 0);
        }
        self.changes.add(to, -1, 1);
    }

    /// Intervals holding at `r` (no earlier than `at`).
    fn count_at(&self, r: Ps) -> usize {
        (self.base as i64 + self.changes.sum_to(r)) as usize
    }

    /// The first time from `r` (no earlier than the last [`Self::advance`]) when fewer
    /// than `cap` intervals hold; `cap` 0 is no limit.
    fn first_room(&mut self, r: Ps, cap: usize) -> Ps {
        if cap == 0 || self.live < cap || self.count_at(r) < cap {
            return r;
        }
        // Every interval ends, so the count falls below `cap` at some change after `r`.
        self.changes.first_below(r, cap as i64 - self.base as i64).unwrap_or(r)
    }
}

/// Put `v` in a slot of `arena` that `free` lists, or a new one; returns its index.
fn alloc<T>(arena: &mut Vec<T>, free: &mut Vec<u32>, v: T) -> u32 {
    match free.pop() {
        Some(i) => {
            arena[i as usize] = v;
            i
        }
        None => {
            arena.push(v);
            arena.len() as u32 - 1
        }
    }
}

/// Entries per node of [`Changes`] (a leaf's times, an inner node's children): the maps
/// hold about a hundred times (at most ~750 in the mgpusim replays), so two or three
/// levels of short linear scans; fewer instructions than 8 or 32 on those replays.
const FANOUT: usize = 16;

/// An inner node's entry whose lowest running sum is not known since its child changed
/// (most changes are additions, most searches skip few children: it is worked out again
/// when a search needs it).
const STALE: i64 = i64::MIN;

/// Counts per time in order: a B+ tree in two arenas, inner nodes above `height` levels
/// (0: the root is a leaf). Times are only added or dropped from the front, so a node
/// never merges with a sibling; it goes when it empties.
#[derive(Debug, Clone)]
struct Changes<const F: usize> {
    leaves: Vec<Leaf<F>>,
    inners: Vec<Inner<F>>,
    /// Arena slots to reuse.
    free_leaves: Vec<u32>,
    free_inners: Vec<u32>,
    root: u32,
    height: usize,
    /// The last leaf (where most times are added).
    last: u32,
}

#[derive(Debug, Clone)]
struct Leaf<const F: usize> {
    len: usize,
    /// Each time, the starts minus the ends at it, and the ends (for `Occupancy::live`).
    time: [Ps; F],
    delta: [i32; F],
    ends: [u32; F],
}

#[derive(Debug, Clone)]
struct Inner<const F: usize> {
    len: usize,
    /// Each child's first time, sum of deltas, and lowest running sum (after one of its
    /// times; or [`STALE`]).
    first: [Ps; F],
    sum: [i64; F],
    low: [i64; F],
    child: [u32; F],
}

impl<const F: usize> Leaf<F> {
    const EMPTY: Self = Leaf { len: 0, time: [0; F], delta: [0; F], ends: [0; F] };

    /// (first time, sum, lowest running sum); not empty.
    fn summary(&self) -> (Ps, i64, i64) {
        let (mut sum, mut low) = (0, i64::MAX);
        for &d in &self.delta[..self.len] {
            sum += d as i64;
            low = low.min(sum);
        }
        (self.time[0], sum, low)
    }

    fn insert(&mut self, i: usize, t: Ps, delta: i32, ends: u32) {
        // Element by element: a few at most (times mostly come last), cheaper than memmove calls.
        for k in (i..self.len).rev() {
            (self.time[k + 1], self.delta[k + 1], self.ends[k + 1]) = (self.time[k], self.delta[k], self.ends[k]);
        }
        (self.time[i], self.delta[i], self.ends[i]) = (t, delta, ends);
        self.len += 1;
    }

    /// Inserts at `i` into a full leaf, moving the entries after the new one's place
    /// into `right` (only the new one if it comes last: times mostly come in order, so
    /// the leaves stay full) or else the upper half.
    fn split_insert(&mut self, right: &mut Self, i: usize, t: Ps, delta: i32, ends: u32) {
        let h = if i == self.len { self.len } else { self.len / 2 };
        right.len = self.len - h;
        right.time[..right.len].copy_from_slice(&self.time[h..self.len]);
        right.delta[..right.len].copy_from_slice(&self.delta[h..self.len]);
        right.ends[..right.len].copy_from_slice(&self.ends[h..self.len]);
        self.len = h;
        if i < h {
            self.insert(i, t, delta, ends);
        } else {
            right.insert(i - h, t, delta, ends);
        }
    }
}

impl<const F: usize> Inner<F> {
    const EMPTY: Self = Inner { len: 0, first: [0; F], sum: [0; F], low: [0; F], child: [0; F] };

    /// (first time, sum, lowest running sum or [`STALE`]).
    fn summary(&self) -> (Ps, i64, i64) {
        let (mut sum, mut low) = (0, i64::MAX);
        for j in 0..self.len {
            low = if self.low[j] == STALE { STALE } else { low.min(sum + self.low[j]) };
            sum += self.sum[j];
        }
        (self.first[0], sum, low)
    }

    fn set(&mut self, j: usize, child: u32, (first, sum, low): (Ps, i64, i64)) {
        (self.child[j], self.first[j], self.sum[j], self.low[j]) = (child, first, sum, low);
    }

    fn insert(&mut self, j: usize, child: u32, s: (Ps, i64, i64)) {
        for k in (j..self.len).rev() {
            self.set(k + 1, self.child[k], (self.first[k], self.sum[k], self.low[k]));
        }
        self.len += 1;
        self.set(j, child, s);
    }

    /// As [`Leaf::split_insert`].
    fn split_insert(&mut self, right: &mut Self, j: usize, child: u32, s: (Ps, i64, i64)) {
        let h = if j == self.len { self.len } else { self.len / 2 };
        right.len = self.len - h;
        right.child[..right.len].copy_from_slice(&self.child[h..self.len]);
        right.first[..right.len].copy_from_slice(&self.first[h..self.len]);
        right.sum[..right.len].copy_from_slice(&self.sum[h..self.len]);
        right.low[..right.len].copy_from_slice(&self.low[h..self.len]);
        self.len = h;
        if j < h {
            self.insert(j, child, s);
        } else {
            right.insert(j - h, child, s);
        }
    }

    fn remove_first(&mut self) {
        for k in 1..self.len {
            self.set(k - 1, self.child[k], (self.first[k], self.sum[k], self.low[k]));
        }
        self.len -= 1;
    }

    /// The child whose times can include `t`: the last starting no later, else the first
    /// (searched from the end: most times added come after all others).
    fn find(&self, t: Ps) -> usize {
        self.first[1..self.len].iter().rposition(|&f| f <= t).map_or(0, |j| j + 1)
    }
}

impl<const F: usize> Default for Changes<F> {
    fn default() -> Self {
        Changes {
            leaves: vec![Leaf::EMPTY],
            inners: Vec::new(),
            free_leaves: Vec::new(),
            free_inners: Vec::new(),
            root: 0,
            height: 0,
            last: 0,
        }
    }
}

impl<const F: usize> Changes<F> {
    fn first(&self) -> Option<Ps> {
        if self.height > 0 {
            Some(self.inners[self.root as usize].first[0])
        } else {
            let l = &self.leaves[self.root as usize];
            (l.len > 0).then(|| l.time[0])
        }
    }

    /// `node`'s (first time, sum, lowest running sum or [`STALE`]), `h` levels above the leaves.
    fn summary(&self, node: u32, h: usize) -> (Ps, i64, i64) {
        if h == 0 {
            self.leaves[node as usize].summary()
        } else {
            self.inners[node as usize].summary()
        }
    }

    fn new_leaf(&mut self, l: Leaf<F>) -> u32 {
        alloc(&mut self.leaves, &mut self.free_leaves, l)
    }

    fn new_inner(&mut self, n: Inner<F>) -> u32 {
        alloc(&mut self.inners, &mut self.free_inners, n)
    }

    /// Adds `delta` and `ends` at time `t`.
    fn add(&mut self, t: Ps, delta: i32, ends: u32) {
        // Most times come last (an interval's end): appended to the last leaf, each last
        // entry on the way down keeps its lowest running sum without a scan. So does a
        // fall at the last time.
        let l = &self.leaves[self.last as usize];
        let append = l.len < F && (l.len == 0 || l.time[l.len - 1] < t);
        if append || (l.time[l.len - 1] == t && delta <= 0) {
            let mut node = self.root as usize;
            for _ in 0..self.height {
                let n = &mut self.inners[node];
                let j = n.len - 1;
                // A STALE low stays so.
                n.low[j] = n.low[j].min(n.sum[j] + delta as i64);
                n.sum[j] += delta as i64;
                node = n.child[j] as usize;
            }
            debug_assert_eq!(node, self.last as usize);
            let l = &mut self.leaves[node];
            if append {
                l.insert(l.len, t, delta, ends);
            } else {
                l.delta[l.len - 1] += delta;
                l.ends[l.len - 1] += ends;
            }
            return;
        }
        if let Some(right) = self.insert(self.root, self.height, t, delta, ends) {
            let (left, h) = (self.root, self.height);
            let mut n = Inner::EMPTY;
            n.len = 2;
            n.set(0, left, self.summary(left, h));
            n.set(1, right, self.summary(right, h));
            self.root = self.new_inner(n);
            self.height += 1;
        }
    }

    /// Adds at `t` below `node` (`h` levels above the leaves); a node that splits
    /// returns its new right sibling.
    fn insert(&mut self, node: u32, h: usize, t: Ps, delta: i32, ends: u32) -> Option<u32> {
        if h == 0 {
            let l = &mut self.leaves[node as usize];
            let i = l.time[..l.len].iter().rposition(|&x| x < t).map_or(0, |i| i + 1);
            if i < l.len && l.time[i] == t {
                l.delta[i] += delta;
                l.ends[i] += ends;
                return None;
            }
            if l.len < F {
                l.insert(i, t, delta, ends);
                return None;
            }
            let mut r = Leaf::EMPTY;
            l.split_insert(&mut r, i, t, delta, ends);
            let right = self.new_leaf(r);
            if node == self.last {
                self.last = right;
            }
            return Some(right);
        }
        let j = self.inners[node as usize].find(t);
        let child = self.inners[node as usize].child[j];
        let Some(new) = self.insert(child, h - 1, t, delta, ends) else {
            let n = &mut self.inners[node as usize];
            n.first[j] = n.first[j].min(t);
            n.sum[j] += delta as i64;
            n.low[j] = STALE;
            return None;
        };
        let (s, s_new) = (self.summary(child, h - 1), self.summary(new, h - 1));
        let n = &mut self.inners[node as usize];
        n.set(j, child, s);
        if n.len < F {
            n.insert(j + 1, new, s_new);
            return None;
        }
        let mut r = Inner::EMPTY;
        n.split_insert(&mut r, j + 1, new, s_new);
        Some(self.new_inner(r))
    }

    /// Drops the times up to `t`: (their sum of deltas, their ends).
    fn drop_to(&mut self, t: Ps) -> (i64, u64) {
        let mut folded = (0, 0);
        if self.drop_below(self.root, self.height, t, &mut folded) && self.height > 0 {
            self.free_inners.push(self.root);
            self.root = self.new_leaf(Leaf::EMPTY);
            self.last = self.root;
            self.height = 0;
        }
        // A root with one child gives way to it.
        while self.height > 0 && self.inners[self.root as usize].len == 1 {
            self.free_inners.push(self.root);
            self.root = self.inners[self.root as usize].child[0];
            self.height -= 1;
        }
        folded
    }

    /// Drops the times up to `t` below `node`, adding them to `folded`; true if it is empty then.
    fn drop_below(&mut self, node: u32, h: usize, t: Ps, folded: &mut (i64, u64)) -> bool {
        if h == 0 {
            let l = &mut self.leaves[node as usize];
            let k = l.time[..l.len].iter().position(|&x| x > t).unwrap_or(l.len);
            for i in 0..k {
                folded.0 += l.delta[i] as i64;
                folded.1 += l.ends[i] as u64;
            }
            for i in k..l.len {
                (l.time[i - k], l.delta[i - k], l.ends[i - k]) = (l.time[i], l.delta[i], l.ends[i]);
            }
            l.len -= k;
            return l.len == 0;
        }
        loop {
            let n = &self.inners[node as usize];
            if n.len == 0 {
                return true;
            }
            if n.first[0] > t {
                return false;
            }
            let (child, before) = (n.child[0], folded.0);
            if self.drop_below(child, h - 1, t, folded) {
                if h == 1 {
                    self.free_leaves.push(child);
                } else {
                    self.free_inners.push(child);
                }
                self.inners[node as usize].remove_first();
            } else {
                let first = if h == 1 { self.leaves[child as usize].time[0] } else { self.inners[child as usize].first[0] };
                let n = &mut self.inners[node as usize];
                n.first[0] = first;
                n.sum[0] -= folded.0 - before;
                n.low[0] = STALE;
                return false;
            }
        }
    }

    /// The sum of the deltas at times up to `r`.
    fn sum_to(&self, r: Ps) -> i64 {
        let (mut node, mut sum) = (self.root as usize, 0);
        for _ in 0..self.height {
            let n = &self.inners[node];
            let mut j = 0;
            while j + 1 < n.len && n.first[j + 1] <= r {
                sum += n.sum[j];
                j += 1;
            }
            node = n.child[j] as usize;
        }
        let l = &self.leaves[node];
        for i in 0..l.len {
            if l.time[i] > r {
                break;
            }
            sum += l.delta[i] as i64;
        }
        sum
    }

    /// The lowest running sum of `node`'s deltas, working out its entries' that are [`STALE`].
    fn low(&mut self, node: u32, h: usize) -> i64 {
        if h == 0 {
            return self.leaves[node as usize].summary().2;
        }
        let (mut sum, mut low) = (0, i64::MAX);
        for j in 0..self.inners[node as usize].len {
            let n = &self.inners[node as usize];
            let l = if n.low[j] == STALE {
                let l = self.low(n.child[j], h - 1);
                self.inners[node as usize].low[j] = l;
                l
            } else {
                n.low[j]
            };
            low = low.min(sum + l);
            sum += self.inners[node as usize].sum[j];
        }
        low
    }

    /// The first time after `r` at which the sum of the deltas up to it is below `lim`.
    fn first_below(&mut self, r: Ps, lim: i64) -> Option<Ps> {
        self.first_below_in(self.root, self.height, r, lim, &mut 0)
    }

    /// The same below `node`, `sum` being the sum of the deltas before its times (and
    /// after the call, up to its last time if none is found).
    fn first_below_in(&mut self, node: u32, h: usize, r: Ps, lim: i64, sum: &mut i64) -> Option<Ps> {
        if h == 0 {
            let l = &self.leaves[node as usize];
            for i in 0..l.len {
                *sum += l.delta[i] as i64;
                if *sum < lim && l.time[i] > r {
                    return Some(l.time[i]);
                }
            }
            return None;
        }
        let len = self.inners[node as usize].len;
        for j in 0..len {
            let n = &self.inners[node as usize];
            let (child, first, low) = (n.child[j], n.first[j], n.low[j]);
            // Skip a child with every time up to `r`, or one after `r` whose running sum stays high.
            let skip = if j + 1 < len && n.first[j + 1] <= r {
                true
            } else if first > r {
                let low = if low == STALE {
                    let l = self.low(child, h - 1);
                    self.inners[node as usize].low[j] = l;
                    l
                } else {
                    low
                };
                *sum + low >= lim
            } else {
                false
            };
            if skip {
                *sum += self.inners[node as usize].sum[j];
            } else if let Some(t) = self.first_below_in(child, h - 1, r, lim, sum) {
                return Some(t);
            }
        }
        None
    }
}

impl VmemPath {
    /// The path of GPU `g`, or None without `gpu.vmem.backpressure`.
    pub fn new(g: &GpuConfig) -> Option<VmemPath> {
        let v = &g.vmem;
        v.backpressure.then(|| VmemPath {
            sms: vec![SmPath::default(); g.sms as usize],
            room: v.buffer_entries as usize,
            dir_room: v.dir_entries as usize,
            trans_room: v.l1_transactions as usize,
            transit: Clock::from_mhz(g.core_mhz).cycles(v.transit_cycles as u64),
            stats: VmemStats::default(),
        })
    }

    /// When SM `sm`'s L1 TLB looks up a request that reaches it at `t`.
    #[inline]
    pub fn lookup_at(&mut self, sm: usize, t: Ps) -> Ps {
        let l = t.max(self.sms[sm].floor);
        if l > t {
            self.stats.held_lookups += 1;
            self.stats.held_ps += l - t;
        }
        l
    }

    /// The answer to a lookup made at `l`, ready at `r` (`hit`: answered by the TLB's
    /// set, which then sends it): when the directory can check it (after the transit,
    /// the cache's intake, and not before a held read that reached the directory first).
    /// Lookups come in time order per SM in a trace replay; the warp-driven GPU inverts them
    /// by a few cycles at times (`Gpu::run_warp`), and an earlier one is then answered from
    /// the state at the latest time reached.
    pub fn send(&mut self, sm: usize, l: Ps, r: Ps, hit: bool) -> Ps {
        let p = &mut self.sms[sm];
        // Nothing is asked about a time before `l` again: what has left by then is gone.
        p.chain.advance(l);
        p.dir.advance(l);
        p.trans.advance(l);
        let s = p.chain.first_room(r, self.room);
        if s > r {
            self.stats.full_waits += 1;
            self.stats.full_ps += s - r;
            if hit {
                p.floor = p.floor.max(l + (s - r));
            }
        }
        // In order into the cache, after the answers that entered the chain before this one.
        let mut c = s + self.transit;
        if s >= p.last_in.0 {
            c = c.max(p.last_in.1);
        }
        let ready = c;
        loop {
            let a = p.trans.first_room(c, self.trans_room);
            let b = p.dir.first_room(a, self.dir_room);
            if b == c {
                break;
            }
            c = b;
        }
        if c > ready {
            self.stats.intake_waits += 1;
            self.stats.intake_ps += c - ready;
        }
        p.entered = s;
        p.accepted = c;
        if s >= p.last_in.0 {
            p.last_in = (s, c);
        }
        if c >= p.held.0 {
            c.max(p.held.1)
        } else {
            c
        }
    }

    /// The directory takes the answer at `at` (from [`Self::send`], or later if its set
    /// had every way filling until `at`, `arrived` being the time from `send`).
    #[inline]
    pub fn take(&mut self, sm: usize, arrived: Ps, at: Ps) {
        if at > arrived {
            self.stats.set_waits += 1;
            self.stats.set_ps += at - arrived;
        }
        let p = &mut self.sms[sm];
        if at > arrived && at > p.held.1 {
            p.held = (arrived, at);
        }
        p.chain.add(p.entered, p.accepted.max(p.entered + 1));
        p.dir.add(p.accepted, at.max(p.accepted + 1));
    }

    /// The cache transaction of the answer last taken ends at `done` (its data, or the
    /// write's acknowledgement, is back).
    #[inline]
    pub fn done(&mut self, sm: usize, done: Ps) {
        if self.trans_room > 0 {
            let p = &mut self.sms[sm];
            p.trans.add(p.accepted, done.max(p.accepted + 1));
        }
    }

    pub fn export(&self, m: &mut Metrics, p: &str) {
        let s = &self.stats;
        m.int(format!("{p}.held_lookups"), s.held_lookups);
        m.float(format!("{p}.held_ns"), s.held_ps as f64 / 1000.0);
        m.int(format!("{p}.full_waits"), s.full_waits);
        m.float(format!("{p}.full_ns"), s.full_ps as f64 / 1000.0);
        m.int(format!("{p}.intake_waits"), s.intake_waits);
        m.float(format!("{p}.intake_ns"), s.intake_ps as f64 / 1000.0);
        m.int(format!("{p}.set_waits"), s.set_waits);
        m.float(format!("{p}.set_ns"), s.set_ps as f64 / 1000.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use proptest::prelude::*;

    /// One SM at 1 GHz (1 cycle = 1000 ps): `room` entries before the cache, `dir` before
    /// its directory's check, `trans` transactions (0 = no limit), 5-cycle transit.
    fn path(room: u32, dir: u32, trans: u32) -> VmemPath {
        let mut g = Config::default().gpu;
        g.sms = 1;
        g.core_mhz = 1000.0;
        g.vmem.backpressure = true;
        g.vmem.buffer_entries = room;
        g.vmem.dir_entries = dir;
        g.vmem.l1_transactions = trans;
        g.vmem.transit_cycles = 5;
        VmemPath::new(&g).unwrap()
    }

    #[test]
    fn off_by_default() {
        assert!(VmemPath::new(&Config::default().gpu).is_none());
    }

    #[test]
    fn answers_flow_freely_while_there_is_room() {
        let mut p = path(2, 2, 0);
        assert_eq!(p.lookup_at(0, 0), 0);
        // Ready at 1000, taken by the cache and checked 5 cycles later.
        assert_eq!(p.send(0, 0, 1000, true), 6000);
        p.take(0, 6000, 6000);
        assert_eq!(p.send(0, 1000, 2000, true), 7000);
        p.take(0, 7000, 7000);
        // Both gone by 7000: the third is ready at 8000, after both.
        assert_eq!(p.send(0, 7000, 8000, true), 13_000);
        assert_eq!(p.stats.full_waits + p.stats.intake_waits, 0);
        assert_eq!(p.lookup_at(0, 7000), 7000);
    }

    #[test]
    fn an_answer_sent_later_takes_no_room_before() {
        // Two merged requests are answered when their translation arrives at 100 cycles;
        // until then they are in the TLB's MSHR, not in the buffers.
        let mut p = path(2, 32, 0);
        for _ in 0..2 {
            assert_eq!(p.send(0, 0, 100_000, false), 105_000);
            p.take(0, 105_000, 105_000);
        }
        // A hit at 1 cycle goes at once although the two will fill the buffers at 100.
        assert_eq!(p.send(0, 1000, 2000, true), 7000);
        assert_eq!(p.stats.full_waits, 0);
        assert_eq!(p.lookup_at(0, 3000), 3000);
        p.take(0, 7000, 7000);
        // A hit answered at 101 cycles finds both there and waits until they are taken at 105.
        assert_eq!(p.send(0, 100_000, 101_000, true), 110_000);
        assert_eq!((p.stats.full_waits, p.stats.full_ps), (1, 4000));
    }

    #[test]
    fn a_hit_without_room_holds_later_lookups_a_miss_does_not() {
        // One buffer entry, one cache transaction.
        let mut p = path(1, 32, 1);
        // A hit at 0, taken at 6; its data is back at 40.
        assert_eq!(p.send(0, 0, 1000, true), 6000);
        p.take(0, 6000, 6000);
        p.done(0, 40_000);
        // A hit looked up at 1 cycle, ready at 2: the buffer is free at 6, the cache's
        // only transaction at 40. The TLB retried it until 6: later lookups from 5 on.
        assert_eq!(p.send(0, 1000, 2000, true), 40_000);
        p.take(0, 40_000, 40_000);
        p.done(0, 80_000);
        assert_eq!((p.stats.full_waits, p.stats.full_ps), (1, 4000));
        assert_eq!((p.stats.intake_waits, p.stats.intake_ps), (1, 29_000));
        // A miss answered at 10 cycles waits in the TLB for the buffer (the hit before it
        // holds it until the cache takes it at 40), then for the cache until 80; it holds
        // no lookup.
        assert_eq!(p.send(0, 2000, 10_000, false), 80_000);
        assert_eq!((p.stats.full_waits, p.stats.full_ps), (2, 34_000));
        assert_eq!((p.stats.intake_waits, p.stats.intake_ps), (2, 29_000 + 35_000));
        assert_eq!(p.lookup_at(0, 3000), 5000);
        assert_eq!((p.stats.held_lookups, p.stats.held_ps), (1, 2000));
        assert_eq!(p.lookup_at(0, 6000), 6000);
    }

    #[test]
    fn the_directory_buffers_bound_the_intake() {
        // Two entries before the directory's check: a read held there for its set until 50
        // cycles keeps the next two answers out of the cache.
        let mut p = path(8, 2, 0);
        assert_eq!(p.send(0, 0, 1000, true), 6000);
        p.take(0, 6000, 50_000);
        assert_eq!(p.send(0, 0, 1000, true), 50_000, "checked behind the held read");
        p.take(0, 50_000, 60_000);
        assert_eq!((p.stats.set_waits, p.stats.set_ps), (2, 44_000 + 10_000));
        // The third is taken by the cache when the first is checked (50), after the second (60).
        assert_eq!(p.send(0, 0, 1000, true), 60_000);
        assert_eq!((p.stats.intake_waits, p.stats.intake_ps), (1, 44_000));
        assert_eq!(p.stats.full_waits, 0);
    }

    #[test]
    fn an_answer_that_reaches_the_directory_before_a_held_read_is_not_held() {
        let mut p = path(8, 32, 0);
        // A miss's answer ready at 100 cycles reaches the directory at 105 and waits there until 300.
        let m = p.send(0, 0, 100_000, false);
        assert_eq!(m, 105_000);
        p.take(0, m, 300_000);
        // A hit looked up later in the simulation but answered earlier (at 2) overtook it: not held.
        assert_eq!(p.send(0, 1000, 2000, true), 7000);
        p.take(0, 7000, 7000);
        // One reaching the directory after 105 waits behind it.
        assert_eq!(p.send(0, 150_000, 151_000, true), 300_000);
    }

    #[test]
    fn a_shorter_hold_that_reached_the_directory_first_does_not_replace_a_longer_one() {
        let mut p = path(8, 32, 0);
        // A miss reaches the directory at 105 cycles, held there until 300.
        assert_eq!(p.send(0, 0, 100_000, false), 105_000);
        p.take(0, 105_000, 300_000);
        // A hit answered at 2 reaches it at 7, before the held read (not held behind it), and is
        // held for its own set until 200.
        assert_eq!(p.send(0, 1000, 2000, true), 7000);
        p.take(0, 7000, 200_000);
        // One reaching it at 156 is behind the read held until 300, not the hold ending at 200.
        assert_eq!(p.send(0, 150_000, 151_000, true), 300_000);
    }

    /// Runs `ops` (kind, offset, length, cap) on an `Occupancy` with `F` entries per node
    /// and on a list of intervals: 0 adds `[at + x, at + x + len)`, 3 adds `[at - x, at - x + len)`,
    /// 1 advances by `x`, 2 queries at `at + x`, the answer checked against a scan of the list.
    fn check_ops<const F: usize>(ops: &[(u8, u64, u64, usize)]) -> Result<(), TestCaseError> {
        let mut o = Occupancy::<F>::default();
        let mut iv: Vec<(Ps, Ps)> = Vec::new();
        let mut at = 0;
        for &(op, x, len, cap) in ops {
            match op {
                0 => {
                    o.add(at + x, at + x + len);
                    iv.push((at + x, at + x + len));
                }
                3 => {
                    // From before the time reached (the warp-driven GPU's inverted issue order).
                    let a = at.saturating_sub(x);
                    o.add(a, a + len);
                    // Live until an advance passes its end, even if that end is before `at`.
                    iv.push((a, a + len));
                }
                1 => {
                    at += x;
                    o.advance(at);
                    // What has ended is dropped, from the list too (it keeps the scan short); an
                    // advance to the time already reached drops nothing (an interval added
                    // since that ended before it stays live until a later advance).
                    if x > 0 {
                        iv.retain(|&(_, b)| b > at);
                    }
                }
                _ => {
                    debug_assert_eq!(op, 2);
                    let r = at + x;
                    let held = |t: Ps| iv.iter().filter(|&&(a, b)| a <= t && t < b).count();
                    // The count falls only at an interval's end: the first time is `r` or one of them.
                    let mut ends: Vec<Ps> = iv.iter().map(|&(_, b)| b).filter(|&b| b > r).collect();
                    ends.sort_unstable();
                    let want = std::iter::once(r).chain(ends).find(|&t| held(t) < cap).unwrap();
                    if want - r < 2_000 {
                        // The reading above, against a scan of every time from `r` on.
                        prop_assert_eq!((r..).find(|&t| held(t) < cap).unwrap(), want);
                    }
                    prop_assert_eq!(o.first_room(r, cap), want);
                    prop_assert_eq!(o.count_at(r), held(r));
                    prop_assert_eq!(o.first_room(r, 0), r);
                }
            }
            prop_assert_eq!(o.live, iv.len());
        }
        // Memory stays bounded: an advance past everything frees every node but the root.
        o.advance(at + 1_000_000);
        prop_assert_eq!((o.base, o.live, o.changes.first()), (0, 0, None));
        prop_assert_eq!(o.changes.height, 0);
        let c = &o.changes;
        prop_assert_eq!(c.leaves.len() + c.inners.len(), 1 + c.free_leaves.len() + c.free_inners.len());
        Ok(())
    }

    proptest! {
        /// `Occupancy` against a list of intervals scanned time by time, through a random
        /// sequence of additions (most from no earlier than the time reached, some from before
        /// it), advances and queries.
        #[test]
        fn first_room_matches_a_scan(
            ops in proptest::collection::vec((0u8..4, 0u64..40, 1u64..30, 1usize..5), 1..40),
        ) {
            check_ops::<FANOUT>(&ops)?;
        }

        /// The same with many intervals (trees of several levels at small fan-outs, as in
        /// the replays' maps of hundreds of times), equal times and queries far ahead.
        #[test]
        fn first_room_matches_a_scan_in_deep_trees(
            ops in proptest::collection::vec(
                prop_oneof![
                    // Mostly additions, often at the same few times, some long.
                    6 => (Just(0u8), 0u64..12, 1u64..12, Just(1usize)),
                    2 => (Just(0u8), 0u64..300, 1u64..400, Just(1usize)),
                    1 => (Just(3u8), 0u64..30, 1u64..60, Just(1usize)),
                    1 => (Just(1u8), 0u64..20, Just(1u64), Just(1usize)),
                    3 => (Just(2u8), 0u64..40, Just(1u64), 1usize..40),
                    1 => (Just(2u8), 0u64..1000, Just(1u64), 1usize..8),
                ],
                1..600,
            ),
        ) {
            check_ops::<2>(&ops)?;
            check_ops::<3>(&ops)?;
            check_ops::<FANOUT>(&ops)?;
        }
    }
}
