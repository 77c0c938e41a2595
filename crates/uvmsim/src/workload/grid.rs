//! The engine behind the element-wise generators (`strided`, `stencil2d`,
//! `stencil3d`, `hotspot`, `srad`, `pathfinder`, `backprop`, the vector
//! kernels of `minife`): a kernel is a grid of elements (x fastest, then y,
//! then z) and a fixed body of steps that every element runs. Thread `t`
//! handles elements `t, t + T, t + 2T, ...` (a grid-stride loop over `T`
//! threads), and runs the body `repeat` times per element; lane `l` of a warp
//! is the warp's first element plus `l`. A memory step names an array and how
//! the element's coordinates index it ([`Index`]); the engine computes each
//! lane's address and sends the instruction as `Strided` when the addresses
//! form an ascending progression (the common, coalesced case) and as
//! `Explicit` otherwise (clamped borders, row wraps). Kernels share their
//! arrays and body through `Arc`, so creating a warp does not copy them.

use super::{Lanes, MemKind, Op, WarpId, MAX_LANES};
use std::sync::Arc;

/// An array the body accesses: where it starts and its element size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Array {
    pub base: u64,
    pub elem_bytes: u32,
}

/// How an element's coordinates (x, y, z) select the element of an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// The element at (x+dx, y+dy, z+dz) clamped to the grid, in an array of the
    /// grid's shape (row-major: x fastest). Clamping is what Rodinia's stencils do at borders.
    At { dx: i32, dy: i32, dz: i32 },
    /// Element `c0 + cx*x + cy*(y / ydiv) + cz*z` of an array of any shape.
    Affine { c0: u64, cx: u64, cy: u64, ydiv: u64, cz: u64 },
    /// The element at (x/div, y/div, z/div) of an array of the coarser shape
    /// (ceil(nx/div), ceil(ny/div), ceil(nz/div)): piecewise-constant
    /// interpolation from a coarse grid (`hpgmg`).
    Coarse { div: u64 },
}

impl Index {
    /// The element itself.
    pub const HERE: Index = Index::At { dx: 0, dy: 0, dz: 0 };

    pub const fn at(dx: i32, dy: i32, dz: i32) -> Index {
        Index::At { dx, dy, dz }
    }

    /// `c0 + cx*x + cy*y`.
    pub const fn affine(c0: u64, cx: u64, cy: u64) -> Index {
        Index::Affine { c0, cx, cy, ydiv: 1, cz: 0 }
    }
}

/// One step of the per-element body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Access `arrays[array]` at `at`, `elem_bytes` per lane.
    Mem {
        kind: MemKind,
        array: u8,
        at: Index,
    },
    Wait,
    Compute(u32),
    /// `__syncthreads()`: the warp meets its CTA's other warps (`Op::Barrier`).
    Barrier,
}

impl Step {
    pub const fn load(array: u8, at: Index) -> Step {
        Step::Mem { kind: MemKind::Load, array, at }
    }
    pub const fn store(array: u8, at: Index) -> Step {
        Step::Mem { kind: MemKind::Store, array, at }
    }
}

/// The work between a kernel's staging loads and its stores when the kernel meets at
/// `barriers` CTA barriers (its `__syncthreads()`): with `insts` > 0, `insts` issue slots
/// of which the barriers take `barriers` (they were counted among the instructions), each
/// barrier followed by an even share of the rest (the first shares take the remainder);
/// with `insts` = 0, a barrier, `latency` cycles that take no issue slot, then the other
/// barriers. Either way the first barrier comes first: a CTA's warps meet once their
/// loads have landed in shared memory, so one warp's far fault holds the CTA there.
pub fn staged(insts: u32, latency: u32, barriers: u32) -> Vec<Step> {
    if barriers == 0 {
        return match insts {
            0 => vec![Step::Compute(latency)],
            n => vec![Step::Compute(1); n as usize],
        };
    }
    if insts == 0 {
        let mut body = vec![Step::Barrier, Step::Compute(latency)];
        body.extend((1..barriers).map(|_| Step::Barrier));
        return body;
    }
    let rest = insts.saturating_sub(barriers);
    let (share, extra) = (rest / barriers, rest % barriers);
    let mut body = Vec::with_capacity((barriers + rest) as usize);
    for b in 0..barriers {
        body.push(Step::Barrier);
        body.extend((0..share + u32::from(b < extra)).map(|_| Step::Compute(1)));
    }
    body
}

