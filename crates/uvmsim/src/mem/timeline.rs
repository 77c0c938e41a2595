//! A bandwidth timeline: time is cut into buckets that each carry a fixed
//! number of bytes. A request takes capacity from the bucket of its arrival
//! onwards and completes when its last byte is carried. Unlike a single
//! "busy until" register, a request processed later but arriving earlier still
//! finds the earlier capacity, so requests with different path latencies do
//! not queue behind each other spuriously.

use crate::sim::Ps;

/// One held bucket: its bytes taken and, once full, how far ahead to look for
/// room. Both in one 8-byte word, so a reservation reads one cache line per bucket.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    used: u32,
    /// Union-find over buckets: for a full bucket `b`, bucket `b + skip` is a
    /// later one to try next (path-compressed), so a saturated stretch is
    /// skipped in near O(1). At most the ring's length (< 2^32 buckets).
    skip: u32,
}

/// The hot fields fit one 64-byte line (channels of one DRAM sit side by side
/// in a `Vec`, and a reservation touches one of them at random).
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
    /// (`mask` is the ring's length minus one, a power of two).
    len: u64,
    /// Picoseconds per byte at the channel rate, 16.16 fixed point.
    ps_per_byte_fx: u64,
    ring: Box<[Bucket]>,
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
            ring: vec![Bucket::default(); n].into_boxed_slice(),
        }
    }

    /// Length of one bucket in ps.
    pub fn bucket_ps(&self) -> Ps {
        1 << self.shift
    }

    #[inline(always)]
    fn mask(&self) -> u64 {
        self.ring.len() as u64 - 1
    }

    /// Make bucket `b` (>= base) held, growing the ring if needed; returns its ring index.
    #[inline]
    fn slot(&mut self, b: u64) -> usize {
        while b >= self.base + self.len {
            if self.len == self.ring.len() as u64 {
                self.grow();
            }
            let nb = self.base + self.len;
            let i = (nb & self.mask()) as usize;
            self.ring[i] = Bucket::default();
            self.len += 1;
        }
        (b & self.mask()) as usize
    }

    #[cold]
    fn grow(&mut self) {
        let n = self.ring.len();
        let mut ring = vec![Bucket::default(); 2 * n].into_boxed_slice();
        let (mask, mask2) = (n as u64 - 1, 2 * n as u64 - 1);
        for b in self.base..self.base + self.len {
            ring[(b & mask2) as usize] = self.ring[(b & mask) as usize];
        }
        self.ring = ring;
    }

    /// The bucket to try after full bucket `b` (ring index `i`).
    #[inline(always)]
    fn next_of(&self, b: u64, i: usize) -> u64 {
        b + self.ring[i].skip.max(1) as u64
    }

    /// The first bucket at or after `b` with free capacity.
    fn find(&mut self, b: u64) -> u64 {
        let mut root = b;
        loop {
            let i = self.slot(root);
            if self.ring[i].used < self.cap {
                break;
            }
            root = self.next_of(root, i);
        }
        let mask = self.mask();
        let mut y = b;
        while y < root {
            let i = (y & mask) as usize;
            let n = self.next_of(y, i);
            // root - y < len <= the ring's length, which fits in u32.
            self.ring[i].skip = (root - y) as u32;
            y = n;
        }
        root
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
        }
        let min_end = t + ((bytes * self.ps_per_byte_fx) >> 16);
        // Start at the arrival bucket, or past the saturated stretch in front of it.
        let mut b = (t >> self.shift).max(self.lo);
        let mut left = bytes;
        loop {
            let i = self.slot(b);
            if self.ring[i].used >= self.cap {
                let root = self.find(b);
                if b == self.lo {
                    self.lo = root;
                }
                b = root;
            }
            let i = (b & self.mask()) as usize;
            let slot = &mut self.ring[i];
            let take = (self.cap - slot.used).min(left.min(u32::MAX as u64) as u32);
            slot.used += take;
            left -= take as u64;
            let used = slot.used;
            if used == self.cap {
                slot.skip = 1;
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
}
