//! The coalescer: the lanes of one warp memory instruction become the
//! distinct cache lines they touch, in ascending order (so lines of one page
//! are adjacent and each page is translated once).

use crate::workload::{Lanes, MAX_LANES};

/// The widest access a generator makes (xsbench reads a 48-byte grid point and its neighbour).
pub const MAX_ACCESS_BYTES: u32 = 96;

/// At most four lines per lane: a 96-byte access on the smallest (32-byte) lines
/// touches up to four of them.
pub const MAX_LINES: usize = 4 * MAX_LANES;

#[derive(Debug, Clone)]
pub struct Lines {
    pub line: [u64; MAX_LINES],
    pub n: usize,
}

impl Default for Lines {
    fn default() -> Self {
        Lines { line: [0; MAX_LINES], n: 0 }
    }
}

/// Fill `out` with the sorted distinct line numbers (address >> `shift`) of an access.
#[inline]
pub fn coalesce(lanes: Lanes, bytes: u32, scratch: &[u64; MAX_LANES], shift: u32, out: &mut Lines) {
    debug_assert!(bytes <= MAX_ACCESS_BYTES && shift >= 5, "{bytes}-byte access on {}-byte lines", 1u64 << shift);
    let span = bytes.max(1) as u64 - 1;
    // The count is kept in a local and stored once: stored through `out` at every line, it was
    // reloaded after every write to `out.line` (the same object).
    let line = &mut out.line;
    let mut n = 0;
    match lanes {
        Lanes::Strided { n: 0, .. } | Lanes::Explicit { n: 0 } => {}
        Lanes::Strided { base, stride, n: lanes } => {
            let last = base + (lanes as u64 - 1) * stride + span;
            if stride <= 1u64 << shift {
                // Lanes no further apart than a line cover every line in between.
                for l in base >> shift..=last >> shift {
                    line[n] = l;
                    n += 1;
                }
            } else {
                let mut prev = NONE;
                for i in 0..lanes as u64 {
                    let a = base + i * stride;
                    (n, prev) = push_access(line, n, prev, a >> shift, (a + span) >> shift);
                }
            }
        }
        Lanes::Explicit { n: lanes } => {
            let lanes = &scratch[..lanes as usize];
            let a = lanes[0];
            let mut prev;
            (n, prev) = push_access(line, n, NONE, a >> shift, (a + span) >> shift);
            let mut ascending = true;
            for &a in &lanes[1..] {
                let (first, last) = (a >> shift, (a + span) >> shift);
                ascending &= first >= prev;
                (n, prev) = push_access(line, n, prev, first, last);
            }
            // Ascending lines are already distinct: `push_access` dropped each repeat of the last.
            if !ascending {
                // The span of the lines, from the lanes (the lines written hold repeats).
                let (lo, hi) = lanes.iter().fold((u64::MAX, 0), |(lo, hi), &a| (lo.min(a), hi.max(a)));
                let (lo, hi) = (lo >> shift, (hi + span) >> shift);
                n = if hi - lo < 64 {
                    // Clustered lanes (table lookups, gathers within a few KiB): a bit per line of
                    // the span sorts and de-duplicates in one pass, where sorting was half of such runs.
                    let mut mask = 0u64;
                    for &l in &line[..n] {
                        mask |= 1 << (l - lo);
                    }
                    emit(line, 0, lo, mask)
                } else if hi - lo < MASK_LINES {
                    let mut mask = [0u64; (MASK_LINES / 64) as usize];
                    for &l in &line[..n] {
                        let b = l - lo;
                        mask[(b >> 6) as usize] |= 1 << (b & 63);
                    }
                    mask.iter().enumerate().fold(0, |n, (w, &m)| emit(line, n, lo + 64 * w as u64, m))
                } else {
                    let s = &mut line[..n];
                    s.sort_unstable();
                    let mut w = 0;
                    for r in 0..s.len() {
                        if r == 0 || s[r] != s[w - 1] {
                            s[w] = s[r];
                            w += 1;
                        }
                    }
                    w
                };
            }
        }
    }
    out.n = n;
}

/// Lines an explicit access may span and still be sorted by a bit mask instead of a sort.
const MASK_LINES: u64 = 256;

/// Write the lines `base + b` for the set bits `b` of `mask`, ascending, from index `n`; the new count.
#[inline]
fn emit(line: &mut [u64; MAX_LINES], mut n: usize, base: u64, mut mask: u64) -> usize {
    while mask != 0 {
        line[n] = base + mask.trailing_zeros() as u64;
        n += 1;
        mask &= mask - 1;
    }
    n
}

/// No line appended yet (no line number is this large: addresses are shifted right by at least 5).
const NONE: u64 = u64::MAX;

