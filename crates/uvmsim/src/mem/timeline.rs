//! A bandwidth timeline: time is cut into buckets that each carry a fixed
//! number of bytes. A request takes capacity from the bucket of its arrival
//! onwards and completes when its last byte is carried. Unlike a single
//! "busy until" register, a request processed later but arriving earlier still
//! finds the earlier capacity, so requests with different path latencies do
//! not queue behind each other spuriously.
//!
//! The buckets from the current time on are held in a ring, up to a window of
//! [`WINDOW`] buckets; a reservation further ahead than that (a rare one, booked
//! far ahead by closed-form queueing elsewhere: 0.83 ms on 32-GPU on-touch PageRank,
//! 50,762 buckets of a DRAM channel) is kept in a sparse far part, 64-bucket chunks
//! in an ordered map, and its buckets move into the ring as the ring takes them on.
//! Memory is then the ring's window plus the chunks touched, not the span to the
//! furthest reservation; every request still gets the same bucket. A far part that
//! is not sparse (as many chunks as the window spans) doubles the window.

use crate::sim::Ps;
use std::collections::BTreeMap;

/// The ring's window to start with (a power of two: one summary word of the full-bucket
/// bitmap): buckets at or beyond `base + window` are kept in the far part. The window
/// doubles when the far part touches as many chunks as the window spans (it is not sparse).
const WINDOW: u64 = 4096;

/// Buckets per far chunk (one bitmap word: chunk boundaries are word boundaries of the ring).
const CHUNK_SHIFT: u32 = 6;

/// 64 buckets of the far part: bytes taken in each, and a bit per full one.
#[derive(Debug, Clone)]
struct Chunk {
    full: u64,
    used: [u32; 64],
}

/// Aligned to 64-byte lines (channels of one DRAM sit side by side in a `Vec`,
/// and a reservation touches one of them at random); with the bitmaps and the
/// far part the struct takes two lines.
#[derive(Debug, Clone)]
#[repr(align(64))]
pub struct Timeline {
    /// Bucket length is `1 << shift` ps (a power of two: no division on the hot path).
    shift: u32,
    cap: u32,
    /// Picoseconds per byte of capacity within a bucket, 16.16 fixed point
    /// (integer arithmetic: float-to-int conversions cost more than the rest of a reservation).
    ps_per_cap_byte_fx: u64,
    /// Absolute index of the oldest bucket still held; buckets before it are in the past.
    base: u64,
    /// Every bucket from `base` up to this one is full (the saturated stretch).
    lo: u64,
    /// Buckets held: `base .. base + len`, stored in a ring indexed by `b & mask`
    /// (`mask` is the ring's length minus one, a power of two, at least 64).
    len: u64,
    /// Picoseconds per byte at the channel rate, 16.16 fixed point.
    ps_per_byte_fx: u64,
    /// Bytes taken in each held bucket.
    used: Box<[u32]>,
    /// One bit per ring slot, set when its held bucket is full: the first bucket
    /// with room at or after an arrival is found a 64-bucket word at a time in
    /// this small (cache-resident) bitmap, without reading the full buckets.
    /// Bits of slots not held are stale (a bucket's bit is cleared when it is taken on).
    full: Box<[u64]>,
    /// One bit per word of `full`, set only while that word is all ones (64 full buckets): a
    /// search that meets a long saturated stretch skips 4,096 buckets per summary word instead
    /// of 64 per word (an arrival ahead of `lo` scanned the stretch word by word: about half of
    /// `reserve`'s 29% of li-least-tlb's ATS PageRank run).
    full2: Box<[u64]>,
    /// Buckets at or beyond `base + window` are taken in `far`, not the ring (a power of two,
    /// from `WINDOW`; tests start lower).
    window: u64,
    /// First bucket of `far`'s first chunk, `u64::MAX` while `far` holds none.
    far_first: u64,
    /// The far part: chunks by number (bucket >> 6), only those touched. A bucket's entry
    /// counts only at or beyond `base + len` (the ring holds the ones before): the ring takes
    /// a bucket's bytes from here when it takes the bucket on, and a chunk is dropped once
    /// the ring has taken, or time has passed, its last bucket.
    /// (Boxed: one word, so the struct stays two cache lines; a `BTreeMap` inline takes three.)
    #[allow(clippy::box_collection)]
    far: Option<Box<BTreeMap<u64, Chunk>>>,
    /// `far_first.min(base + window)`: a reservation whose first bucket with room in the ring
    /// lies before it is the ring's alone (the hot path); at or beyond it, `reserve_far`.
    limit: u64,
}

