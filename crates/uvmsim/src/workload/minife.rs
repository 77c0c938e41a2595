//! `minife` (Mantevo miniFE, svm-apu / Zheng "minife"): conjugate gradient on
//! the 27-point matrix of a structured nx x ny x nz grid of nodes, in CSR.
//! Row r = x + nx (y + ny z) couples node (x, y, z) with every node of its
//! 3 x 3 x 3 neighbourhood inside the grid (27 entries inside, 18 on a face,
//! 12 on an edge, 8 at a corner), in order dz, dy, dx = -1, 0, +1 (column
//! ascending), as miniFE assembles it. The row offsets are a closed form of
//! (x, y, z), so nothing is stored.
//!
//! Each CG iteration is six launches, miniFE's `cg_solve` loop:
//! `rtrans = dot(r, r)`, `p = r + beta p` (waxpby), `Ap = A p` (matvec),
//! `dot(Ap, p)`, `x = x + alpha p`, `r = r - alpha Ap` (waxpby).
//! - matvec: one thread per row (CSR-scalar, miniFE's `matvec_std`): loads
//!   row_offsets[r] and [r+1], waits, then per entry k loads the column index
//!   and value (lanes' rows are about 27 entries apart: uncoalesced), waits,
//!   gathers p at the column, computes; then waits and stores Ap[r].
//! - dot: one thread per element: loads both elements (one load when both
//!   vectors are the same), waits, computes, reduces the warp
//!   (log2(warp) * compute_cycles); the first warp of each CTA adds the CTA's
//!   sum into the result (miniFE's block reduction and atomicAdd; modelled as a store).
//! - waxpby: the element-wise engine (`grid.rs`): load x[i], y[i], wait,
//!   compute, store w[i].
//!
//! Simplified from miniFE: the assembly of the matrix from hexahedral
//! elements, the boundary conditions and the initial residual r = b - A x are
//! not modelled (A, x and r are inputs); values are doubles, indices 4-byte ints.
//!
//! Arrays in allocation order: row_offsets, cols, vals, x, r, p, Ap, the two
//! dot results. First touch (lockstep): r, the dot results, p, then the
//! matvec's row_offsets, cols and vals interleaved row by row, Ap, and x.

use super::grid::{Array, GridKernel, Index, Step};
use super::{check, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;

section! {
    /// Parameters of the miniFE conjugate-gradient solve.
    pub struct MinifeParams {
        /// Grid nodes along x (rows of the matrix: nx * ny * nz).
        pub nx: u64 = 32,
        /// Grid nodes along y.
        pub ny: u64 = 32,
        /// Grid nodes along z.
        pub nz: u64 = 32,
        /// CG iterations; each is six kernel launches.
        pub iterations: u32 = 2,
    }
}

impl MinifeParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "nx", self.nx, 1, 1 << 12)?;
        check(p, "ny", self.ny, 1, 1 << 12)?;
        check(p, "nz", self.nz, 1, 1 << 12)?;
        let rows = self.rows();
        if rows > 1 << 31 {
            return Err((format!("{p}.nx"), format!("nx * ny * nz must be at most 2^31 (4-byte row indices), got {rows}")));
        }
        check(p, "iterations", self.iterations as u64, 1, 10_000)
    }

    fn rows(&self) -> u64 {
        self.nx * self.ny * self.nz
    }

    /// Non-zeros: the product over the dimensions of the sum of the per-node couplings.
    pub fn nnz(&self) -> u64 {
        span(self.nx, self.nx) * span(self.ny, self.ny) * span(self.nz, self.nz)
    }

    /// Row offsets, column indices and values, four vectors, two dot results.
    pub fn footprint(&self) -> u128 {
        let (n, nnz) = (self.rows() as u128, self.nnz() as u128);
        4 * (n + 1) + 12 * nnz + 4 * 8 * n + 16
    }
}

/// Sum over coordinates 0..x of the nodes each couples with along one dimension of n (3 inside, 2 at an end, 1 if n = 1).
fn span(x: u64, n: u64) -> u64 {
    x + x.saturating_sub(1) + x.min(n - 1)
}

