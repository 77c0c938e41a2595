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
    out.n = 0;
    debug_assert!(bytes <= MAX_ACCESS_BYTES && shift >= 5, "{bytes}-byte access on {}-byte lines", 1u64 << shift);
    let span = bytes.max(1) as u64 - 1;
    match lanes {
        Lanes::Strided { n: 0, .. } | Lanes::Explicit { n: 0 } => {}
        Lanes::Strided { base, stride, n } => {
            let last = base + (n as u64 - 1) * stride + span;
            if stride <= 1u64 << shift {
                // Lanes no further apart than a line cover every line in between.
                for l in base >> shift..=last >> shift {
                    out.line[out.n] = l;
                    out.n += 1;
                }
            } else {
                for i in 0..n as u64 {
                    let a = base + i * stride;
                    push_access(out, a >> shift, (a + span) >> shift);
                }
            }
        }
        Lanes::Explicit { n } => {
            for &a in &scratch[..n as usize] {
                push_access(out, a >> shift, (a + span) >> shift);
            }
            let s = &mut out.line[..out.n];
            s.sort_unstable();
            let mut w = 0;
            for r in 0..s.len() {
                if r == 0 || s[r] != s[w - 1] {
                    s[w] = s[r];
                    w += 1;
                }
            }
            out.n = w;
        }
    }
}

/// Append the lines `first..=last` of one access, the first unless it repeats the last line
/// appended (the others follow it, so they cannot). Written without an inclusive range, whose
/// iterator LLVM compiles to a loop with an extra exit flag: this is the per-lane step of
/// every explicit-lane instruction.
#[inline]
fn push_access(out: &mut Lines, first: u64, last: u64) {
    if out.n == 0 || out.line[out.n - 1] != first {
        out.line[out.n] = first;
        out.n += 1;
    }
    let mut l = first;
    while l < last {
        l += 1;
        out.line[out.n] = l;
        out.n += 1;
    }
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
    }
}