const _: () = assert!(std::mem::size_of::<Timeline>() == 128);

/// Summary words for `words` words of the full-bucket bitmap (one bit each).
fn summary_words(words: usize) -> usize {
    words.div_ceil(64)
}

/// The summary word and bit of ring slot `i` (the bit of the `full` word holding it).
#[inline(always)]
fn summary_bit(i: usize) -> (usize, u64) {
    (i / 4096, 1 << ((i / 64) % 64))
}

impl Timeline {
    /// A channel of `gbps` GB/s whose typical request is `unit_bytes`.
    pub fn new(gbps: f64, unit_bytes: u64) -> Timeline {
        let ps_per_byte = 1000.0 / gbps; // 1 GB/s = 1 byte/ns
                                         // A bucket carries about 8 typical requests and lasts at least 1 ns.
        let want = ((8 * unit_bytes) as f64 * ps_per_byte).ceil().max(1000.0) as Ps;
        let shift = 64 - (want - 1).leading_zeros();
        let bucket_ps = 1u64 << shift;
        let cap = ((bucket_ps as f64 / ps_per_byte).floor() as u64).clamp(1, u32::MAX as u64) as u32;
        let n = 256;
        Timeline {
            shift,
            cap,
            ps_per_cap_byte_fx: (bucket_ps as f64 / cap as f64 * 65536.0).round() as u64,
            base: 0,
            lo: 0,
            len: 0,
            ps_per_byte_fx: (ps_per_byte * 65536.0).round() as u64,
            used: vec![0; n].into_boxed_slice(),
            full: vec![0; n / 64].into_boxed_slice(),
            full2: vec![0; summary_words(n / 64)].into_boxed_slice(),
            window: WINDOW,
            far_first: u64::MAX,
            far: None,
            limit: WINDOW,
        }
    }

    /// Length of one bucket in ps.
    pub fn bucket_ps(&self) -> Ps {
        1 << self.shift
    }

    #[inline(always)]
    fn mask(&self) -> u64 {
        self.used.len() as u64 - 1
    }

    /// Make bucket `b` (>= base, before `limit`: no far bucket to take on) held, growing the
    /// ring if needed; returns its ring index.
    #[inline(always)]
    fn slot(&mut self, b: u64) -> usize {
        while b >= self.base + self.len {
            if self.len == self.used.len() as u64 {
                self.grow();
            }
            let nb = self.base + self.len;
            let i = (nb & self.mask()) as usize;
            self.used[i] = 0;
            self.full[i / 64] &= !(1 << (i % 64));
            let (sw, sb) = summary_bit(i);
            self.full2[sw] &= !sb;
            self.len += 1;
        }
        (b & self.mask()) as usize
    }

