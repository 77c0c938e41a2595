//! Set-associative storage shared by every cache-like structure: TLBs,
//! page-walk caches, data caches (and later GPU-memory eviction lists).
//!
//! How it works: `sets × ways` slots hold a 64-bit key and a payload. The set is
//! `key mod sets`; the replacement policy sees only the candidates of one set
//! and their per-slot stamps, so one LRU implementation serves every level.
//! Control protocol (the same for every structure): [`SetAssoc::invalidate`]
//! one key, [`SetAssoc::invalidate_where`] a range, [`SetAssoc::flush`] all.

use serde::{Deserialize, Serialize};

/// Which slot of a full set is evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Replacement {
    /// Least recently used (a hit refreshes the slot).
    #[default]
    Lru,
    /// First in, first out (a hit does not refresh the slot).
    Fifo,
}

const INVALID: u64 = u64::MAX;

/// Hint-table length: a power of two, about twice the entries (few collisions), at most 64 Ki.
fn hint_len(entries: usize) -> usize {
    (2 * entries).next_power_of_two().clamp(2, 1 << 16)
}

/// One pass over a set without data-dependent branches (selects, not jumps:
/// the stamps of a set are in random order, so a branch per comparison would be
/// mispredicted half the time): the way holding `key` (`usize::MAX` if none)
/// and the oldest way.
#[inline(always)]
fn scan_any(keys: &[u64], stamps: &[u32], key: u64) -> (usize, usize) {
    let (mut hit, mut oldest, mut victim) = (usize::MAX, u32::MAX, 0);
    for (w, (&k, &st)) in keys.iter().zip(stamps).enumerate() {
        hit = if k == key { w } else { hit };
        let older = st < oldest;
        oldest = if older { st } else { oldest };
        victim = if older { w } else { victim };
    }
    (hit, victim)
}

/// [`scan_any`] for sets of `W` ways (4, 8 or 16): unrolled and vectorised.
#[inline(always)]
fn scan_fixed<const W: usize>(keys: &[u64], stamps: &[u32], key: u64) -> (usize, usize) {
    let keys: &[u64; W] = keys.try_into().expect("set of W ways");
    let stamps: &[u32; W] = stamps.try_into().expect("set of W ways");
    (find_fixed(keys, key), oldest_fixed(stamps))
}

/// The way of a `W`-way set (W a multiple of 4) holding `key`, `usize::MAX` if none: two keys per
/// SSE4.1 compare, the matches gathered into a bit mask (LLVM's own vectorisation of the select
/// loop kept a select chain per way: a third of a data-cache lookup).
#[cfg(all(target_arch = "x86_64", target_feature = "sse4.1"))]
#[inline(always)]
fn find_fixed<const W: usize>(keys: &[u64; W], key: u64) -> usize {
    use std::arch::x86_64::{__m128i, _mm_castsi128_pd, _mm_cmpeq_epi64, _mm_loadu_si128, _mm_movemask_pd, _mm_set1_epi64x};
    // SAFETY: SSE4.1 is enabled at compile time (cfg above); the unaligned loads read 16 bytes at
    // offsets 0, 16, .., 8 W - 16 of the W keys.
    let hits = unsafe {
        let k = _mm_set1_epi64x(key as i64);
        let p = keys.as_ptr().cast::<__m128i>();
        let mut hits = 0u32;
        for i in 0..W / 2 {
            let eq = _mm_cmpeq_epi64(_mm_loadu_si128(p.add(i)), k);
            hits |= (_mm_movemask_pd(_mm_castsi128_pd(eq)) as u32) << (2 * i);
        }
        hits
    };
    if hits == 0 {
        usize::MAX
    } else {
        hits.trailing_zeros() as usize
    }
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse4.1")))]
#[inline(always)]
fn find_fixed<const W: usize>(keys: &[u64; W], key: u64) -> usize {
    keys.iter().position(|&k| k == key).unwrap_or(usize::MAX)
}

/// The first way with the smallest stamp of a `W`-way set (W a multiple of 4): the minimum of four
/// lanes at a time, folded across the lanes, then the first lane equal to it, as a bit mask.
#[cfg(all(target_arch = "x86_64", target_feature = "sse4.1"))]
#[inline(always)]
fn oldest_fixed<const W: usize>(stamps: &[u32; W]) -> usize {
    use std::arch::x86_64::{
        __m128i, _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_loadu_si128, _mm_min_epu32, _mm_movemask_ps, _mm_shuffle_epi32,
    };
    // SAFETY: SSE4.1 is enabled at compile time (cfg above); the unaligned loads read 16 bytes at
    // offsets 0, 16, .., 4 W - 16 of the W stamps.
    let first = unsafe {
        let p = stamps.as_ptr().cast::<__m128i>();
        let mut m = _mm_loadu_si128(p);
        for j in 1..W / 4 {
            m = _mm_min_epu32(m, _mm_loadu_si128(p.add(j)));
        }
        // Every lane the minimum: lanes (2, 3, 0, 1), then (1, 0, 3, 2).
        m = _mm_min_epu32(m, _mm_shuffle_epi32::<0b01_00_11_10>(m));
        m = _mm_min_epu32(m, _mm_shuffle_epi32::<0b10_11_00_01>(m));
        let mut first = 0u32;
        for j in 0..W / 4 {
            let eq = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(j)), m);
            first |= (_mm_movemask_ps(_mm_castsi128_ps(eq)) as u32) << (4 * j);
        }
        first
    };
    first.trailing_zeros() as usize
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse4.1")))]
#[inline(always)]
fn oldest_fixed<const W: usize>(stamps: &[u32; W]) -> usize {
    scan_any(&[0; W], stamps, u64::MAX).1
}