/// Couplings of coordinate x along a dimension of n, and the offset of the first (-1 or 0).
fn couplings(x: u64, n: u64) -> (u64, u64) {
    let lo = (x > 0) as u64;
    (lo + 1 + (x + 1 < n) as u64, lo)
}

#[derive(Debug, Clone, Copy)]
struct Geometry {
    n: [u64; 3],
}

impl Geometry {
    fn coords(&self, r: u64) -> [u64; 3] {
        let [nx, ny, _] = self.n;
        [r % nx, r / nx % ny, r / (nx * ny)]
    }

    /// First entry and length of row r.
    fn row(&self, r: u64) -> (u64, u64) {
        let [nx, ny, nz] = self.n;
        let [x, y, z] = self.coords(r);
        let (cx, cy, cz) = (couplings(x, nx).0, couplings(y, ny).0, couplings(z, nz).0);
        let (sx, sy) = (span(nx, nx), span(ny, ny));
        (span(z, nz) * sx * sy + span(y, ny) * sx * cz + span(x, nx) * cy * cz, cx * cy * cz)
    }

    /// Column of entry k of row r (k < the row's length).
    fn column(&self, r: u64, k: u64) -> u64 {
        let [nx, ny, nz] = self.n;
        let [x, y, z] = self.coords(r);
        let ((cx, lx), (cy, ly), (_, lz)) = (couplings(x, nx), couplings(y, ny), couplings(z, nz));
        let (kx, ky, kz) = (k % cx, k / cx % cy, k / (cx * cy));
        (x + kx - lx) + nx * ((y + ky - ly) + ny * (z + kz - lz))
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Matvec { offsets: u64, cols: u64, vals: u64, x: u64, y: u64 },
    Dot { a: u64, b: u64, result: u64 },
}

#[derive(Debug, Clone)]
pub struct MinifeKernel {
    geo: Geometry,
    kind: Kind,
    threads_per_cta: u64,
    warp_size: u32,
    compute: u32,
}

pub(super) fn build(p: &MinifeParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let (n, nnz) = (p.rows(), p.nnz());
    let (offsets, cols, vals) = (va.alloc((n + 1) * 4, page), va.alloc(nnz * 4, page), va.alloc(nnz * 8, page));
    let [x, r, pv, ap]: [Buffer; 4] = std::array::from_fn(|_| va.alloc(n * 8, page));
    let results = va.alloc(16, page);
    let geo = Geometry { n: [p.nx, p.ny, p.nz] };
    let tpc = w.threads_per_cta;
    let special = |name: &'static str, kind: Kind| {
        let k = MinifeKernel { geo, kind, threads_per_cta: tpc as u64, warp_size: cfg.gpu.warp_size, compute: w.compute_cycles };
        KernelSpec { name, threads: n, threads_per_cta: tpc, gen: KernelGen::Minife(Box::new(k)) }
    };
    // w = x + s * y.
    let waxpby = |wv: Buffer, xv: Buffer, yv: Buffer| {
        let arrays = [xv, yv, wv].iter().map(|b| Array { base: b.base, elem_bytes: 8 }).collect();
        let body = vec![
            Step::load(0, Index::HERE),
            Step::load(1, Index::HERE),
            Step::Wait,
            Step::Compute(w.compute_cycles),
            Step::store(2, Index::HERE),
        ];
        let k = GridKernel::new([n, 1, 1], n, 1, arrays, body);
        KernelSpec { name: "minife-waxpby", threads: k.threads(), threads_per_cta: tpc, gen: KernelGen::Grid(k) }
    };
    let matvec = Kind::Matvec { offsets: offsets.base, cols: cols.base, vals: vals.base, x: pv.base, y: ap.base };
    let mut kernels = vec![];
    for _ in 0..p.iterations {
        kernels.push(special("minife-dot", Kind::Dot { a: r.base, b: r.base, result: results.base }));
        kernels.push(waxpby(pv, r, pv));
        kernels.push(special("minife-matvec", matvec));
        kernels.push(special("minife-dot", Kind::Dot { a: ap.base, b: pv.base, result: results.base + 8 }));
        kernels.push(waxpby(x, x, pv));
        kernels.push(waxpby(r, r, ap));
    }
    (kernels, offsets.bytes + cols.bytes + vals.bytes + x.bytes + r.bytes)
}