    /// `slot` for any bucket before `base + window`: the far part's buckets the ring takes on
    /// on the way bring their bytes and full bits; a chunk goes with its last bucket.
    #[cold]
    #[inline(never)]
    fn slot_from_far(&mut self, b: u64) -> usize {
        while b >= self.base + self.len {
            let nb = self.base + self.len;
            self.slot(nb);
            if nb < self.far_first {
                continue;
            }
            let far = self.far.as_mut().expect("far_first is set");
            let first = far.first_entry().expect("far_first is set");
            debug_assert_eq!(*first.key(), nb >> CHUNK_SHIFT, "the far part starts at the ring's end");
            let used = first.get().used[(nb & 63) as usize];
            if nb & 63 == 63 {
                first.remove();
                self.far_moved();
            }
            let i = (nb & self.mask()) as usize;
            self.used[i] = used;
            if used == self.cap {
                self.full[i / 64] |= 1 << (i % 64);
                if self.full[i / 64] == !0 {
                    let (sw, sb) = summary_bit(i);
                    self.full2[sw] |= sb;
                }
            }
        }
        (b & self.mask()) as usize
    }

    /// `far_first` and `limit` after the far part, the window or `base` changed.
    #[inline(always)]
    fn far_moved(&mut self) {
        if let Some(far) = self.far.as_ref() {
            self.far_first = far.first_key_value().map_or(u64::MAX, |(&k, _)| k << CHUNK_SHIFT);
        }
        self.limit = self.far_first.min(self.base + self.window);
    }

    /// Time has moved past the ring's old end and the far part's first chunk: drop the far
    /// chunks wholly before the new end (`base + len`); the buckets before it of a chunk it
    /// falls inside are past, never read, and go with the chunk.
    #[cold]
    #[inline(never)]
    fn forget_far(&mut self) {
        let end = self.base + self.len;
        let far = self.far.as_mut().expect("far_first is set");
        while let Some(first) = far.first_entry() {
            if (*first.key() + 1) << CHUNK_SHIFT > end {
                break;
            }
            first.remove();
        }
        self.far_moved();
    }

    /// The first bucket at or after `x` with room, `x` being the ring's first with room at or
    /// after an arrival (a held bucket or the ring's end): past the far part's full buckets,
    /// 64 at a time through full chunks; a bucket of no chunk is empty.
    fn far_free(&self, mut x: u64) -> u64 {
        let Some(far) = self.far.as_ref() else { return x };
        if x < self.base + self.len {
            return x; // held, with room (the ring's end is inside the first chunk)
        }
        for (&k, c) in far.range(x >> CHUNK_SHIFT..) {
            if k != x >> CHUNK_SHIFT {
                break; // x lies in a chunk not touched: empty
            }
            let room = !c.full >> (x & 63);
            if room != 0 {
                return x + room.trailing_zeros() as u64;
            }
            x = (k + 1) << CHUNK_SHIFT;
        }
        x
    }

    /// The part of `reserve` at or beyond `limit`: from the ring's first bucket with room,
    /// `root`, the first with room counting the far part, and up to `left` bytes taken there
    /// (in the ring before `base + window`, else in the far part). Returns that bucket, its
    /// bytes taken after this, and how many were taken now.
    #[cold]
    #[inline(never)]
    fn reserve_far(&mut self, root: u64, left: u64) -> (u64, u32, u32) {
        let b = self.far_free(root);
        let cap = self.cap;
        let fit = |used: u32| (cap - used).min(left.min(u32::MAX as u64) as u32);
        if b < self.base + self.window {
            let i = self.slot_from_far(b);
            let take = fit(self.used[i]);
            self.used[i] += take;
            if self.used[i] == cap {
                self.full[i / 64] |= 1 << (i % 64);
                if self.full[i / 64] == !0 {
                    let (sw, sb) = summary_bit(i);
                    self.full2[sw] |= sb;
                }
            }
            return (b, self.used[i], take);
        }
        let far = self.far.get_or_insert_with(Default::default);
        let c = far.entry(b >> CHUNK_SHIFT).or_insert(Chunk { full: 0, used: [0; 64] });
        let k = (b & 63) as usize;
        let take = fit(c.used[k]);
        c.used[k] += take;
        if c.used[k] == cap {
            c.full |= 1 << k;
        }
        let used = c.used[k];
        let chunks = far.len() as u64;
        self.far_moved();
        // A far part whose chunks would take a quarter of the window's ring is not sparse (a
        // long backlog, say): the window doubles, and the ring takes on at once the far buckets
        // now inside it (it would hold them all in a dense form anyway).
        if chunks > self.window >> (CHUNK_SHIFT + 2) {
            self.window *= 2;
            self.far_moved();
            let inside = (self.base + self.window) >> CHUNK_SHIFT;
            let last = self.far.as_ref().and_then(|f| f.range(..inside).next_back()).map(|(&k, _)| k);
            if let Some(k) = last {
                self.slot_from_far(((k + 1) << CHUNK_SHIFT) - 1);
            }
        }
        (b, used, take)
    }