/// [`scan_any`], specialised for the usual associativities.
#[inline(always)]
fn scan(keys: &[u64], stamps: &[u32], key: u64) -> (usize, usize) {
    match keys.len() {
        4 => scan_fixed::<4>(keys, stamps, key),
        8 => scan_fixed::<8>(keys, stamps, key),
        16 => scan_fixed::<16>(keys, stamps, key),
        w if w > HINT_MIN_WAYS => match find_wide(keys, key) {
            Some(hit) => (hit, 0),
            None => (usize::MAX, oldest_wide(stamps)),
        },
        _ => scan_any(keys, stamps, key),
    }
}

/// Ways compared per step by the wide-set scans: a chunk is tested with selects and
/// an OR (vectorised), and only the chunk that holds the answer is searched further.
const CHUNK: usize = 16;

/// The way of a wide set (fully associative TLBs: 128 ways) holding `key`. A miss,
/// which searches every way, costs a quarter of a one-by-one search with early exits.
#[inline]
fn find_wide(keys: &[u64], key: u64) -> Option<usize> {
    let mut chunks = keys.chunks_exact(CHUNK);
    for (c, ch) in (&mut chunks).enumerate() {
        let ch: &[u64; CHUNK] = ch.try_into().expect("chunk of CHUNK ways");
        if chunk_holds(ch, key) {
            return ch.iter().position(|&k| k == key).map(|w| c * CHUNK + w);
        }
    }
    let base = keys.len() - chunks.remainder().len();
    chunks.remainder().iter().position(|&k| k == key).map(|w| base + w)
}