/// One element-wise kernel launch.
#[derive(Debug, Clone)]
pub struct GridKernel {
    arrays: Arc<[Array]>,
    body: Arc<[Step]>,
    dims: [u64; 3],
    /// Threads of the grid-stride loop.
    threads: u64,
    repeat: u32,
}

impl GridKernel {
    /// A kernel over a `dims` grid run by `threads` threads (capped at the element count).
    pub fn new(dims: [u64; 3], threads: u64, repeat: u32, arrays: Vec<Array>, body: Vec<Step>) -> GridKernel {
        debug_assert!(!body.is_empty() && repeat > 0 && dims.iter().all(|&d| d > 0));
        debug_assert!(body.iter().all(|s| !matches!(s, Step::Mem { array, .. } if *array as usize >= arrays.len())));
        let threads = threads.min(dims.iter().product()).max(1);
        GridKernel { arrays: arrays.into(), body: body.into(), dims, threads, repeat }
    }

    /// Threads the launch needs.
    pub fn threads(&self) -> u64 {
        self.threads
    }

    pub fn warp(&self, id: WarpId) -> GridWarp {
        GridWarp { k: self.clone(), e0: id.first_thread, lanes: id.lanes, step: 0, rep: 0 }
    }

    fn elements(&self) -> u64 {
        self.dims[0] * self.dims[1] * self.dims[2]
    }

    /// (x, y, z) of element `e`.
    #[inline]
    fn coords(&self, e: u64) -> [u64; 3] {
        let [nx, ny, _] = self.dims;
        let (x, r) = (e % nx, e / nx);
        [x, r % ny, r / ny]
    }

    /// Lanes of `n` elements from `e0`, each lane's address computed into `scratch`.
    fn lane_addrs(&self, a: Array, at: Index, e0: u64, n: u64, scratch: &mut [u64; MAX_LANES]) -> Lanes {
        let [nx, ny, _] = self.dims;
        let [mut x, mut y, mut z] = self.coords(e0);
        let eb = a.elem_bytes as u64;
        // Along a row an affine index grows by cx a lane: its full index (a division by ydiv) is
        // worked out only where a row starts (warps spanning short rows: bitonic sort's small
        // partner distances); the other kinds clamp or divide per lane.
        let along_row = if let Index::Affine { cx, .. } = at { Some(cx * eb) } else { None };
        let mut addr = a.base + self.index(at, x, y, z) * eb;
        for slot in scratch.iter_mut().take(n as usize) {
            *slot = addr;
            x += 1;
            if x == nx {
                x = 0;
                y += 1;
                if y == ny {
                    y = 0;
                    z += 1;
                }
            }
            addr = match along_row {
                Some(step) if x != 0 => addr.wrapping_add(step),
                _ => a.base + self.index(at, x, y, z) * eb,
            };
        }
        compact(scratch, n as usize)
    }

    /// The lanes of `n` elements from `e0` when they lie in one row and `at` maps them,
    /// unclamped, to an ascending progression (most instructions): what `compact` would make
    /// of the lane addresses, without computing them. None: the general path decides.
    #[inline]
    fn row_lanes(&self, a: Array, at: Index, e0: u64, n: u64) -> Option<Lanes> {
        let [x, y, z] = self.coords(e0);
        if x + n > self.dims[0] {
            return None;
        }
        let step = match at {
            // Lane i reads x + i + dx: no lane clamps if the first and last are inside the row.
            Index::At { dx, .. } => {
                let lo = x as i64 + dx as i64;
                if lo < 0 || lo + n as i64 > self.dims[0] as i64 {
                    return None;
                }
                1
            }
            Index::Affine { cx, .. } => cx,
            Index::Coarse { .. } => return None,
        };
        let eb = a.elem_bytes as u64;
        let stride = if n >= 2 { step * eb } else { 0 };
        Some(Lanes::Strided { base: a.base + self.index(at, x, y, z) * eb, stride, n: n as u32 })
    }