    #[cold]
    fn grow(&mut self) {
        let n = self.used.len();
        let mut used = vec![0; 2 * n].into_boxed_slice();
        let mut full = vec![0u64; 2 * n / 64].into_boxed_slice();
        let (mask, mask2) = (n as u64 - 1, 2 * n as u64 - 1);
        for b in self.base..self.base + self.len {
            let (i, j) = ((b & mask) as usize, (b & mask2) as usize);
            used[j] = self.used[i];
            if used[j] == self.cap {
                full[j / 64] |= 1 << (j % 64);
            }
        }
        let mut full2 = vec![0u64; summary_words(full.len())].into_boxed_slice();
        for (w, &word) in full.iter().enumerate() {
            if word == !0 {
                full2[w / 64] |= 1 << (w % 64);
            }
        }
        self.used = used;
        self.full = full;
        self.full2 = full2;
    }

    /// The first held bucket at or after `b` with room, or the ring's end (the first bucket
    /// not held: free unless the far part says otherwise, which `reserve` asks past `limit`).
    #[inline(always)]
    fn first_free(&self, b: u64) -> u64 {
        let end = self.base + self.len;
        let mask = self.mask();
        let mut x = b;
        while x < end {
            let i = (x & mask) as usize;
            let room = !self.full[i / 64] >> (i % 64);
            if room != 0 {
                // Bits at or beyond `end` are stale: bucket `end` is free whatever they say.
                return (x + room.trailing_zeros() as u64).min(end);
            }
            x += 64 - (i % 64) as u64;
            // Skip the run of all-full words from here. It stops at the summary word's end (the
            // shift brings in zeros at the top) and at the ring's wrap (the summary's bits past
            // the ring's last word are 0); the loop goes on from there.
            let w = ((x & mask) as usize) / 64;
            let run = (!self.full2[w / 64] >> (w % 64)).trailing_zeros().min(64 - (w % 64) as u32);
            x += 64 * run as u64;
        }
        b.max(end)
    }