/// Does the chunk hold `key`? Two keys per SSE4.1 compare (the build targets x86-64-v2,
/// see .cargo/config.toml): LLVM does not vectorise the 64-bit compares of the portable form.
#[cfg(all(target_arch = "x86_64", target_feature = "sse4.1"))]
#[inline(always)]
fn chunk_holds(ch: &[u64; CHUNK], key: u64) -> bool {
    use std::arch::x86_64::{__m128i, _mm_cmpeq_epi64, _mm_loadu_si128, _mm_or_si128, _mm_set1_epi64x, _mm_testz_si128};
    // SAFETY: SSE4.1 is enabled at compile time (cfg above); the loads read 16 bytes
    // at offsets 0, 16, .., 112 of the 128-byte chunk, unaligned loads being allowed.
    unsafe {
        let k = _mm_set1_epi64x(key as i64);
        let p = ch.as_ptr().cast::<__m128i>();
        let mut any = _mm_cmpeq_epi64(_mm_loadu_si128(p), k);
        for i in 1..CHUNK / 2 {
            any = _mm_or_si128(any, _mm_cmpeq_epi64(_mm_loadu_si128(p.add(i)), k));
        }
        _mm_testz_si128(any, any) == 0
    }
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse4.1")))]
#[inline(always)]
fn chunk_holds(ch: &[u64; CHUNK], key: u64) -> bool {
    ch.iter().fold(false, |any, &k| any | (k == key))
}

/// The first way with the smallest stamp (the empty or oldest slot), in two
/// vectorised passes over a wide set: the minimum, then its first position.
#[inline]
fn oldest_wide(stamps: &[u32]) -> usize {
    let mut lanes = [u32::MAX; CHUNK];
    let mut chunks = stamps.chunks_exact(CHUNK);
    for ch in &mut chunks {
        for (m, &s) in lanes.iter_mut().zip(ch) {
            *m = (*m).min(s);
        }
    }
    let min = chunks.remainder().iter().fold(lanes.iter().fold(u32::MAX, |a, &m| a.min(m)), |a, &s| a.min(s));
    find_first_u32(stamps, min)
}

/// The first position of `v` in `xs`, which holds it, searched a chunk at a time.
#[inline]
fn find_first_u32(xs: &[u32], v: u32) -> usize {
    let mut chunks = xs.chunks_exact(CHUNK);
    for (c, ch) in (&mut chunks).enumerate() {
        let ch: &[u32; CHUNK] = ch.try_into().expect("chunk of CHUNK ways");
        if ch.iter().fold(false, |any, &x| any | (x == v)) {
            return c * CHUNK + ch.iter().position(|&x| x == v).expect("the chunk holds it");
        }
    }
    let base = xs.len() - chunks.remainder().len();
    base + chunks.remainder().iter().position(|&x| x == v).expect("the minimum is in the set")
}

/// The slot a fill will take, found by a failed [`SetAssoc::lookup_or_slot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(usize);

impl Slot {
    /// The slot's index in the array (`0..entries`), for per-slot side tables.
    pub fn index(self) -> usize {
        self.0
    }
}

/// A set-associative array of `(key, V)`; keys must not be `u64::MAX`.
#[derive(Debug, Clone)]
pub struct SetAssoc<V: Copy> {
    sets: usize,
    ways: usize,
    pow2_mask: Option<u64>,
    /// Lemire's fast-modulo constant for a set count that is not a power of two.
    fastmod: u64,
    keys: Vec<u64>,
    /// Recency (LRU) or insertion (FIFO) order within a set: larger is newer;
    /// 0 marks an empty slot, so the victim scan is one `min` per set.
    /// 32 bits keep that scan narrow; `tick` renumbers before they wrap.
    stamps: Vec<u32>,
    vals: Vec<V>,
    clock: u32,
    policy: Replacement,
    /// For wide sets (fully associative TLBs): a direct-mapped table from a
    /// key's hash to the slot that last held it, checked before scanning the
    /// set, so a lookup costs O(1) instead of O(ways). Empty when sets are narrow.
    hints: Vec<u32>,
    /// Per hint-table index, how many keys in the array hash to it: a key whose count
    /// is 0 is absent, so most misses in a wide set skip the scan of its ways.
    present: Vec<u32>,
    hint_shift: u32,
}

/// The hint table's multiplicative hash constant (2^64 / golden ratio).
const HINT_MUL: u64 = 0x9E37_79B9_7F4A_7C15;

/// Sets wider than this get a hint table.
const HINT_MIN_WAYS: usize = 16;

impl<V: Copy + Default> SetAssoc<V> {
    /// `entries` slots in sets of `ways` (`entries` must be a multiple of `ways`; both > 0).
    pub fn new(entries: usize, ways: usize, policy: Replacement) -> Self {
        assert!(ways > 0 && entries >= ways && entries % ways == 0, "bad geometry {entries}/{ways}");
        let sets = entries / ways;
        SetAssoc {
            sets,
            ways,
            pow2_mask: sets.is_power_of_two().then_some(sets as u64 - 1),
            fastmod: (u64::MAX / sets as u64).wrapping_add(1),
            keys: vec![INVALID; entries],
            stamps: vec![0; entries],
            vals: vec![V::default(); entries],
            clock: 0,
            policy,
            hints: if ways > HINT_MIN_WAYS { vec![0; hint_len(entries)] } else { vec![] },
            present: if ways > HINT_MIN_WAYS { vec![0; hint_len(entries)] } else { vec![] },
            hint_shift: 64 - hint_len(entries).trailing_zeros(),
        }
    }

    /// The hint-table index of `key` (multiplicative hashing).
    #[inline]
    fn hint(&self, key: u64) -> usize {
        (key.wrapping_mul(HINT_MUL) >> self.hint_shift) as usize
    }

    #[inline]
    fn set_base(&self, key: u64) -> usize {
        let s = match self.pow2_mask {
            Some(m) => key & m,
            // Fold the key to 32 bits, then (fold mod sets) without a division.
            None => {
                let folded = (key ^ (key >> 32)) & 0xFFFF_FFFF;
                ((self.fastmod.wrapping_mul(folded) as u128 * self.sets as u128) >> 64) as u64
            }
        };
        s as usize * self.ways
    }

    /// Start loading `key`'s set (keys, stamps, values) into the CPU's caches: a hint
    /// that lets the misses of several simulated levels overlap; no effect on results.
    #[inline(always)]
    pub fn prefetch_set(&self, key: u64) {
        let b = self.set_base(key);
        let last = b + self.ways - 1;
        crate::gpu::prefetch(self.keys[b..].as_ptr().cast());
        crate::gpu::prefetch(self.keys[last..].as_ptr().cast());
        crate::gpu::prefetch(self.stamps[b..].as_ptr().cast());
        crate::gpu::prefetch(self.vals[b..].as_ptr().cast());
        crate::gpu::prefetch(self.vals[last..].as_ptr().cast());
    }

    /// Advance the clock; before it wraps, renumber every set's stamps 1..=ways in their current order.
    #[inline(always)]
    fn tick(&mut self) -> u32 {
        if self.clock == u32::MAX {
            self.renumber();
        }
        self.clock += 1;
        self.clock
    }

    #[cold]
    fn renumber(&mut self) {
        {
            for b in (0..self.keys.len()).step_by(self.ways) {
                let mut order: Vec<usize> = (b..b + self.ways).collect();
                order.sort_by_key(|&i| self.stamps[i]);
                for (rank, i) in order.into_iter().enumerate() {
                    if self.stamps[i] != 0 {
                        self.stamps[i] = rank as u32 + 1;
                    }
                }
            }
            self.clock = self.ways as u32 + 1;
        }
    }

    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        let b = self.set_base(key);
        let keys = &self.keys[b..b + self.ways];
        if self.ways > HINT_MIN_WAYS {
            if self.present[self.hint(key)] == 0 {
                return None;
            }
            return find_wide(keys, key).map(|w| b + w);
        }
        keys.iter().position(|&k| k == key).map(|w| b + w)
    }

    /// Look `key` up; a hit refreshes its recency (under LRU).
    #[inline]
    pub fn lookup(&mut self, key: u64) -> Option<&mut V> {
        let i = if self.hints.is_empty() {
            self.find(key)?
        } else {
            let h = self.hint(key);
            match self.hints[h] as usize {
                i if self.keys[i] == key => i,
                _ => {
                    let i = self.find(key)?;
                    self.hints[h] = i as u32;
                    i
                }
            }
        };
        if self.policy == Replacement::Lru {
            self.stamps[i] = self.tick();
        }
        Some(&mut self.vals[i])
    }

    /// Look `key` up without touching replacement state.
    pub fn probe(&self, key: u64) -> Option<&V> {
        self.find(key).map(|i| &self.vals[i])
    }

    /// None if `key` is present; else the least `f(slot index, value)` over the slots of
    /// its set (an empty slot's value counts as `V::default()`). No state changes.
    pub fn absent_min(&self, key: u64, f: impl Fn(usize, &V) -> u64) -> Option<u64> {
        let b = self.set_base(key);
        let mut min = u64::MAX;
        for w in b..b + self.ways {
            if self.keys[w] == key {
                return None;
            }
            min = min.min(if self.keys[w] == INVALID { f(w, &V::default()) } else { f(w, &self.vals[w]) });
        }
        Some(min)
    }

    /// Insert or overwrite `key`; returns the evicted `(key, value)` if a valid slot was replaced.
    pub fn insert(&mut self, key: u64, v: V) -> Option<(u64, V)> {
        debug_assert_ne!(key, INVALID);
        let now = self.tick();
        match self.find_or_victim(key) {
            Ok(i) => {
                self.vals[i] = v;
                if self.policy == Replacement::Lru {
                    self.stamps[i] = now;
                }
                None
            }
            Err(victim) => self.put(victim, key, v, now),
        }
    }

    /// Insert `key` unless it is present (then nothing changes); true if inserted.
    #[inline]
    pub fn insert_if_absent(&mut self, key: u64, v: V) -> bool {
        // The victim found before `tick` is the one after it: a renumbering keeps each set's order.
        let Err(victim) = self.find_or_victim(key) else { return false };
        let now = self.tick();
        self.put(victim, key, v, now);
        true
    }

    /// The slot holding `key`, or the slot a fill of it takes (its set's empty or oldest):
    /// one pass over a narrow set instead of a search and then a victim scan (ATS prefetches
    /// insert 7 translations per walk, each once searched and once scanned). Wide sets keep
    /// the hint table's quick miss, then scan for the victim.
    #[inline]
    fn find_or_victim(&self, key: u64) -> Result<usize, usize> {
        let b = self.set_base(key);
        if self.ways > HINT_MIN_WAYS {
            return self.find(key).ok_or_else(|| self.victim(b));
        }
        match scan(&self.keys[b..b + self.ways], &self.stamps[b..b + self.ways], key) {
            (usize::MAX, victim) => Err(b + victim),
            (hit, _) => Ok(b + hit),
        }
    }

    /// Insert `key`, known to be absent (e.g. right after a failed lookup): skips the search.
    #[inline]
    pub fn insert_absent(&mut self, key: u64, v: V) -> Option<(u64, V)> {
        debug_assert!(self.find(key).is_none());
        let now = self.tick();
        self.place(key, v, now)
    }

    /// The empty or oldest slot of the set starting at `b`.
    #[inline]
    fn victim(&self, b: usize) -> usize {
        if self.ways > HINT_MIN_WAYS {
            return b + oldest_wide(&self.stamps[b..b + self.ways]);
        }
        let stamps = &self.stamps[b..b + self.ways];
        match self.ways {
            4 => return b + oldest_fixed::<4>(stamps.try_into().expect("4 ways")),
            8 => return b + oldest_fixed::<8>(stamps.try_into().expect("8 ways")),
            16 => return b + oldest_fixed::<16>(stamps.try_into().expect("16 ways")),
            _ => {}
        }
        // Selects, not jumps: the stamps of a set are in random order, so a
        // branch on each comparison would be mispredicted half the time.
        let (mut oldest, mut victim) = (u32::MAX, 0);
        for (w, &st) in self.stamps[b..b + self.ways].iter().enumerate() {
            let older = st < oldest;
            oldest = if older { st } else { oldest };
            victim = if older { w } else { victim };
        }
        b + victim
    }

    /// Put `key` in the empty or oldest slot of its set (LRU: stamps refreshed on hits; FIFO: set on insert only).
    #[inline]
    fn place(&mut self, key: u64, v: V, now: u32) -> Option<(u64, V)> {
        let i = self.victim(self.set_base(key));
        self.put(i, key, v, now)
    }

    #[inline]
    fn put(&mut self, i: usize, key: u64, v: V, now: u32) -> Option<(u64, V)> {
        let old = (self.keys[i] != INVALID).then(|| (self.keys[i], self.vals[i]));
        if !self.hints.is_empty() {
            if let Some((k, _)) = old {
                let hk = self.hint(k);
                self.present[hk] -= 1;
            }
            let h = self.hint(key);
            self.hints[h] = i as u32;
            self.present[h] += 1;
        }
        self.keys[i] = key;
        self.vals[i] = v;
        self.stamps[i] = now;
        old
    }

    /// One search for `key` that also picks the slot a fill would take: a hit
    /// (recency refreshed) or, on a miss, the [`Slot`] to pass to [`Self::fill_slot`].
    /// Saves the second set search of a lookup followed by a fill.
    #[inline]
    pub fn lookup_or_slot(&mut self, key: u64) -> Result<&mut V, Slot> {
        let b = self.set_base(key);
        let (keys, stamps) = (&self.keys[b..b + self.ways], &self.stamps[b..b + self.ways]);
        let (hit, victim) = scan(keys, stamps, key);
        if hit == usize::MAX {
            return Err(Slot(b + victim));
        }
        let i = b + hit;
        if self.policy == Replacement::Lru {
            self.stamps[i] = self.tick();
        }
        Ok(&mut self.vals[i])
    }

    /// Insert `key` (absent) into the slot a failed [`Self::lookup_or_slot`] returned;
    /// nothing may have changed the set in between. Returns the evicted `(key, value)`.
    #[inline]
    pub fn fill_slot(&mut self, slot: Slot, key: u64, v: V) -> Option<(u64, V)> {
        debug_assert!(self.find(key).is_none());
        debug_assert_eq!(slot.0, self.victim(self.set_base(key)));
        let now = self.tick();
        self.put(slot.0, key, v, now)
    }

    /// Remove `key`; true if it was present.
    pub fn invalidate(&mut self, key: u64) -> bool {
        match self.find(key) {
            Some(i) => {
                if !self.present.is_empty() {
                    let h = self.hint(key);
                    self.present[h] -= 1;
                }
                self.keys[i] = INVALID;
                self.stamps[i] = 0;
                true
            }
            None => false,
        }
    }

    /// Remove every key for which `pred` holds (e.g. a virtual-address range); returns how many.
    pub fn invalidate_where(&mut self, mut pred: impl FnMut(u64) -> bool) -> usize {
        let mut n = 0;
        let (shift, present) = (self.hint_shift, &mut self.present);
        for (k, st) in self.keys.iter_mut().zip(self.stamps.iter_mut()) {
            if *k != INVALID && pred(*k) {
                if !present.is_empty() {
                    present[(k.wrapping_mul(HINT_MUL) >> shift) as usize] -= 1;
                }
                *k = INVALID;
                *st = 0;
                n += 1;
            }
        }
        n
    }

    /// Remove everything.
    pub fn flush(&mut self) {
        self.keys.fill(INVALID);
        self.stamps.fill(0);
        self.present.fill(0);
    }

    /// The keys held, in slot order.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.keys.iter().copied().filter(|&k| k != INVALID)
    }

    /// Number of valid slots.
    pub fn occupancy(&self) -> usize {
        self.keys.iter().filter(|&&k| k != INVALID).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn set_of(key: u64, sets: usize) -> usize {
        if sets.is_power_of_two() {
            (key % sets as u64) as usize
        } else {
            (((key ^ (key >> 32)) & 0xFFFF_FFFF) % sets as u64) as usize
        }
    }

    #[test]
    fn absent_min_is_the_least_over_the_keys_set_or_none_when_present() {
        // 2 sets of 2 ways: even keys in set 0, odd keys in set 1.
        let mut a: SetAssoc<u64> = SetAssoc::new(4, 2, Replacement::Lru);
        // An empty set: its slots count as the default value 0.
        assert_eq!(a.absent_min(4, |_, &v| v), Some(0));
        a.insert(2, 70);
        assert_eq!(a.absent_min(4, |_, &v| v), Some(0), "one slot still empty");
        a.insert(6, 30);
        assert_eq!(a.absent_min(4, |_, &v| v), Some(30));
        assert_eq!(a.absent_min(2, |_, &v| v), None, "present");
        // An invalidated slot counts as empty (0), not as the value it held (30).
        a.invalidate(6);
        assert_eq!(a.absent_min(4, |_, &v| v), Some(0));
        // Set 1 is unaffected by set 0's values.
        assert_eq!(a.absent_min(5, |_, &v| v + 1), Some(1));
    }

    /// Naive reference: one recency list per set, most recent at the back.
    struct Reference {
        sets: Vec<VecDeque<u64>>,
        ways: usize,
        lru: bool,
    }
    impl Reference {
        fn access(&mut self, key: u64) -> bool {
            let n = self.sets.len();
            let set = &mut self.sets[set_of(key, n)];
            if let Some(p) = set.iter().position(|&k| k == key) {
                if self.lru {
                    let k = set.remove(p).unwrap();
                    set.push_back(k);
                }
                return true;
            }
            if set.len() == self.ways {
                set.pop_front();
            }
            set.push_back(key);
            false
        }
    }

    impl Reference {
        /// Insert `key` if absent (evicting the set's front when full); a present key keeps its place.
        fn insert_if_absent(&mut self, key: u64) -> bool {
            let n = self.sets.len();
            if self.sets[set_of(key, n)].contains(&key) {
                return false;
            }
            !self.access(key)
        }

        fn invalidate(&mut self, key: u64) -> bool {
            let n = self.sets.len();
            let set = &mut self.sets[set_of(key, n)];
            set.iter().position(|&k| k == key).map(|p| set.remove(p)).is_some()
        }
    }

    /// Drive the array and the reference with the same accesses: a key is
    /// looked up and filled on a miss, by `lookup` + `insert` or by
    /// `lookup_or_slot` + `fill_slot` (the data caches' path), or inserted
    /// without a lookup by `insert` (a present key refreshed as by a hit) or
    /// `insert_if_absent` (a present key left as it is: prefetched translations),
    /// in turn; keys ≥ 2^50 invalidate key - 2^50 instead.
    fn check(entries: usize, ways: usize, policy: Replacement, keys: &[u64]) -> Result<(), TestCaseError> {
        let mut a: SetAssoc<u64> = SetAssoc::new(entries, ways, policy);
        let mut r = Reference { sets: vec![VecDeque::new(); entries / ways], ways, lru: policy == Replacement::Lru };
        for (n, &k) in keys.iter().enumerate() {
            if k >= 1 << 50 {
                let k = k - (1 << 50);
                prop_assert_eq!(a.invalidate(k), r.invalidate(k), "invalidate {}", k);
                continue;
            }
            match n % 4 {
                2 => {
                    let inserted = a.insert_if_absent(k, k * 3);
                    prop_assert_eq!(inserted, r.insert_if_absent(k), "insert_if_absent {}", k);
                }
                3 => {
                    let present = a.probe(k).is_some();
                    a.insert(k, k * 3);
                    prop_assert_eq!(present, r.access(k), "insert {}", k);
                }
                m => {
                    let hit = if m == 0 {
                        let hit = a.lookup(k).is_some();
                        if !hit {
                            a.insert(k, k * 3);
                        }
                        hit
                    } else {
                        match a.lookup_or_slot(k) {
                            Ok(_) => true,
                            Err(slot) => {
                                a.fill_slot(slot, k, k * 3);
                                false
                            }
                        }
                    };
                    prop_assert_eq!(hit, r.access(k), "key {}", k);
                }
            }
            prop_assert_eq!(*a.probe(k).unwrap(), k * 3);
        }
        Ok(())
    }

    fn keys(range: u64) -> impl Strategy<Value = Vec<u64>> {
        proptest::collection::vec(
            prop_oneof![
                8 => 0u64..range,
                8 => (1u64 << 40)..(1u64 << 40) + range,
                1 => (1u64 << 50)..(1u64 << 50) + range,
            ],
            0..600,
        )
    }

    proptest! {
        // (128, 128) and (64, 32) are wider than HINT_MIN_WAYS: they exercise the hint table.
        #[test]
        fn lru_matches_reference(keys in keys(64),
                                 geo in prop_oneof![Just((16usize, 16usize)), Just((32, 4)), Just((12, 3)), Just((8, 1)), Just((64, 8)),
                                                    Just((128, 128)), Just((64, 32)), Just((96, 24))]) {
            check(geo.0, geo.1, Replacement::Lru, &keys)?;
        }
        #[test]
        fn fifo_matches_reference(keys in keys(40),
                                  geo in prop_oneof![Just((16usize, 16usize)), Just((32, 4)), Just((6, 2)), Just((64, 32))]) {
            check(geo.0, geo.1, Replacement::Fifo, &keys)?;
        }
        #[test]
        fn wide_lru_with_many_keys_matches_reference(keys in keys(400)) {
            check(256, 128, Replacement::Lru, &keys)?;
        }
    }

    proptest! {
        /// The chunked wide-set scans agree with one-by-one searches, at widths around
        /// the chunk size (remainders included), with few distinct stamps (ties: the first wins).
        #[test]
        fn wide_scans_match_naive_search(
            keys in proptest::collection::hash_set(0u64..1000, 1..140),
            probe in 0u64..1000,
            stamps in proptest::collection::vec(0u32..6, 1..140),
        ) {
            let keys: Vec<u64> = keys.into_iter().collect();
            prop_assert_eq!(find_wide(&keys, probe), keys.iter().position(|&k| k == probe));
            for &k in &keys {
                prop_assert_eq!(find_wide(&keys, k), keys.iter().position(|&x| x == k));
            }
            let min = *stamps.iter().min().unwrap();
            prop_assert_eq!(oldest_wide(&stamps), stamps.iter().position(|&s| s == min).unwrap());
        }

        /// The vector scans of 4-, 8- and 16-way sets agree with the select loop: the way holding
        /// the key (or none), and the first of the smallest stamps (few distinct stamps: ties,
        /// and 0 for empty ways; large ones: the unsigned minimum).
        #[test]
        fn fixed_scans_match_the_select_loop(
            keys in proptest::collection::hash_set(0u64..40, 16),
            probe in 0u64..48,
            stamps in proptest::collection::vec(prop_oneof![0u32..4, (u32::MAX - 4)..u32::MAX], 16),
        ) {
            let keys: Vec<u64> = keys.into_iter().collect();
            for w in [4, 8, 16] {
                let (k, s) = (&keys[..w], &stamps[..w]);
                let fixed = match w {
                    4 => scan_fixed::<4>(k, s, probe),
                    8 => scan_fixed::<8>(k, s, probe),
                    _ => scan_fixed::<16>(k, s, probe),
                };
                prop_assert_eq!(fixed, scan_any(k, s, probe), "{} ways", w);
                for &key in k {
                    let hit = match w {
                        4 => scan_fixed::<4>(k, s, key).0,
                        8 => scan_fixed::<8>(k, s, key).0,
                        _ => scan_fixed::<16>(k, s, key).0,
                    };
                    prop_assert_eq!(hit, scan_any(k, s, key).0);
                }
            }
        }
    }

    proptest! {
        /// The per-hash key counts of wide sets stay exact through fills, evictions,
        /// invalidations (one key, a range) and flushes: recounted after every step,
        /// and every key the array holds is found (a count of 0 would hide it).
        #[test]
        fn wide_set_key_counts_stay_exact(
            ops in proptest::collection::vec((0u8..8, 0u64..300), 1..400),
            geo in prop_oneof![Just((128usize, 128usize)), Just((64, 32)), Just((96, 24))],
        ) {
            let mut a: SetAssoc<u64> = SetAssoc::new(geo.0, geo.1, Replacement::Lru);
            for &(op, k) in &ops {
                match op {
                    0..=3 => { a.insert(k, k); }
                    4 => { a.lookup(k); }
                    5 => { a.invalidate(k); }
                    6 => { a.invalidate_where(|x| x / 16 == k / 16); }
                    _ => if k % 50 == 0 { a.flush() } else { a.insert_if_absent(k, k); },
                }
                let mut want = vec![0u32; a.present.len()];
                for &x in a.keys.iter().filter(|&&x| x != INVALID) {
                    want[a.hint(x)] += 1;
                }
                prop_assert_eq!(&a.present, &want);
                for &x in a.keys.iter().filter(|&&x| x != INVALID) {
                    prop_assert_eq!(a.probe(x), Some(&x));
                }
            }
        }
    }

    #[test]
    fn wide_scans_hand_case() {
        // 40 ways: two chunks of 16 and a remainder of 8.
        let mut stamps = vec![9u32; 40];
        (stamps[37], stamps[20], stamps[5]) = (3, 2, 2);
        assert_eq!(oldest_wide(&stamps), 5);
        stamps[5] = 4;
        assert_eq!(oldest_wide(&stamps), 20);
        stamps[20] = 5;
        assert_eq!(oldest_wide(&stamps), 37);
        let keys: Vec<u64> = (100..140).collect();
        assert_eq!(
            (find_wide(&keys, 100), find_wide(&keys, 117), find_wide(&keys, 139), find_wide(&keys, 140)),
            (Some(0), Some(17), Some(39), None)
        );
    }

    #[test]
    fn lru_hand_case() {
        // 2-way, one set: A B A C -> C evicts B (A was refreshed).
        let mut a: SetAssoc<u8> = SetAssoc::new(2, 2, Replacement::Lru);
        a.insert(1, 0);
        a.insert(2, 0);
        assert!(a.lookup(1).is_some());
        assert_eq!(a.insert(3, 0), Some((2, 0)));
        assert!(a.probe(1).is_some() && a.probe(3).is_some() && a.probe(2).is_none());
    }

    #[test]
    fn overwriting_a_key_refreshes_it_and_replaces_its_value() {
        // One set of 2 ways (LRU): 1, 2, then 1 again (an overwrite) -> 2 is the least recently used.
        let mut a: SetAssoc<u8> = SetAssoc::new(2, 2, Replacement::Lru);
        a.insert(1, 10);
        a.insert(2, 20);
        assert_eq!(a.insert(1, 11), None);
        assert_eq!(a.probe(1), Some(&11));
        assert_eq!(a.insert(3, 30), Some((2, 20)));
    }

    #[test]
    fn a_range_invalidation_frees_its_slots_for_the_next_fills() {
        // One set of 2 ways: 1 (older), 2 (newer). Dropping 2 empties its way (stamp 0, older than
        // any key), so 3 takes it and 1 stays.
        let mut a: SetAssoc<u8> = SetAssoc::new(2, 2, Replacement::Lru);
        a.insert(1, 0);
        a.insert(2, 0);
        assert_eq!(a.invalidate_where(|k| k == 2), 1);
        assert_eq!(a.insert(3, 0), None);
        assert!(a.probe(1).is_some());
    }

    #[test]
    fn stamps_renumber_before_wrapping_and_keep_lru_order() {
        let mut a: SetAssoc<u8> = SetAssoc::new(4, 4, Replacement::Lru);
        for k in 1..=4 {
            a.insert(k, 0);
        }
        a.clock = u32::MAX - 1;
        assert!(a.lookup(1).is_some()); // stamp u32::MAX; order now 2 3 4 1
        assert!(a.lookup(2).is_some()); // the clock would wrap: renumbered, order 3 4 1 2
        assert!(a.clock < 100);
        assert_eq!(a.insert(5, 0), Some((3, 0)));
        assert_eq!(a.insert(6, 0), Some((4, 0)));
    }

    #[test]
    fn control_protocol() {
        let mut a: SetAssoc<u8> = SetAssoc::new(16, 4, Replacement::Lru);
        for k in 0..16 {
            a.insert(k, 1);
        }
        assert_eq!(a.occupancy(), 16);
        assert!(a.invalidate(5));
        assert!(!a.invalidate(5));
        assert_eq!(a.invalidate_where(|k| (8..12).contains(&k)), 4);
        assert_eq!(a.occupancy(), 11);
        assert!(a.lookup(9).is_none());
        a.flush();
        assert_eq!(a.occupancy(), 0);
    }
}
