//! `minife` (Mantevo miniFE, svm-apu / Zheng "minife"): conjugate gradient on
//! the 27-point matrix of a structured nx x ny x nz grid of nodes. Row
//! r = x + nx (y + ny z) couples node (x, y, z) with every node of its
//! 3 x 3 x 3 neighbourhood inside the grid (27 entries inside, 18 on a face,
//! 12 on an edge, 8 at a corner), in order dz, dy, dx = -1, 0, +1 (column
//! ascending), as miniFE assembles it. Two ports of miniFE (`cuda`):
//!
//! **The CUDA port** (default; Mantevo miniFE `cuda/src`, the GPU code of
//! miniFE): an ELL matrix, 27 entries per row stored column-major with a
//! pitch of the row count rounded up to 32 (`CudaELLMatrix::reserve_space`),
//! so entry j of 32 consecutive rows is one coalesced access. Its kernels,
//! with the port's own launch sizes (`workload.threads_per_cta` does not apply):
//! - `matvec_ell_kernel` (256-thread CTAs, at most 32,768, grid-stride over
//!   rows): per entry j, load the column index, wait; the lanes whose entry is
//!   not padding (-1) load the value and gather p at the column, wait,
//!   compute (two round trips per entry, as in the kernel's PTX:
//!   docs/workloads.md, "Load order"; before 2026-12-01 the next entry's
//!   column load went out with the value and p); at the end store Ap[r]. The
//!   build without `MATVEC_OVERLAP` (one matvec kernel; the Makefile's MPI
//!   build splits it into internal and external rows). `generate_matrix_structure_kernel` does
//!   not reset its column between neighbours, so a neighbour outside the grid
//!   repeats the last column inside it (or is -1 before the first), and the
//!   sort puts the -1s last: a boundary row's real entries come with repeats.
//! - `dot` = `cudaMemset_kernel` (clears the 1,024 partial sums), `dot_kernel`
//!   (512-thread CTAs, at most 1,024, grid-stride: load y[i], then x[i], wait,
//!   compute; then the CTA's shared-memory reduction, four `__syncthreads`
//!   with the steps of threads < 256, 128, 64, 32 between them, five
//!   warp-synchronous steps, and thread 0 stores the CTA's partial sum) and
//!   `dot_final_reduce_kernel` (one 1,024-thread CTA: load a partial sum, wait,
//!   five `__syncthreads` halving the threads, then thread 0 stores the sum).
//! - `waxpby_kernel` (256-thread CTAs, at most 32,768, grid-stride): the
//!   element-wise engine, load x, y, wait, compute, store w.
//!
//! `cg_solve`'s launches: the set-up p = x, Ap = A p, r = b - Ap, dot(r, r);
//! iteration 1: p = r; later ones dot(r, r) and p = r + beta p; then each
//! Ap = A p, dot(Ap, p), x += alpha p, r -= alpha Ap.
//!
//! **The reference port** (`cuda = false`; miniFE's `matvec_std`), CSR, one
//! thread per row or element with `workload.threads_per_cta`; each CG
//! iteration is six launches: `rtrans = dot(r, r)`, `p = r + beta p`
//! (waxpby), `Ap = A p` (matvec), `dot(Ap, p)`, `x = x + alpha p`,
//! `r = r - alpha Ap` (waxpby).
//! - matvec: one thread per row (CSR-scalar): loads row_offsets[r] and
//!   [r+1], waits, then per entry k loads the column index and value (lanes'
//!   rows are about 27 entries apart: uncoalesced), waits, gathers p at the
//!   column, computes; then waits and stores Ap[r]. The row offsets are a
//!   closed form of (x, y, z), so nothing is stored.
//! - dot: one thread per element: loads both elements (one load when both
//!   vectors are the same), waits, computes, reduces the warp
//!   (log2(warp) * compute_cycles); the first warp of each CTA adds the CTA's
//!   sum into the result (miniFE's block reduction and atomicAdd; modelled as a store).
//! - waxpby: the element-wise engine (`grid.rs`): load x[i], y[i], wait,
//!   compute, store w[i].
//!
//! Simplified from miniFE (both ports): the assembly of the matrix from
//! hexahedral elements and the boundary conditions are not modelled; values
//! are doubles, indices 4-byte ints. The reference port also leaves out the
//! initial residual r = b - A x (A, x and r are its inputs); the host's read
//! of each dot product between launches is not modelled in either.
//!
//! Arrays in allocation order. CUDA port: cols, coefs, b, x, r, p, Ap, the
//! 1,024 partial sums (inputs: the matrix, b and x). Reference port:
//! row_offsets, cols, vals, x, r, p, Ap, the two dot results; first touch
//! (lockstep): r, the dot results, p, then the matvec's row_offsets, cols and
//! vals interleaved row by row, Ap, and x.

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
        /// CG iterations; each is six kernel launches (the reference port) or up to ten (the CUDA port: a dot product is three).
        pub iterations: u32 = 2,
        /// Which miniFE port runs. true: Mantevo miniFE's CUDA port (`cuda/src`): an ELL matrix (27
        /// entries per row, column-major, pitch = rows rounded up to 32), `matvec_ell_kernel`,
        /// `waxpby_kernel` (256-thread CTAs, at most 32,768, grid-stride), dot products as
        /// `cudaMemset_kernel`, `dot_kernel` (512-thread CTAs, at most 1,024, grid-stride, a
        /// shared-memory reduction over 4 `__syncthreads`) and `dot_final_reduce_kernel` (one
        /// 1,024-thread CTA, 5 `__syncthreads`), and `cg_solve`'s set-up before the iterations;
        /// workload.threads_per_cta does not apply. false: the reference port's CSR matrix with a
        /// thread per row (`matvec_std`) and per element, workload.threads_per_cta, six launches
        /// per iteration (the model before 2026-12-01).
        pub cuda: bool = true,
    }
}