    /// Carry `bytes` arriving at `t` (with `t >= now`); returns when the last byte is through.
    #[inline]
    pub fn reserve(&mut self, t: Ps, bytes: u64, now: Ps) -> Ps {
        // Buckets before the current time can take no more requests: forget them.
        let now_b = now >> self.shift;
        if now_b > self.base {
            let drop = (now_b - self.base).min(self.len);
            self.len -= drop;
            self.base = now_b;
            self.lo = self.lo.max(now_b);
            self.limit = self.far_first.min(now_b + self.window);
            // The far part's first chunk is wholly past (the ring's end jumped beyond it).
            if self.base + self.len >= self.far_first.saturating_add(1 << CHUNK_SHIFT) {
                self.forget_far();
            }
        }
        let min_end = t + ((bytes * self.ps_per_byte_fx) >> 16);
        // Start at the arrival bucket, or past the saturated stretch in front of it.
        let mut b = (t >> self.shift).max(self.lo);
        let mut left = bytes;
        loop {
            let root = self.first_free(b);
            // Before `limit` the ring alone answers (no far bucket at or before `root`, and
            // `root` inside the window): the one comparison the far part costs the hot path.
            if root >= self.limit {
                let (root, used, take) = self.reserve_far(root, left);
                left -= take as u64;
                if b == self.lo {
                    self.lo = root;
                }
                b = root;
                if used == self.cap && b == self.lo {
                    self.lo = b + 1;
                }
                if left == 0 {
                    let end = (b << self.shift) + ((used as u64 * self.ps_per_cap_byte_fx) >> 16);
                    return end.max(min_end);
                }
                b += 1;
                continue;
            }
            if b == self.lo {
                self.lo = root;
            }
            b = root;
            let i = self.slot(b);
            let cap = self.cap;
            let slot = &mut self.used[i];
            let take = (cap - *slot).min(left.min(u32::MAX as u64) as u32);
            *slot += take;
            left -= take as u64;
            let used = *slot;
            if used == cap {
                self.full[i / 64] |= 1 << (i % 64);
                if self.full[i / 64] == !0 {
                    let (sw, sb) = summary_bit(i);
                    self.full2[sw] |= sb;
                }
                if b == self.lo {
                    self.lo = b + 1;
                }
            }
            if left == 0 {
                let end = (b << self.shift) + ((used as u64 * self.ps_per_cap_byte_fx) >> 16);
                return end.max(min_end);
            }
            b += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// The reference model: every bucket's bytes in a map, filled one bucket at
    /// a time from the arrival (or the earliest bucket not yet forgotten).
    struct Naive {
        shift: u32,
        cap: u64,
        ps_per_cap_byte_fx: u64,
        ps_per_byte_fx: u64,
        floor: u64,
        used: HashMap<u64, u64>,
    }

    impl Naive {
        fn of(tl: &Timeline) -> Naive {
            Naive {
                shift: tl.shift,
                cap: tl.cap as u64,
                ps_per_cap_byte_fx: tl.ps_per_cap_byte_fx,
                ps_per_byte_fx: tl.ps_per_byte_fx,
                floor: 0,
                used: HashMap::new(),
            }
        }

        fn reserve(&mut self, t: Ps, bytes: u64, now: Ps) -> Ps {
            self.floor = self.floor.max(now >> self.shift);
            let mut b = (t >> self.shift).max(self.floor);
            let mut left = bytes;
            loop {
                let u = self.used.entry(b).or_insert(0);
                let take = (self.cap - *u).min(left);
                *u += take;
                left -= take;
                if left == 0 && take > 0 || bytes == 0 && *u < self.cap {
                    let end = (b << self.shift) + ((*u * self.ps_per_cap_byte_fx) >> 16);
                    return end.max(t + ((bytes * self.ps_per_byte_fx) >> 16));
                }
                b += 1;
            }
        }
    }

    proptest! {
        /// Random reservation sequences (bursts that saturate the channel, arrivals
        /// out of order, far-future arrivals that grow the ring, requests larger
        /// than a bucket, time moving on): the same end time as the reference for
        /// every request.
        #[test]
        fn reservations_match_a_per_bucket_reference(
            gbps in prop_oneof![Just(32.0), Just(10.0), Just(1000.0), 0.5f64..100.0],
            ops in proptest::collection::vec((0u64..4, 0u64..200_000, 0u32..6, 0u64..3), 1..600),
        ) {
            let mut tl = Timeline::new(gbps, 128);
            let mut naive = Naive::of(&tl);
            let mut now = 0u64;
            for (i, &(step, dt, size, far)) in ops.iter().enumerate() {
                now += [0, 0, 100, 5_000][step as usize];
                let t = now + dt + far * far * [0, 50_000_000, 2_000_000_000][far as usize];
                let bytes = [64, 128, 128, 1, 4096, 0][size as usize];
                let (got, want) = (tl.reserve(t, bytes, now), naive.reserve(t, bytes, now));
                prop_assert_eq!(got, want, "request {} ({} B at {} ps, now {})", i, bytes, t, now);
            }
        }
    }

    proptest! {
        /// Reservations beyond the ring's window (started small, so the far part is used
        /// often): isolated ones many windows ahead, far saturated stretches and requests
        /// spanning several far chunks, arrivals inside them, time moving on to fold far buckets
        /// into the ring or jumping past whole chunks, and the window doubling: the same end
        /// time as the reference for every request.
        #[test]
        fn far_reservations_match_a_per_bucket_reference(
            gbps in prop_oneof![Just(32.0), Just(1.0), 0.5f64..100.0],
            window in prop_oneof![Just(64u64), Just(256), Just(1024)],
            ops in proptest::collection::vec((0u64..6, 0u64..8, 0u64..4096, 0u64..1_000_000, 0u32..6), 1..400),
        ) {
            let mut tl = Timeline::new(gbps, 128);
            tl.window = window;
            tl.far_moved();
            let mut naive = Naive::of(&tl);
            let (bucket, cap) = (tl.bucket_ps(), tl.cap as u64);
            let mut now = 0u64;
            for (i, &(step, reach, off, sub, size)) in ops.iter().enumerate() {
                now += [0, 0, 0, bucket, 37 * bucket, 3 * window * bucket][step as usize] + sub % 1000;
                // Near the clock, at the window's edge, or up to 8 windows ahead.
                let ahead = match reach {
                    0..=2 => off % 64,
                    3 => window - 4 + off % 8,
                    _ => off * window / 512,
                };
                let t = now + ahead * bucket + sub % bucket;
                let bytes = [64, 128, cap, 70 * cap + 5, 1, 0][size as usize];
                let (got, want) = (tl.reserve(t, bytes, now), naive.reserve(t, bytes, now));
                prop_assert_eq!(got, want, "request {} ({} B at {} ps, now {})", i, bytes, t, now);
            }
        }
    }

    /// A few reservations 50,000 buckets ahead (as 32-GPU on-touch PageRank books a DRAM
    /// channel's data reads) stay in the far part: the ring keeps its first size, the far
    /// part a chunk each, and as the clock gets there their buckets fold into the ring (full
    /// ones stay full) and the chunks go; time jumping past another drops it unread.
    #[test]
    fn sparse_far_reservations_keep_the_ring_small_and_fold_in_as_time_comes() {
        let mut tl = Timeline::new(32.0, 64);
        let mut naive = Naive::of(&tl);
        let (bucket, cap) = (tl.bucket_ps(), tl.cap as u64);
        let mut both = |tl: &mut Timeline, t: Ps, bytes: u64, now: Ps| {
            let (got, want) = (tl.reserve(t, bytes, now), naive.reserve(t, bytes, now));
            assert_eq!(got, want, "{bytes} B at {t}, now {now}");
            got
        };
        let far = 50_000 * bucket;
        both(&mut tl, 0, 128, 0);
        for k in 0..3 {
            both(&mut tl, far + k * 3 * bucket, 3 * cap, 0); // three full buckets each
        }
        both(&mut tl, 90_000 * bucket, 64, 0);
        assert_eq!(tl.used.len(), 256, "the ring did not grow");
        assert_eq!(tl.far.as_ref().map(|f| f.len()), Some(2));
        // Near the far stretch: arrivals inside it go past its full buckets.
        let now = far - 100 * bucket;
        let end = both(&mut tl, far + 2 * bucket, 64, now);
        assert!(end > far + 9 * bucket, "{end}");
        for b in 0..12 {
            both(&mut tl, now + b * 9 * bucket, 64, now);
        }
        let now = far + 200 * bucket; // the ring has taken the chunk's buckets on, or time passed them
        both(&mut tl, now, 64, now);
        assert_eq!(tl.far.as_ref().map(|f| f.len()), Some(1), "the first chunk went");
        let now = 100_000 * bucket; // past the other chunk, which was never folded
        both(&mut tl, now, 64, now);
        assert_eq!((tl.far.as_ref().map(|f| f.len()), tl.far_first), (Some(0), u64::MAX));
        assert_eq!(tl.window, WINDOW);
    }

    /// A saturated backlog longer than the window is not sparse: the window doubles as it
    /// fills far chunks, the ring grows to hold it, and every request matches the reference.
    #[test]
    fn a_backlog_longer_than_the_window_widens_it() {
        let mut tl = Timeline::new(32.0, 128);
        let mut naive = Naive::of(&tl);
        for k in 0..100_000u64 {
            let now = k * 100; // 40 times the channel's rate: 12,000 buckets of backlog at the end
            assert_eq!(tl.reserve(now, 128, now), naive.reserve(now, 128, now), "request {k}");
        }
        assert!(tl.window > WINDOW && tl.used.len() > WINDOW as usize, "{} {}", tl.window, tl.used.len());
        assert!(tl.far.as_ref().map_or(0, |f| f.len()) as u64 <= tl.window >> CHUNK_SHIFT);
    }

    /// Saturated stretches far longer than a word of the full-bucket bitmap, crossing
    /// the ring's wrap and its growth, with holes left by out-of-order arrivals and
    /// buckets forgotten and taken on again: the reference's end time for every request.
    #[test]
    fn long_saturated_stretches_match_the_reference() {
        for (gbps, jump) in [(32.0, 200), (3.0, 200), (32.0, 60)] {
            let mut tl = Timeline::new(gbps, 128);
            let mut naive = Naive::of(&tl);
            let bucket = tl.bucket_ps();
            let mut now = 0u64;
            for k in 0..20_000u64 {
                let r = crate::sim::mix64(k);
                if r % 97 == 0 {
                    now += (r >> 8) % (jump * bucket); // time jumps on: buckets are forgotten
                }
                let burst = (r >> 20) % 4 == 0; // a quarter of the requests pile onto `now`
                let t = now + if burst { 0 } else { (r >> 24) % (700 * bucket) };
                let bytes = [128, 4096, 64, 1][((r >> 40) % 4) as usize];
                assert_eq!(tl.reserve(t, bytes, now), naive.reserve(t, bytes, now), "request {k} ({bytes} B at {t}, now {now})");
            }
            assert!(tl.used.len() > 256, "the ring grew: {}", tl.used.len());
        }
    }

    /// Stretches of thousands of full buckets (many all-full words, which the summary
    /// bitmap skips 64 at a time), arrivals inside them and at their ends, holes, the ring's
    /// growth and wrap, and time moving on past them: the reference's end time for every request.
    #[test]
    fn stretches_longer_than_a_summary_word_match_the_reference() {
        for gbps in [32.0, 1.0] {
            let mut tl = Timeline::new(gbps, 128);
            let mut naive = Naive::of(&tl);
            let (bucket, cap) = (tl.bucket_ps(), tl.cap as u64);
            let mut now = 0u64;
            for k in 0..1_500u64 {
                let r = crate::sim::mix64(k ^ 0x5eed);
                if r % 211 == 0 {
                    now += (r >> 8) % (8_000 * bucket);
                }
                let t = now + (r >> 24) % (12_000 * bucket);
                // Mostly small requests, some that fill hundreds to thousands of buckets at once.
                let bytes = match (r >> 40) % 8 {
                    0 => cap * (1 + (r >> 44) % 2_000),
                    1 => cap * 64 - 1,
                    2 => 1,
                    _ => 128,
                };
                assert_eq!(tl.reserve(t, bytes, now), naive.reserve(t, bytes, now), "request {k} ({bytes} B at {t}, now {now})");
            }
            assert!(tl.used.len() >= 1 << 13, "the ring grew to several summary words: {}", tl.used.len());
        }
    }

    /// The bitmap's bits beyond the held buckets are stale: after the ring wraps, a
    /// request that finds every held bucket from its arrival on full takes the first
    /// bucket not yet held, not a later one whose stale bit says it has room.
    #[test]
    fn stale_bits_past_the_held_buckets_are_ignored() {
        let mut tl = Timeline::new(32.0, 128);
        let mut naive = Naive::of(&tl);
        let (bp, cap) = (tl.bucket_ps(), tl.cap as u64);
        let mut both = |t: Ps, bytes: u64, now: Ps| {
            let (got, want) = (tl.reserve(t, bytes, now), naive.reserve(t, bytes, now));
            assert_eq!(got, want, "{bytes} B at {t}, now {now}");
            got
        };
        // Buckets 0..=40 full (ring slots 0..=40), then all forgotten.
        for b in 0..=40 {
            both(b * bp, cap, 0);
        }
        let now = 250 * bp;
        both(now, 64, now); // bucket 250 held with room: the saturated stretch starts there
        for b in 251..260 {
            both(b * bp, cap, now); // 251..=259 full; 256..=259 reuse slots 0..=3
        }
        // From 252 every held bucket is full; bucket 260 (slot 4) is the first with room,
        // although its slot's stale bit says full and slot 41's says free.
        let end = both(252 * bp, 128, now);
        assert!(end > 260 * bp && end <= 261 * bp, "{end}");
    }

    #[test]
    fn an_idle_channel_costs_the_transfer_time() {
        let mut tl = Timeline::new(10.0, 128); // 12.8 ns per 128 B
        let end = tl.reserve(1_000_000, 128, 0);
        assert!((1_012_800..=1_012_900).contains(&end), "{end}");
    }

    #[test]
    fn a_burst_is_served_at_the_channel_rate() {
        let mut tl = Timeline::new(10.0, 128);
        let ends: Vec<Ps> = (0..100).map(|_| tl.reserve(0, 128, 0)).collect();
        // 100 lines at 12.8 ns each take 1280 ns, within one bucket of rounding.
        let last = *ends.iter().max().unwrap();
        assert!((1_280_000..=1_280_000 + tl.bucket_ps()).contains(&last), "{last}");
        assert!(ends.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn an_earlier_arrival_processed_later_is_not_queued_behind_a_later_one() {
        let mut tl = Timeline::new(10.0, 128);
        let late = tl.reserve(10_000_000, 128, 0);
        let early = tl.reserve(0, 128, 0);
        assert!((12_800..=12_900).contains(&early), "{early}");
        assert!(late > 10_000_000);
    }

    #[test]
    fn saturation_matches_a_single_queue() {
        // Requests arriving together at a saturated channel finish at the channel rate,
        // whatever order they arrive in, and every byte is carried once.
        let mut tl = Timeline::new(10.0, 128);
        let mut last = 0;
        for k in 0..10_000u64 {
            let now = k * 1000; // one request per ns, ten times the channel rate
            last = last.max(tl.reserve(now + 500_000 + (k % 7) * 1000, 128, now));
        }
        let ideal = 500_000 + 10_000 * 12_800;
        assert!(last + 2 * tl.bucket_ps() >= ideal && last <= ideal + 2 * tl.bucket_ps(), "{last} vs {ideal}");
    }

    /// Bucket geometry: about 8 typical requests a bucket, at least 1 ns, a power of two; and no
    /// more bytes a bucket than the rate carries. 64 B at 1000 GB/s: 512 ps wanted, 1024 ps
    /// (1 ns) taken, 1024 B. 128 B at 3 GB/s: 341,334 ps wanted, 524,288 taken, which carries
    /// 1572.9 B: 1572.
    #[test]
    fn buckets_last_at_least_a_nanosecond_and_carry_whole_bytes_within_the_rate() {
        let fast = Timeline::new(1000.0, 64);
        assert_eq!((fast.bucket_ps(), fast.cap), (1024, 1024));
        let slow = Timeline::new(3.0, 128);
        assert_eq!((slow.bucket_ps(), slow.cap), (524_288, 1572));
    }
}