impl MinifeKernel {
    pub fn warp(&self, id: WarpId) -> MinifeWarp {
        let first_of_cta = id.first_thread % self.threads_per_cta == 0;
        MinifeWarp { k: self.clone(), r0: id.first_thread, lanes: id.lanes, first_of_cta, entry: 0, phase: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct MinifeWarp {
    k: MinifeKernel,
    /// Row (element) of lane 0.
    r0: u64,
    lanes: u32,
    first_of_cta: bool,
    /// Matvec: the current entry of every lane's row.
    entry: u64,
    phase: u8,
}

impl MinifeWarp {
    fn strided(kind: MemKind, base: u64, stride: u64, n: u32, bytes: u32) -> Op {
        Op::Mem { kind, lanes: Lanes::Strided { base, stride, n }, bytes }
    }

    /// Lane addresses `base + f(row, entry) * bytes` of the lanes whose row has the current entry; `None` if no row has.
    fn entries(&self, scratch: &mut [u64; MAX_LANES], base: u64, bytes: u64, column: bool) -> Option<Op> {
        let mut m = 0;
        for r in self.r0..self.r0 + self.lanes as u64 {
            let (first, len) = self.k.geo.row(r);
            if self.entry < len {
                let e = if column { self.k.geo.column(r, self.entry) } else { first + self.entry };
                scratch[m] = base + e * bytes;
                m += 1;
            }
        }
        (m > 0).then(|| Op::Mem { kind: MemKind::Load, lanes: super::grid::compact(scratch, m), bytes: bytes as u32 })
    }

    /// The current phase; advances to the next.
    fn step(&mut self) -> u8 {
        self.phase += 1;
        self.phase - 1
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let n = self.lanes;
        let c = self.k.compute;
        match self.k.kind {
            Kind::Dot { a, b, result } => match self.step() {
                0 => Self::strided(MemKind::Load, a + self.r0 * 8, 8, n, 8),
                1 if a != b => Self::strided(MemKind::Load, b + self.r0 * 8, 8, n, 8),
                1 | 2 => {
                    self.phase = 3;
                    Op::Wait
                }
                3 => Op::Compute(c),
                4 => Op::Compute(self.k.warp_size.max(2).ilog2() * c),
                5 if self.first_of_cta => Self::strided(MemKind::Store, result, 0, 1, 8),
                _ => {
                    self.phase = 6;
                    Op::Exit
                }
            },
            Kind::Matvec { offsets, cols, vals, x, y } => loop {
                return match self.step() {
                    0 => Self::strided(MemKind::Load, offsets + self.r0 * 4, 4, n, 4),
                    1 => Self::strided(MemKind::Load, offsets + (self.r0 + 1) * 4, 4, n, 4),
                    2 | 5 => Op::Wait,
                    3 => match self.entries(scratch, cols, 4, false) {
                        Some(op) => op,
                        None => {
                            self.phase = 8;
                            continue;
                        }
                    },
                    4 => self.entries(scratch, vals, 8, false).expect("same lanes as the column indices"),
                    6 => self.entries(scratch, x, 8, true).expect("same lanes as the column indices"),
                    7 => {
                        (self.entry, self.phase) = (self.entry + 1, 3);
                        Op::Compute(c)
                    }
                    8 => Op::Wait,
                    9 => Self::strided(MemKind::Store, y + self.r0 * 8, 8, n, 8),
                    _ => {
                        self.phase = 10;
                        Op::Exit
                    }
                };
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::testutil::*;

    #[test]
    fn rows_of_the_27_point_matrix() {
        let g = Geometry { n: [3, 3, 3] };
        // Corner node 0 couples with the 8 nodes of its cube; the centre 13 with all 27.
        assert_eq!(g.row(0), (0, 8));
        assert_eq!((0..8).map(|k| g.column(0, k)).collect::<Vec<_>>(), [0, 1, 3, 4, 9, 10, 12, 13]);
        assert_eq!(g.row(13).1, 27);
        assert_eq!((0..27).map(|k| g.column(13, k)).collect::<Vec<_>>(), (0..27).collect::<Vec<_>>());
        // Offsets are the running sum of the lengths, and end at nnz = 7^3.
        let mut off = 0;
        for r in 0..27 {
            assert_eq!(g.row(r).0, off, "row {r}");
            off += g.row(r).1;
        }
        let p = MinifeParams { nx: 3, ny: 3, nz: 3, iterations: 1 };
        assert_eq!((off, p.nnz()), (343, 343));
        // A 5 x 1 x 1 grid: a tridiagonal matrix.
        let g = Geometry { n: [5, 1, 1] };
        assert_eq!((0..5).map(|r| g.row(r)).collect::<Vec<_>>(), [(0, 2), (2, 3), (5, 3), (8, 3), (11, 2)]);
        assert_eq!((0..3).map(|k| g.column(2, k)).collect::<Vec<_>>(), [1, 2, 3]);
    }

    #[test]
    fn six_launches_per_iteration_and_the_matvec_addresses() {
        let p = program(&[
            "workload.kind=minife",
            "workload.minife.nx=8",
            "workload.minife.ny=4",
            "workload.minife.nz=4",
            "workload.minife.iterations=2",
        ]);
        let names: Vec<&str> = kernels(&p).iter().map(|k| k.name).collect();
        let it = ["minife-dot", "minife-waxpby", "minife-matvec", "minife-dot", "minife-waxpby", "minife-waxpby"];
        assert_eq!(names, [it, it].concat());
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        let g = Geometry { n: [8, 4, 4] };
        // Matvec warp 1 = rows 32..64 (z = 1): all interior in z, so 12, 18 or 27 entries.
        let ops = mem_ops(&mut warps(&p, 2)[1]);
        assert_eq!(ops[0].1, (32..64).map(|r| b[0] + 4 * r).collect::<Vec<_>>());
        assert_eq!(ops[1].1, (33..65).map(|r| b[0] + 4 * r).collect::<Vec<_>>());
        // Entry 0 of every row: its column index, value, then p at the column.
        assert_eq!(ops[2].1, (32..64).map(|r| b[1] + 4 * g.row(r).0).collect::<Vec<_>>());
        assert_eq!(ops[3].1, (32..64).map(|r| b[2] + 8 * g.row(r).0).collect::<Vec<_>>());
        assert_eq!(ops[4].1, (32..64).map(|r| b[5] + 8 * g.column(r, 0)).collect::<Vec<_>>());
        // Entries 12..18 only for rows with more than 12 entries; 18..27 only the interior rows (x, y in 1..3 / 1..7).
        let e = |k: usize| &ops[2 + 3 * k];
        assert_eq!(e(12).1.len(), (32..64).filter(|&r| g.row(r).1 > 12).count());
        assert_eq!(e(26).1.len(), 6 * 2);
        assert_eq!(ops.len(), 2 + 3 * 27 + 1);
        assert_eq!(*ops.last().unwrap(), (MemKind::Store, (32..64).map(|r| b[6] + 8 * r).collect()));
        // dot(r, r) reads r once; dot(Ap, p) both; the CTA's first warp stores the sum.
        assert_eq!(mem_ops(&mut warps(&p, 0)[0]), [(MemKind::Load, (0..32).map(|i| b[4] + 8 * i).collect()), (MemKind::Store, vec![b[7]])]);
        assert_eq!(mem_ops(&mut warps(&p, 3)[1]).len(), 2);
        assert_eq!(mem_ops(&mut warps(&p, 3)[0])[2], (MemKind::Store, vec![b[7] + 8]));
    }

    #[test]
    fn first_touch_order() {
        let p = program(&[
            "workload.kind=minife",
            "workload.minife.nx=64",
            "workload.minife.ny=64",
            "workload.minife.nz=4",
            "workload.minife.iterations=1",
        ]);
        let mut order: Vec<usize> = first_touch(&p).iter().map(|&(b, _)| b).collect();
        order.dedup();
        assert_eq!(order[..4], [4, 7, 5, 0]);
        assert_eq!(order[order.len() - 2..], [6, 3]);
        assert!(order[4..order.len() - 2].iter().all(|&b| b == 1 || b == 2));
    }
}