impl MinifeParams {
    pub fn validate(&self, p: &str, cfg: &Config) -> Result<(), (String, String)> {
        check(p, "nx", self.nx, 1, 1 << 12)?;
        check(p, "ny", self.ny, 1, 1 << 12)?;
        check(p, "nz", self.nz, 1, 1 << 12)?;
        let rows = self.rows();
        if rows > 1 << 31 {
            return Err((format!("{p}.nx"), format!("nx * ny * nz must be at most 2^31 (4-byte row indices), got {rows}")));
        }
        check(p, "iterations", self.iterations as u64, 1, 10_000)?;
        let (ws, slots) = (cfg.gpu.warp_size, cfg.gpu.max_warps_per_sm);
        if self.cuda && FINAL_CTA.div_ceil(ws) > slots {
            return Err((
                format!("{p}.cuda"),
                format!(
                    "the CUDA port's dot_final_reduce_kernel runs one {FINAL_CTA}-thread CTA, {} warps of {ws}, more than gpu.max_warps_per_sm ({slots}); set {p}.cuda = false",
                    FINAL_CTA.div_ceil(ws)
                ),
            ));
        }
        Ok(())
    }

    fn rows(&self) -> u64 {
        self.nx * self.ny * self.nz
    }

    /// Non-zeros: the product over the dimensions of the sum of the per-node couplings.
    pub fn nnz(&self) -> u64 {
        span(self.nx, self.nx) * span(self.ny, self.ny) * span(self.nz, self.nz)
    }

    /// CUDA port: ELL column indices and values, five vectors, the partial sums.
    /// Reference port: row offsets, column indices and values, four vectors, two dot results.
    pub fn footprint(&self) -> u128 {
        let n = self.rows() as u128;
        if self.cuda {
            12 * ELL_WIDTH as u128 * pitch(self.rows()) as u128 + 5 * 8 * n + 8 * PARTIALS as u128
        } else {
            4 * (n + 1) + 12 * self.nnz() as u128 + 4 * 8 * n + 16
        }
    }
}

/// Entries per ELL row (`A.reserve_space(nrows, 27)`).
const ELL_WIDTH: u64 = 27;
/// Partial sums `dot` keeps (`d`, a 1,024-entry vector: one per `dot_kernel` CTA).
const PARTIALS: u64 = 1024;
/// `dot_kernel`'s grid cap (`NUM_BLOCKS = min(1024, ...)`).
const DOT_MAX_CTAS: u64 = 1024;
/// CTA sizes and grid caps of the CUDA port's launches.
/// `waxpby` and `matvec` (`BLOCK_SIZE` 256, `MAX_BLOCKS` 32768 in both).
const GRID_CTA: u32 = 256;
const GRID_MAX_CTAS: u64 = 32768;
const DOT_CTA: u32 = 512;
const FINAL_CTA: u32 = 1024;
const MEMSET_CTA: u32 = 512;

/// The ELL pitch: rows rounded up to 32 (`CudaELLMatrix::reserve_space`).
fn pitch(rows: u64) -> u64 {
    rows.div_ceil(32) * 32
}