/// Append the lines `first..=last` of one access at index `n`, the first unless it repeats
/// `prev`, the last line appended (the others follow it, so they cannot); the new count and
/// last line. The last line is passed in a register rather than read back from `line`, which
/// waited for the store just made (the unconditional write is at most at index 4 x the lanes before
/// this one, inside MAX_LINES); and written without an inclusive range, whose iterator LLVM
/// compiles to a loop with an extra exit flag: this is the per-lane step of every explicit-lane
/// instruction.
#[inline]
fn push_access(line: &mut [u64; MAX_LINES], mut n: usize, prev: u64, first: u64, last: u64) -> (usize, u64) {
    // Written unconditionally and counted only if new: lanes of table lookups repeat the previous
    // line at random, and the branch mispredicted about half the time.
    line[n] = first;
    n += (first != prev) as usize;
    let mut l = first;
    while l < last {
        l += 1;
        line[n] = l;
        n += 1;
    }
    (n, last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(addrs: &[u64], bytes: u32, shift: u32) -> Vec<u64> {
        let mut v: Vec<u64> = addrs.iter().flat_map(|&a| (a >> shift)..=((a + bytes as u64 - 1) >> shift)).collect();
        v.sort();
        v.dedup();
        v
    }

    #[test]
    fn widest_scattered_access_fits() {
        // 64 lanes, each a 96-byte access straddling four 32-byte lines, none shared.
        let mut s = [0u64; MAX_LANES];
        for (i, a) in s.iter_mut().enumerate() {
            *a = (i as u64) * 4096 + 31;
        }
        let mut o = Lines::default();
        coalesce(Lanes::Explicit { n: 64 }, MAX_ACCESS_BYTES, &s, 5, &mut o);
        assert_eq!(o.n, 256);
        assert_eq!(&o.line[..o.n], &reference(&s, MAX_ACCESS_BYTES, 5)[..]);
    }

    #[test]
    fn hand_cases() {
        let s = [0u64; MAX_LANES];
        let mut o = Lines::default();
        // 32 lanes x 4 B contiguous, aligned: one 128 B line.
        coalesce(Lanes::Strided { base: 1 << 20, stride: 4, n: 32 }, 4, &s, 7, &mut o);
        assert_eq!(&o.line[..o.n], &[(1 << 20) >> 7]);
        // 32 lanes x 8 B: two lines.
        coalesce(Lanes::Strided { base: 0, stride: 8, n: 32 }, 8, &s, 7, &mut o);
        assert_eq!(o.n, 2);
        // Page-strided lanes: one line each.
        coalesce(Lanes::Strided { base: 0, stride: 4096, n: 32 }, 4, &s, 7, &mut o);
        assert_eq!(o.n, 32);
    }

    proptest! {
        #[test]
        fn matches_reference(base in 0u64..1 << 30, stride in 0u64..600, n in 0u32..=64, bytes in prop_oneof![Just(1u32), Just(4), Just(8), Just(16)],
                             explicit in proptest::collection::vec(0u64..1 << 16, 0..=64)) {
            let mut o = Lines::default();
            let s = [0u64; MAX_LANES];
            coalesce(Lanes::Strided { base, stride, n }, bytes, &s, 7, &mut o);
            let addrs: Vec<u64> = (0..n as u64).map(|i| base + i * stride).collect();
            prop_assert_eq!(&o.line[..o.n], &reference(&addrs, bytes, 7)[..]);
            let mut s2 = [0u64; MAX_LANES];
            s2[..explicit.len()].copy_from_slice(&explicit);
            coalesce(Lanes::Explicit { n: explicit.len() as u32 }, bytes, &s2, 7, &mut o);
            prop_assert_eq!(&o.line[..o.n], &reference(&explicit, bytes, 7)[..]);
        }

        /// Each of the explicit lanes' three paths (already ascending, a span under MASK_LINES
        /// lines, wider) against the reference, on 32-byte lines (the widest access crosses four).
        #[test]
        fn explicit_paths_match_reference(base in 0u64..1 << 40, width in prop_oneof![Just(1u64 << 10), Just(8 << 10), Just(1 << 20)],
                                          offs in proptest::collection::vec(0u64..1 << 20, 0..=64), sort in any::<bool>(),
                                          bytes in prop_oneof![Just(1u32), Just(4), Just(16), Just(MAX_ACCESS_BYTES)]) {
            let mut addrs: Vec<u64> = offs.iter().map(|&o| base + o % width).collect();
            if sort {
                addrs.sort_unstable();
            }
            let mut s = [0u64; MAX_LANES];
            s[..addrs.len()].copy_from_slice(&addrs);
            let mut o = Lines::default();
            coalesce(Lanes::Explicit { n: addrs.len() as u32 }, bytes, &s, 5, &mut o);
            prop_assert_eq!(&o.line[..o.n], &reference(&addrs, bytes, 5)[..]);
        }
    }

    #[test]
    fn explicit_hand_cases() {
        let mut s = [0u64; MAX_LANES];
        let mut o = Lines::default();
        // Ascending lanes, repeats of the last line dropped: 128-byte lines 0, 1, 3.
        s[..5].copy_from_slice(&[0, 64, 128, 200, 400]);
        coalesce(Lanes::Explicit { n: 5 }, 4, &s, 7, &mut o);
        assert_eq!(&o.line[..o.n], &[0, 1, 3]);
        // Unordered within 64 lines (one mask word): 5, 2, 5 -> 2, 5.
        s[..3].copy_from_slice(&[5 << 7, 2 << 7, 5 << 7]);
        coalesce(Lanes::Explicit { n: 3 }, 4, &s, 7, &mut o);
        assert_eq!(&o.line[..o.n], &[2, 5]);
        // Unordered within 256 lines (four mask words): 3, 0, 255, 3 -> 0, 3, 255.
        s[..4].copy_from_slice(&[3 << 7, 0, 255 << 7, (3 << 7) + 5]);
        coalesce(Lanes::Explicit { n: 4 }, 4, &s, 7, &mut o);
        assert_eq!(&o.line[..o.n], &[0, 3, 255]);
        // Unordered over 256 lines or more (the sort): 256, 0, 256 -> 0, 256.
        s[..3].copy_from_slice(&[256 << 7, 0, 256 << 7]);
        coalesce(Lanes::Explicit { n: 3 }, 4, &s, 7, &mut o);
        assert_eq!(&o.line[..o.n], &[0, 256]);
        // A 2-byte access straddling lines 1 and 2, then one back on line 1: lines 1, 2.
        s[..2].copy_from_slice(&[(2 << 7) - 1, 1 << 7]);
        coalesce(Lanes::Explicit { n: 2 }, 2, &s, 7, &mut o);
        assert_eq!(&o.line[..o.n], &[1, 2]);
    }
}