    /// Element index of `at` for the element at (x, y, z).
    #[inline]
    fn index(&self, at: Index, x: u64, y: u64, z: u64) -> u64 {
        let [nx, ny, nz] = self.dims;
        match at {
            Index::At { dx, dy, dz } => {
                let c = |v: u64, d: i32, n: u64| (v as i64 + d as i64).clamp(0, n as i64 - 1) as u64;
                c(x, dx, nx) + nx * (c(y, dy, ny) + ny * c(z, dz, nz))
            }
            Index::Affine { c0, cx, cy, ydiv, cz } => c0 + cx * x + cy * (y / ydiv) + cz * z,
            Index::Coarse { div } => {
                let (cx, cy) = (nx.div_ceil(div), ny.div_ceil(div));
                x / div + cx * (y / div + cy * (z / div))
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct GridWarp {
    k: GridKernel,
    /// Element of lane 0 in the current round.
    e0: u64,
    lanes: u32,
    step: u32,
    rep: u32,
}

impl GridWarp {
    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let total = self.k.elements();
        loop {
            if self.e0 >= total {
                return Op::Exit;
            }
            let Some(&s) = self.k.body.get(self.step as usize) else {
                self.step = 0;
                self.rep += 1;
                if self.rep == self.k.repeat {
                    self.rep = 0;
                    self.e0 += self.k.threads;
                }
                continue;
            };
            self.step += 1;
            return match s {
                Step::Wait => Op::Wait,
                Step::Barrier => Op::Barrier,
                Step::Compute(c) => Op::Compute(c),
                Step::Mem { kind, array, at } => {
                    let a = self.k.arrays[array as usize];
                    let n = (total - self.e0).min(self.lanes as u64);
                    let lanes = self.k.row_lanes(a, at, self.e0, n).unwrap_or_else(|| self.k.lane_addrs(a, at, self.e0, n, scratch));
                    Op::Mem { kind, lanes, bytes: a.elem_bytes }
                }
            };
        }
    }
}

/// `Strided` if the first `n` scratch addresses form an ascending progression, else `Explicit`.
pub(super) fn compact(scratch: &[u64; MAX_LANES], n: usize) -> Lanes {
    let s = &scratch[..n];
    if n >= 2 && s[1] >= s[0] {
        let d = s[1] - s[0];
        if s.windows(2).all(|w| w[1] >= w[0] && w[1] - w[0] == d) {
            return Lanes::Strided { base: s[0], stride: d, n: n as u32 };
        }
    } else if n == 1 {
        return Lanes::Strided { base: s[0], stride: 0, n: 1 };
    }
    Lanes::Explicit { n: n as u32 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::testutil::addrs;

    fn warp(k: &GridKernel, first: u64, lanes: u32) -> GridWarp {
        k.warp(WarpId { global: 0, first_thread: first, lanes })
    }

    #[test]
    fn clamped_neighbours_at_the_border_are_explicit() {
        // 4x4 grid of 4-byte elements at 0x1000; a warp of 8 lanes covers rows 0 and 1.
        let k = GridKernel::new([4, 4, 1], 8, 1, vec![Array { base: 0x1000, elem_bytes: 4 }], vec![Step::load(0, Index::at(-1, 0, 0))]);
        let mut s = [0; MAX_LANES];
        let op = warp(&k, 0, 8).next(&mut s);
        // x-1 clamps to 0 at the start of each row: elements 0,0,1,2, 4,4,5,6.
        let want: Vec<u64> = [0, 0, 1, 2, 4, 4, 5, 6].iter().map(|e| 0x1000 + e * 4).collect();
        assert_eq!(addrs(op, &s), want);
        assert!(matches!(op, Op::Mem { lanes: Lanes::Explicit { n: 8 }, .. }));
    }

    #[test]
    fn contiguous_lanes_are_strided_and_the_loop_strides_over_the_grid() {
        let body = vec![Step::load(0, Index::HERE), Step::Wait];
        let k = GridKernel::new([64, 1, 1], 16, 2, vec![Array { base: 0, elem_bytes: 8 }], body);
        let mut w = warp(&k, 0, 8);
        let mut s = [0; MAX_LANES];
        let mut bases = vec![];
        loop {
            match w.next(&mut s) {
                Op::Mem { lanes: Lanes::Strided { base, stride: 8, n: 8 }, .. } => bases.push(base / 8),
                Op::Wait => {}
                Op::Exit => break,
                op => panic!("{op:?}"),
            }
        }
        // Twice each (repeat = 2), elements 0, 16, 32, 48 (16 threads).
        assert_eq!(bases, [0, 0, 16, 16, 32, 32, 48, 48]);
    }

    proptest::proptest! {
        /// The lane-by-lane path gives each lane its element's index, worked out on its own, for
        /// warps over rows and planes (it carries an affine index along a row instead); the one-row
        /// shortcut gives what that path gives whenever it applies, and applies to the common case
        /// (a warp inside a row, no clamped lane).
        #[test]
        fn row_lanes_agree_with_the_lane_addresses(
            dims in (1u64..48, 1u64..6, 1u64..4),
            d in (-3i32..4, -2i32..3, -1i32..2),
            affine in (0u64..5, 0u64..4, 0u64..9, 1u64..4, 0u64..3),
            kind in 0u8..3,
            eb in proptest::sample::select(vec![1u32, 4, 8]),
            e0 in 0u64..1000,
            n in 1u64..=64,
        ) {
            let k = GridKernel::new([dims.0, dims.1, dims.2], 1, 1, vec![Array { base: 0x10000, elem_bytes: eb }], vec![Step::Wait]);
            let e0 = e0 % k.elements();
            let n = n.min(k.elements() - e0);
            let at = match kind {
                0 => Index::At { dx: d.0, dy: d.1, dz: d.2 },
                1 => Index::Affine { c0: affine.0, cx: affine.1, cy: affine.2, ydiv: affine.3, cz: affine.4 },
                _ => Index::Coarse { div: affine.3 },
            };
            let a = k.arrays[0];
            let mut s = [0; MAX_LANES];
            let slow = k.lane_addrs(a, at, e0, n, &mut s);
            let each: Vec<u64> = (e0..e0 + n)
                .map(|e| {
                    let [x, y, z] = k.coords(e);
                    a.base + k.index(at, x, y, z) * eb as u64
                })
                .collect();
            proptest::prop_assert_eq!(addrs(Op::Mem { kind: MemKind::Load, lanes: slow, bytes: eb }, &s), each);
            if let Some(fast) = k.row_lanes(a, at, e0, n) {
                proptest::prop_assert_eq!(fast, slow);
            }
            let x = e0 % dims.0;
            let inside = x as i64 + d.0 as i64 >= 0 && x as i64 + d.0 as i64 + n as i64 <= dims.0 as i64;
            if x + n <= dims.0 && (kind == 0 && inside || kind == 1) {
                proptest::prop_assert!(k.row_lanes(a, at, e0, n).is_some());
            }
        }
    }

    #[test]
    fn a_barrier_step_is_a_barrier_op() {
        let body = vec![Step::load(0, Index::HERE), Step::Wait, Step::Barrier, Step::store(0, Index::HERE)];
        let k = GridKernel::new([32, 1, 1], 32, 1, vec![Array { base: 0, elem_bytes: 4 }], body);
        let mut w = warp(&k, 0, 32);
        let mut s = [0; MAX_LANES];
        let ops: Vec<Op> = std::iter::from_fn(|| Some(w.next(&mut s))).take_while(|op| !matches!(op, Op::Exit)).collect();
        assert!(matches!(ops[..], [Op::Mem { .. }, Op::Wait, Op::Barrier, Op::Mem { .. }]), "{ops:?}");
    }

    #[test]
    fn staged_work_spreads_the_instructions_over_the_barriers() {
        use Step::{Barrier as B, Compute as C};
        // 10 slots, 3 of them barriers: 7 instructions as 3 + 2 + 2 after the barriers.
        assert_eq!(staged(10, 0, 3), [B, C(1), C(1), C(1), B, C(1), C(1), B, C(1), C(1)]);
        // Fewer slots than barriers: the barriers still issue.
        assert_eq!(staged(2, 0, 3), [B, B, B]);
        // Latency mode: the first barrier, the latency, the others.
        assert_eq!(staged(0, 40, 3), [B, C(40), B, B]);
        // No barriers: what the kernels issued before.
        assert_eq!(staged(3, 9, 0), [C(1), C(1), C(1)]);
        assert_eq!(staged(0, 9, 0), [C(9)]);
    }

    #[test]
    fn affine_index_divides_y() {
        let at = Index::Affine { c0: 1, cx: 2, cy: 10, ydiv: 4, cz: 100 };
        let k = GridKernel::new([1, 1, 1], 1, 1, vec![Array { base: 0, elem_bytes: 4 }], vec![Step::Wait]);
        assert_eq!(k.index(at, 3, 9, 1), 1 + 6 + 20 + 100);
    }

    #[test]
    fn coarse_index_halves_every_coordinate() {
        // 8 x 6 x 4 fine grid over a 4 x 3 x 2 coarse one: (5, 3, 3) -> (2, 1, 1) = 2 + 4 * (1 + 3 * 1).
        let k = GridKernel::new([8, 6, 4], 1, 1, vec![Array { base: 0, elem_bytes: 8 }], vec![Step::Wait]);
        assert_eq!(k.index(Index::Coarse { div: 2 }, 5, 3, 3), 18);
        // Odd sizes round the coarse shape up: 5 x 5 -> 3 wide.
        let k = GridKernel::new([5, 5, 1], 1, 1, vec![Array { base: 0, elem_bytes: 8 }], vec![Step::Wait]);
        assert_eq!(k.index(Index::Coarse { div: 2 }, 4, 4, 0), 2 + 3 * 2);
        // And its planes: 8 x 5 x 4 -> 4 x 3 x 2, so (0, 0, 2) -> (0, 0, 1) = 4 x 3.
        let k = GridKernel::new([8, 5, 4], 1, 1, vec![Array { base: 0, elem_bytes: 8 }], vec![Step::Wait]);
        assert_eq!(k.index(Index::Coarse { div: 2 }, 0, 0, 2), 12);
    }

    #[test]
    fn lanes_wrap_into_the_next_plane_and_the_last_round_takes_the_elements_left() {
        // A 4 x 2 x 2 grid: 16 lanes from element 0 cover both planes, elements 0..16 in order.
        let a = vec![Array { base: 0, elem_bytes: 4 }];
        let k = GridKernel::new([4, 2, 2], 16, 1, a.clone(), vec![Step::load(0, Index::HERE)]);
        let mut s = [0; MAX_LANES];
        let op = warp(&k, 0, 16).next(&mut s);
        assert_eq!(addrs(op, &s), (0..16).map(|e| 4 * e).collect::<Vec<_>>());
        // A launch of more threads than elements is cut to one thread per element (4 x 3 = 12).
        assert_eq!(GridKernel::new([4, 3, 1], 100, 1, a.clone(), vec![Step::Wait]).threads(), 12);
        // 40 elements over 32 threads: the second round has 8 elements for the warp's 32 lanes.
        let k = GridKernel::new([40, 1, 1], 32, 1, a, vec![Step::load(0, Index::HERE)]);
        let mut w = warp(&k, 0, 32);
        let mut lanes = vec![];
        loop {
            match w.next(&mut s) {
                Op::Exit => break,
                op => lanes.push(addrs(op, &s).len()),
            }
        }
        assert_eq!(lanes, [32, 8]);
    }
}