/// Threads a grid-stride launch of `min(max_ctas, ceil(n / cta))` CTAs runs.
fn grid_threads(n: u64, cta: u32, max_ctas: u64) -> u64 {
    n.div_ceil(cta as u64).clamp(1, max_ctas) * cta as u64
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

    /// Entries of row r in the CUDA port's ELL matrix that are not padding (-1): 27 less the
    /// neighbours before its first in the grid (offset 0 along a dimension at its low end, else -1),
    /// for the row at these coordinates.
    fn ell_len_at([x, y, z]: [u64; 3]) -> u64 {
        ELL_WIDTH - ((x == 0) as u64 + 3 * (y == 0) as u64 + 9 * (z == 0) as u64)
    }

    /// The coordinates of the row after the one at `c` (x fastest), without the divisions of `coords`.
    fn next_coords(&self, [x, y, z]: [u64; 3]) -> [u64; 3] {
        let [nx, ny, _] = self.n;
        match (x + 1 < nx, y + 1 < ny) {
            (true, _) => [x + 1, y, z],
            (false, true) => [0, y + 1, z],
            (false, false) => [0, 0, z + 1],
        }
    }

    /// Entry j of row r in the CUDA port's ELL matrix; None where it is padding (-1).
    /// `generate_matrix_structure_kernel` walks the 27 neighbours k (dx fastest, each offset
    /// k % 3 - 1, k / 3 % 3 - 1, k / 9 - 1) keeping the last in-grid neighbour's column for an
    /// out-of-grid one (its `col` is set only in range, and starts at -1), then sorts the 27 as
    /// unsigned: the columns ascend with k, and the -1s, one per neighbour before the first in
    /// the grid, go last.
    #[cfg(test)]
    fn ell_column(&self, r: u64, j: u64) -> Option<u64> {
        self.ell_column_at(self.coords(r), j)
    }

    /// The column offset of ELL entry `j` in an interior row (all 27 neighbours in the grid, in order:
    /// entry j is neighbour j).
    fn interior_offset(&self, j: u64) -> i64 {
        let ([nx, ny, _], j) = (self.n.map(|n| n as i64), j as i64);
        (j % 3 - 1) + nx * ((j / 3 % 3 - 1) + ny * (j / 9 - 1))
    }

    /// `ell_column` of row `r` at coordinates `c`, given `interior_offset(j)`: interior rows (most of
    /// them) take the offset without the search for the last in-grid neighbour.
    #[inline]
    fn ell_column_of(&self, r: u64, c: [u64; 3], j: u64, offset: i64) -> Option<u64> {
        let [nx, ny, nz] = self.n;
        let [x, y, z] = c;
        if j < ELL_WIDTH && x > 0 && y > 0 && z > 0 && x + 1 < nx && y + 1 < ny && z + 1 < nz {
            return Some(r.wrapping_add_signed(offset));
        }
        self.ell_column_at(c, j)
    }

    /// `ell_column` of the row at these coordinates.
    fn ell_column_at(&self, [x, y, z]: [u64; 3], j: u64) -> Option<u64> {
        let len = Self::ell_len_at([x, y, z]);
        if j >= len {
            return None;
        }
        let [nx, ny, nz] = self.n;
        let inside = |k: u64| {
            let (dx, dy, dz) = (k % 3, k / 3 % 3, k / 9);
            x + dx >= 1 && x + dx <= nx && y + dy >= 1 && y + dy <= ny && z + dz >= 1 && z + dz <= nz
        };
        let mut k = j + ELL_WIDTH - len;
        while !inside(k) {
            k -= 1;
        }
        let (dx, dy, dz) = (k % 3, k / 3 % 3, k / 9);
        Some((x + dx - 1) + nx * ((y + dy - 1) + ny * (z + dz - 1)))
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Reference port: CSR-scalar matvec, one thread per row.
    Matvec { offsets: u64, cols: u64, vals: u64, x: u64, y: u64 },
    /// Reference port: dot product, one thread per element.
    Dot { a: u64, b: u64, result: u64 },
    /// CUDA port: `matvec_ell_kernel`, rows `rows`, grid-stride `stride` threads.
    Ell { cols: u64, coefs: u64, x: u64, y: u64, pitch: u64, rows: u64, stride: u64 },
    /// CUDA port: `dot_kernel` over `n` elements, grid-stride `stride` threads; partial sums at `partial`.
    BlockDot { a: u64, b: u64, partial: u64, n: u64, stride: u64 },
    /// CUDA port: `dot_final_reduce_kernel` over the partial sums at `d`.
    FinalReduce { d: u64 },
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
    if p.cuda {
        return build_cuda(p, w, cfg, page, va);
    }
    let (n, nnz) = (p.rows(), p.nnz());
    let (offsets, cols, vals) = (va.alloc((n + 1) * 4, page), va.alloc(nnz * 4, page), va.alloc(nnz * 8, page));
    let [x, r, pv, ap]: [Buffer; 4] = std::array::from_fn(|_| va.alloc(n * 8, page));
    let results = va.alloc(16, page);
    let geo = Geometry { n: [p.nx, p.ny, p.nz] };
    let tpc = w.threads_per_cta;
    let special = |name, kind| spec(name, geo, kind, tpc, n, w, cfg);
    // w = x + s * y.
    let waxpby = |wv, xv, yv| waxpby(n, n, tpc, w.compute_cycles, [xv, yv, wv]);
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

/// A launch of one of this module's own kernels.
fn spec(name: &'static str, geo: Geometry, kind: Kind, cta: u32, threads: u64, w: &WorkloadConfig, cfg: &Config) -> KernelSpec {
    let k = MinifeKernel { geo, kind, threads_per_cta: cta as u64, warp_size: cfg.gpu.warp_size, compute: w.compute_cycles };
    KernelSpec { name, threads, threads_per_cta: cta, gen: KernelGen::Minife(Box::new(k)) }
}

/// `w = alpha x + beta y` over `n` elements by `threads` threads (grid-stride) in `cta`-thread
/// CTAs, on the engine: load x and y, wait, compute, store w. `xyw` = [x, y, w].
fn waxpby(n: u64, threads: u64, cta: u32, compute: u32, xyw: [Buffer; 3]) -> KernelSpec {
    let arrays = xyw.iter().map(|b| Array { base: b.base, elem_bytes: 8 }).collect();
    let body =
        vec![Step::load(0, Index::HERE), Step::load(1, Index::HERE), Step::Wait, Step::Compute(compute), Step::store(2, Index::HERE)];
    let k = GridKernel::new([n, 1, 1], threads, 1, arrays, body);
    KernelSpec { name: "minife-waxpby", threads: k.threads(), threads_per_cta: cta, gen: KernelGen::Grid(k) }
}

/// The CUDA port's launches (`cuda/src/cg_solve.hpp`, `Vector_functions.hpp`, `SparseMatrix_functions.hpp`).
fn build_cuda(p: &MinifeParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let n = p.rows();
    let pitch = pitch(n);
    let (cols, coefs) = (va.alloc(ELL_WIDTH * pitch * 4, page), va.alloc(ELL_WIDTH * pitch * 8, page));
    let [b, x, r, pv, ap]: [Buffer; 5] = std::array::from_fn(|_| va.alloc(n * 8, page));
    let d = va.alloc(PARTIALS * 8, page);
    let geo = Geometry { n: [p.nx, p.ny, p.nz] };
    let special = |name, kind, cta, threads| spec(name, geo, kind, cta, threads, w, cfg);
    let grid = grid_threads(n, GRID_CTA, GRID_MAX_CTAS);
    // w = alpha x + beta y (`waxpby_kernel`: both loaded even when beta is 0).
    let waxpby = |wv, xv, yv| waxpby(n, grid, GRID_CTA, w.compute_cycles, [xv, yv, wv]);
    let matvec = || {
        let kind = Kind::Ell { cols: cols.base, coefs: coefs.base, x: pv.base, y: ap.base, pitch, rows: n, stride: grid };
        // Whole 256-thread CTAs, as the port launches them (`NUM_BLOCKS, BLOCK_SIZE`); threads past
        // the last row exit at once.
        special("minife-matvec", kind, GRID_CTA, grid)
    };
    // `dot`: clear the partial sums (`cudaMemset_custom`: 512-thread CTAs), one per CTA, then their sum.
    let dot = |a: Buffer, bv: Buffer| {
        let clear =
            GridKernel::new([PARTIALS, 1, 1], PARTIALS, 1, vec![Array { base: d.base, elem_bytes: 8 }], vec![Step::store(0, Index::HERE)]);
        let threads = grid_threads(n, DOT_CTA, DOT_MAX_CTAS);
        [
            KernelSpec { name: "minife-memset", threads: PARTIALS, threads_per_cta: MEMSET_CTA, gen: KernelGen::Grid(clear) },
            special("minife-dot", Kind::BlockDot { a: a.base, b: bv.base, partial: d.base, n, stride: threads }, DOT_CTA, threads),
            special("minife-dot-final", Kind::FinalReduce { d: d.base }, FINAL_CTA, FINAL_CTA as u64),
        ]
    };
    // cg_solve: p = x, Ap = A p, r = b - Ap, rtrans = dot(r, r); then the iterations.
    let mut kernels = vec![waxpby(pv, x, x), matvec(), waxpby(r, b, ap)];
    kernels.extend(dot(r, r));
    for k in 1..=p.iterations {
        if k == 1 {
            kernels.push(waxpby(pv, r, r));
        } else {
            kernels.extend(dot(r, r));
            kernels.push(waxpby(pv, r, pv));
        }
        kernels.push(matvec());
        kernels.extend(dot(ap, pv));
        kernels.push(waxpby(x, x, pv));
        kernels.push(waxpby(r, r, ap));
    }
    (kernels, cols.bytes + coefs.bytes + b.bytes + x.bytes)
}

impl MinifeKernel {
    pub fn warp(&self, id: WarpId) -> MinifeWarp {
        let in_cta = id.first_thread % self.threads_per_cta;
        MinifeWarp { k: self.clone(), r0: id.first_thread, lanes: id.lanes, in_cta, e: id.first_thread, entry: 0, phase: 0 }
    }
}

/// The shared-memory reductions' thread counts after each `__syncthreads` (`dot_kernel` with
/// 512-thread CTAs; `dot_final_reduce_kernel` with 1,024), then the warp-synchronous steps.
const DOT_SYNCED: [u64; 4] = [256, 128, 64, 32];
const FINAL_SYNCED: [u64; 5] = [512, 256, 128, 64, 32];
const WARP_STEPS: usize = 5;

#[derive(Debug, Clone)]
pub struct MinifeWarp {
    k: MinifeKernel,
    /// Row (element) of lane 0.
    r0: u64,
    lanes: u32,
    /// The warp's first thread within its CTA.
    in_cta: u64,
    /// CUDA port: the grid-stride loop's current row (element) of lane 0.
    e: u64,
    /// Matvec: the current entry of every lane's row; the reductions: their step.
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

    /// ELL entry `self.entry` of the lanes' rows (from row `self.e`, `m` lanes): the lanes with
    /// one get `base + (row + entry * pitch) * 8` (`column` false: its value) or `base + col * 8`
    /// (`column` true: p at its column); `None` if none has one.
    fn ell_lanes(&self, scratch: &mut [u64; MAX_LANES], m: u64, base: u64, pitch: u64, column: bool) -> Option<Op> {
        let mut i = 0;
        let geo = &self.k.geo;
        // The lanes' rows are consecutive: their coordinates advance without a division per lane
        // (`coords` per lane was 30% of a CUDA-port run).
        let mut c = geo.coords(self.e);
        let offset = geo.interior_offset(self.entry);
        for r in self.e..self.e + m {
            // The value needs only the entry to exist; p needs its column.
            let at = if column {
                geo.ell_column_of(r, c, self.entry, offset)
            } else {
                (self.entry < Geometry::ell_len_at(c)).then_some(r + self.entry * pitch)
            };
            if let Some(at) = at {
                scratch[i] = base + at * 8;
                i += 1;
            }
            c = geo.next_coords(c);
        }
        (i > 0).then(|| Op::Mem { kind: MemKind::Load, lanes: super::grid::compact(scratch, i), bytes: 8 })
    }

    /// A CTA's shared-memory reduction after its loads: for each count in `synced` a
    /// `__syncthreads` and the step of the warps holding threads below it; the
    /// warp-synchronous steps (threads < 16, 8, 4, 2, 1: the first warp); thread 0 stores
    /// the sum at `out`; exit.
    fn reduce(&mut self, synced: &[u64], out: u64) -> Op {
        loop {
            let i = self.entry as usize;
            self.entry += 1;
            if i < 2 * synced.len() {
                if i % 2 == 0 {
                    return Op::Barrier;
                }
                if self.in_cta < synced[i / 2] {
                    return Op::Compute(self.k.compute);
                }
                continue;
            }
            let j = i - 2 * synced.len();
            if self.in_cta != 0 || j > WARP_STEPS {
                return Op::Exit;
            }
            return if j < WARP_STEPS { Op::Compute(self.k.compute) } else { Self::strided(MemKind::Store, out, 0, 1, 8) };
        }
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let n = self.lanes;
        let c = self.k.compute;
        match self.k.kind {
            Kind::Ell { cols, coefs, x, y, pitch, rows, stride } => loop {
                let m = rows.saturating_sub(self.e).min(n as u64);
                return match self.phase {
                    0 if m == 0 => {
                        self.phase = 9;
                        Op::Exit
                    }
                    0 => {
                        self.phase = 1;
                        Self::strided(MemKind::Load, cols + (self.e + self.entry * pitch) * 4, 4, m as u32, 4)
                    }
                    1 => {
                        self.phase = 2;
                        Op::Wait
                    }
                    // `if (c != -1)`: the value and p at the column, then the multiply-add.
                    2 => match self.ell_lanes(scratch, m, coefs, pitch, false) {
                        Some(op) => {
                            self.phase = 3;
                            op
                        }
                        None => {
                            self.phase = 5;
                            continue;
                        }
                    },
                    3 => {
                        self.phase = 4;
                        self.ell_lanes(scratch, m, x, pitch, true).expect("same lanes as the values")
                    }
                    // The multiply-add waits for both (the PTX), and the next entry's column
                    // load comes after it: two round trips per entry.
                    4 => {
                        self.phase = 10;
                        Op::Wait
                    }
                    10 => {
                        self.phase = 5;
                        Op::Compute(c)
                    }
                    5 => {
                        self.entry += 1;
                        self.phase = if self.entry < ELL_WIDTH { 0 } else { 7 };
                        continue;
                    }
                    7 => {
                        (self.phase, self.entry) = (0, 0);
                        let op = Self::strided(MemKind::Store, y + self.e * 8, 8, m as u32, 8);
                        self.e += stride;
                        op
                    }
                    _ => Op::Exit,
                };
            },
            Kind::BlockDot { a, b, partial, n: len, stride } => loop {
                let m = len.saturating_sub(self.e).min(n as u64) as u32;
                return match self.phase {
                    0 if m == 0 => {
                        self.phase = 4;
                        continue;
                    }
                    // `dot_kernel`'s PTX loads y[i] before x[i].
                    0 => {
                        self.phase = 1;
                        Self::strided(MemKind::Load, b + self.e * 8, 8, m, 8)
                    }
                    1 => {
                        self.phase = 2;
                        Self::strided(MemKind::Load, a + self.e * 8, 8, m, 8)
                    }
                    2 => {
                        self.phase = 3;
                        Op::Wait
                    }
                    3 => {
                        self.phase = 0;
                        self.e += stride;
                        Op::Compute(c)
                    }
                    _ => self.reduce(&DOT_SYNCED, partial + self.r0 / DOT_CTA as u64 * 8),
                };
            },
            Kind::FinalReduce { d } => match self.phase {
                0 => {
                    self.phase = 1;
                    Self::strided(MemKind::Load, d + self.in_cta * 8, 8, n, 8)
                }
                1 => {
                    self.phase = 2;
                    Op::Wait
                }
                _ => self.reduce(&FINAL_SYNCED, d),
            },
            Kind::Dot { a, b, result } => match self.step() {
                0 => Self::strided(MemKind::Load, a + self.r0 * 8, 8, n, 8),
                1 if a != b => Self::strided(MemKind::Load, b + self.r0 * 8, 8, n, 8),
                1 | 2 => {
                    self.phase = 3;
                    Op::Wait
                }
                3 => Op::Compute(c),
                4 => Op::Compute(self.k.warp_size.max(2).ilog2() * c),
                5 if self.in_cta == 0 => Self::strided(MemKind::Store, result, 0, 1, 8),
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
        let p = MinifeParams { nx: 3, ny: 3, nz: 3, iterations: 1, cuda: false };
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
            "workload.minife.cuda=false",
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
            "workload.minife.cuda=false",
        ]);
        let mut order: Vec<usize> = first_touch(&p).iter().map(|&(b, _)| b).collect();
        order.dedup();
        assert_eq!(order[..4], [4, 7, 5, 0]);
        assert_eq!(order[order.len() - 2..], [6, 3]);
        assert!(order[4..order.len() - 2].iter().all(|&b| b == 1 || b == 2));
    }

    /// The CUDA port's `generate_matrix_structure_kernel` for one row, as written: the 27
    /// neighbours with `col` kept across out-of-grid ones, sorted as unsigned (-1 = u32::MAX).
    fn ell_row_reference(g: &Geometry, r: u64) -> Vec<Option<u64>> {
        let [nx, ny, nz] = g.n;
        let [x, y, z] = g.coords(r);
        let mut col = u32::MAX;
        let mut cols = vec![];
        for k in 0..27i64 {
            let (sx, sy, sz) = (k % 3 - 1, k / 3 % 3 - 1, k / 9 - 1);
            let (ix, iy, iz) = (x as i64 + sx, y as i64 + sy, z as i64 + sz);
            if (0..nx as i64).contains(&ix) && (0..ny as i64).contains(&iy) && (0..nz as i64).contains(&iz) {
                col = (ix + nx as i64 * (iy + ny as i64 * iz)) as u32;
            }
            cols.push(col);
        }
        cols.sort_unstable();
        cols.iter().map(|&c| (c != u32::MAX).then_some(c as u64)).collect()
    }

    proptest::proptest! {
        #[test]
        fn next_coords_steps_through_the_grid(nx in 1u64..6, ny in 1u64..6, nz in 1u64..6) {
            let g = Geometry { n: [nx, ny, nz] };
            let mut c = g.coords(0);
            for r in 1..nx * ny * nz {
                c = g.next_coords(c);
                proptest::prop_assert_eq!(c, g.coords(r));
            }
        }

        #[test]
        fn ell_columns_match_the_cuda_generator(nx in 1u64..6, ny in 1u64..6, nz in 1u64..6, r in 0u64..216) {
            let g = Geometry { n: [nx, ny, nz] };
            let r = r % (nx * ny * nz);
            let got: Vec<Option<u64>> = (0..ELL_WIDTH).map(|j| g.ell_column(r, j)).collect();
            proptest::prop_assert_eq!(&got, &ell_row_reference(&g, r));
            // The lane path's shortcut for interior rows gives the same columns.
            let fast: Vec<Option<u64>> = (0..ELL_WIDTH).map(|j| g.ell_column_of(r, g.coords(r), j, g.interior_offset(j))).collect();
            proptest::prop_assert_eq!(fast, got);
        }
    }

    #[test]
    fn ell_rows_hold_every_coupling_and_repeat_at_the_border() {
        let g = Geometry { n: [4, 4, 4] };
        // Corner 0: its first in-grid neighbour is k = 13 (itself), so 13 entries are -1; the 14
        // others are its 8 couplings, each repeated after the out-of-grid neighbours following it.
        let cols: Vec<Option<u64>> = (0..27).map(|j| g.ell_column(0, j)).collect();
        assert_eq!(cols.iter().filter(|c| c.is_none()).count(), 13);
        let mut distinct: Vec<u64> = cols.iter().flatten().copied().collect();
        assert_eq!(distinct, [0, 1, 1, 4, 5, 5, 5, 5, 5, 16, 17, 17, 20, 21]);
        distinct.dedup();
        assert_eq!(distinct, (0..8).map(|k| g.column(0, k)).collect::<Vec<_>>());
        // An interior row: the 27 couplings in order, no padding.
        let r = 1 + 4 * (1 + 4);
        assert_eq!((0..27).map(|j| g.ell_column(r, j).unwrap()).collect::<Vec<_>>(), (0..27).map(|k| g.column(r, k)).collect::<Vec<_>>());
    }

    fn cuda(sets: &[&str]) -> crate::workload::Program {
        let mut all = vec!["workload.kind=minife"];
        all.extend_from_slice(sets);
        program(&all)
    }

    #[test]
    fn cuda_port_launches_and_footprint() {
        let p = cuda(&["workload.minife.nx=8", "workload.minife.ny=8", "workload.minife.nz=4", "workload.minife.iterations=2"]);
        let names: Vec<&str> = kernels(&p).iter().map(|k| k.name).collect();
        let dot = ["minife-memset", "minife-dot", "minife-dot-final"];
        let mut want = vec!["minife-waxpby", "minife-matvec", "minife-waxpby"];
        want.extend(dot);
        want.extend(["minife-waxpby", "minife-matvec"]); // k = 1: p = r
        want.extend(dot);
        want.extend(["minife-waxpby", "minife-waxpby"]);
        want.extend(dot); // k = 2: rtrans = dot(r, r), p = r + beta p
        want.extend(["minife-waxpby", "minife-matvec"]);
        want.extend(dot);
        want.extend(["minife-waxpby", "minife-waxpby"]);
        assert_eq!(names, want);
        // The port's launch sizes, not workload.threads_per_cta.
        let ks = kernels(&p);
        let shape: Vec<(u64, u32)> = ks[..6].iter().map(|k| (k.threads, k.threads_per_cta)).collect();
        assert_eq!(shape, [(256, 256), (256, 256), (256, 256), (1024, 512), (512, 512), (1024, 1024)]);
        // cols, coefs (27 x pitch 256), b, x, r, p, Ap, the 1,024 partial sums.
        let bytes: Vec<u64> = p.buffers.iter().map(|b| b.bytes).collect();
        assert_eq!(bytes, [27 * 256 * 4, 27 * 256 * 8, 2048, 2048, 2048, 2048, 2048, 8192]);
        let mp = MinifeParams { nx: 8, ny: 8, nz: 4, iterations: 2, cuda: true };
        assert_eq!(mp.footprint(), bytes.iter().sum::<u64>() as u128);
    }

    #[test]
    fn ell_matvec_coalesces_each_entry_and_skips_padding() {
        let p = cuda(&["workload.minife.nx=8", "workload.minife.ny=8", "workload.minife.nz=4", "workload.minife.iterations=1"]);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        let (cols, coefs, pv, ap) = (b[0], b[1], b[5], b[6]);
        let g = Geometry { n: [8, 8, 4] };
        // Warp 2: rows 64..96 (z = 1, every y): entry j's indices are one 128 B line.
        let mut w = warps(&p, 1).swap_remove(2);
        let mut s = [0; MAX_LANES];
        let mut ops = vec![];
        loop {
            match w.next(&mut s) {
                Op::Exit => break,
                op => ops.push((op, addrs(op, &s))),
            }
        }
        for j in 0..27u64 {
            let idx = ops.iter().position(|(_, a)| a.first() == Some(&(cols + (64 + j * 256) * 4))).expect("entry j's indices");
            assert_eq!(ops[idx].1, (64..96).map(|r| cols + (r + j * 256) * 4).collect::<Vec<_>>());
            assert_eq!(ops[idx + 1].0, Op::Wait);
            let rows: Vec<u64> = (64..96).filter(|&r| g.ell_column(r, j).is_some()).collect();
            assert_eq!(ops[idx + 2].1, rows.iter().map(|&r| coefs + (r + j * 256) * 8).collect::<Vec<_>>());
            assert_eq!(ops[idx + 3].1, rows.iter().map(|&r| pv + g.ell_column(r, j).unwrap() * 8).collect::<Vec<_>>());
        }
        let (last, lanes) = ops.last().unwrap();
        assert!(matches!(last, Op::Mem { kind: MemKind::Store, .. }));
        assert_eq!(*lanes, (64..96).map(|r| ap + r * 8).collect::<Vec<_>>());
        // Warp 0 holds rows of z = 0 only: each lacks at least the 9 neighbours below it, so
        // entries 18.. are padding in every lane, and only the index load and its wait issue.
        let shape = op_shape(&all_ops(&mut warps(&p, 1)[0]));
        assert_eq!(shape, format!("{}{}m", "mwmmwc".repeat(18), "mw".repeat(9)));
    }

    #[test]
    fn dot_reduces_its_cta_over_four_barriers_and_the_final_kernel_over_five() {
        // 4 x 4 x 4 = 64 elements: one 512-thread CTA; lanes past 64 load nothing.
        let p = cuda(&["workload.minife.nx=4", "workload.minife.ny=4", "workload.minife.nz=4"]);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        let (r, d) = (b[4], b[7]);
        // Launch 3 clears the partial sums, 4 is dot(r, r), 5 the final reduction.
        assert_eq!(mem_ops(&mut warps(&p, 3)[16]), [(MemKind::Store, (512..544).map(|i| d + 8 * i).collect())]);
        let mut ws = warps(&p, 4);
        assert_eq!(ws.len(), 16);
        let shapes: Vec<String> = ws.iter_mut().map(|w| op_shape(&all_ops(w))).collect();
        // Warp 0: loads r twice (x.coefs and y.coefs), waits, adds; four barriers, each followed by
        // its step; five warp-synchronous steps; thread 0 stores the CTA's sum.
        assert_eq!(shapes[0], format!("mmwc{}{}m", "bc".repeat(4), "c".repeat(5)));
        assert_eq!(shapes[1], "mmwcbcbcbcb"); // threads 32..64: steps for t < 256, 128, 64
        assert_eq!(shapes[2], "bcbcbb"); // threads 64..96: no element; steps for t < 256, 128
        assert_eq!(shapes[4], "bcbbb");
        assert_eq!(shapes[8], "bbbb");
        assert_eq!(mem_ops(&mut warps(&p, 4)[0])[2], (MemKind::Store, vec![d]));
        assert_eq!(
            mem_ops(&mut warps(&p, 4)[1])[..2],
            [(MemKind::Load, (32..64).map(|i| r + 8 * i).collect::<Vec<_>>()), (MemKind::Load, (32..64).map(|i| r + 8 * i).collect())]
        );
        // The final kernel: one CTA of 1,024 threads, each loads a partial sum; five barriers.
        let mut fin = warps(&p, 5);
        assert_eq!(fin.len(), 32);
        assert_eq!(op_shape(&all_ops(&mut fin[0])), format!("mw{}{}m", "bc".repeat(5), "c".repeat(5)));
        assert_eq!(op_shape(&all_ops(&mut fin[16])), "mwbbbbb");
        assert_eq!(mem_ops(&mut fin[31]), [(MemKind::Load, (992..1024).map(|i| d + 8 * i).collect())]);
    }

    #[test]
    fn grid_stride_beyond_the_port_grid_caps() {
        // 1,024 CTAs of 512 threads cover 524,288 elements: with 64 x 64 x 256 = 1 M the dot's
        // threads stride over two elements each.
        let p = cuda(&["workload.minife.nx=64", "workload.minife.ny=64", "workload.minife.nz=256", "workload.minife.iterations=1"]);
        let k = kernels(&p);
        assert_eq!((k[4].threads, k[4].threads_per_cta), (524_288, 512));
        let r = p.buffers[4].base;
        let loads: Vec<u64> = mem_ops(&mut warps(&p, 4)[3]).iter().filter(|(k, _)| *k == MemKind::Load).map(|(_, a)| a[0]).collect();
        assert_eq!(loads, [r + 96 * 8, r + 96 * 8, r + (96 + 524_288) * 8, r + (96 + 524_288) * 8]);
        // waxpby and matvec: 32,768 CTAs of 256 threads = 8,388,608 > 1 M elements: one each.
        assert_eq!((k[0].threads, k[1].threads), (1 << 20, 1 << 20));
    }

    #[test]
    fn cuda_port_refuses_a_gpu_too_small_for_its_final_cta() {
        let cfg =
            crate::config::resolve(&[] as &[crate::config::Source], &["workload.kind=minife".into(), "gpu.max_warps_per_sm=16".into()]);
        let e = cfg.expect_err("1,024 threads need 32 warps");
        assert!(e.to_string().contains("workload.minife.cuda"), "{e}");
        let ok = crate::config::resolve(
            &[] as &[crate::config::Source],
            &[
                "workload.kind=minife".into(),
                "gpu.max_warps_per_sm=16".into(),
                "workload.minife.cuda=false".into(),
                "workload.threads_per_cta=256".into(),
            ],
        );
        assert!(ok.is_ok());
    }

    #[test]
    fn reference_dot_reduces_over_log2_warp_size_steps_and_the_host_copies_the_matrix_x_and_r() {
        use crate::workload::Op;
        let p = program(&[
            "workload.kind=minife",
            "workload.minife.nx=2",
            "workload.minife.ny=2",
            "workload.minife.nz=2",
            "workload.minife.iterations=1",
            "workload.minife.cuda=false",
        ]);
        // dot(r, r): the product (compute_cycles 4), then the warp's tree of log2(32) = 5 steps: 20 cycles.
        let computes: Vec<Op> = all_ops(&mut warps(&p, 0)[0]).into_iter().filter(|o| matches!(o, Op::Compute(_))).collect();
        assert_eq!(computes, [Op::Compute(4), Op::Compute(20)]);
        // 8 rows, each coupled to all 8 (nnz 64): offsets 9 x 4 = 36, columns 64 x 4 = 256, values 64 x 8 = 512,
        // x and r 8 x 8 = 64 each.
        assert_eq!(p.host.input_bytes, Some(36 + 256 + 512 + 64 + 64));
    }

    #[test]
    fn each_dot_cta_stores_its_own_partial_sum_and_the_host_copies_the_ell_matrix_b_and_x() {
        // 16 x 8 x 8 = 1024 rows: dot_kernel runs 2 CTAs of 512 threads (16 warps); CTA 1's first warp
        // stores partial 1 (d + 8).
        let p = program(&["workload.kind=minife", "workload.minife.nx=16", "workload.minife.ny=8", "workload.minife.nz=8"]);
        let names: Vec<&str> = kernels(&p).iter().map(|k| k.name).collect();
        assert_eq!(names[4], "minife-dot");
        let d = p.buffers[7].base;
        assert_eq!(mem_ops(&mut warps(&p, 4)[16]).last().unwrap(), &(MemKind::Store, vec![d + 8]));
        // Pitch 1024: columns 27 x 1024 x 4 = 110,592, values 27 x 1024 x 8 = 221,184; b and x 1024 x 8 = 8192 each.
        assert_eq!(p.host.input_bytes, Some(110_592 + 221_184 + 2 * 8192));
    }

    #[test]
    fn waxpby_loads_x_before_y_in_both_ports() {
        // The reference port, iteration 1: dot(r, r), then p = r + beta p: r (buffer 4) then p (5), into p.
        let p = program(&[
            "workload.kind=minife",
            "workload.minife.nx=32",
            "workload.minife.ny=1",
            "workload.minife.nz=1",
            "workload.minife.cuda=false",
        ]);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        let rows = |m: u64| (0..32).map(|i| m + 8 * i).collect::<Vec<u64>>();
        assert_eq!(mem_ops(&mut warps(&p, 1)[0]), [(MemKind::Load, rows(b[4])), (MemKind::Load, rows(b[5])), (MemKind::Store, rows(b[5]))]);
        // The CUDA port's r = b - Ap (kernel 2): b (buffer 2), then Ap (6), into r (4).
        let p = program(&["workload.kind=minife", "workload.minife.nx=32", "workload.minife.ny=1", "workload.minife.nz=1"]);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        assert_eq!(mem_ops(&mut warps(&p, 2)[0]), [(MemKind::Load, rows(b[2])), (MemKind::Load, rows(b[6])), (MemKind::Store, rows(b[4]))]);
    }

    #[test]
    fn ell_entries_are_a_pitch_apart_when_the_rows_are_not_a_multiple_of_32() {
        // 3 x 3 x 3 = 27 rows, pitch 32: entry j of row r is index r + 32 j, so warp 0's index loads
        // (27 lanes each) start at cols + 4 x 32 j for j = 0..27.
        let p = cuda(&["workload.minife.nx=3", "workload.minife.ny=3", "workload.minife.nz=3", "workload.minife.iterations=1"]);
        let cols = p.buffers[0];
        let firsts: Vec<u64> =
            mem_ops(&mut warps(&p, 1)[0]).iter().map(|(_, a)| a[0]).filter(|&a| a >= cols.base && a < cols.base + cols.bytes).collect();
        assert_eq!(firsts, (0..27).map(|j| cols.base + 4 * 32 * j).collect::<Vec<_>>());
        // miniFE's matvec launches whole CTAs, min(32768, ceil(27 / 256)) = 1 of 256 threads: warps 1..8
        // have no row and exit at once.
        let matvec = &kernels(&p)[1];
        assert_eq!((matvec.name, matvec.threads), ("minife-matvec", 256));
        let ws = warps(&p, 1);
        assert_eq!(ws.len(), 8);
        for mut w in ws.into_iter().skip(1) {
            assert!(all_ops(&mut w).is_empty(), "no op before its Exit");
        }
    }
}
