//! The application workloads of Allen's UVM analysis (seed uvm-driver =
//! uvm-analysis-allen-thesis22, §3.3-§5.1: Tables 3.1, 4.1, 5.1, Fig. 5.1):
//! `cufft`, `tealeaf`, `hpgmg` and `cusparse` as kernel models. The thesis
//! gives only their names, sources and fault statistics, so the kernels below
//! are models of the named codes' access patterns; what is ASSUMED is said
//! per generator. All run on the element-wise engine (`grid.rs`) except the
//! SpMV of `cusparse`, which is `spmv`'s CSR-vector kernel.
//!
//! `cufft`: forward then inverse 1D FFT of `n = n1 * n2` complex floats (8 B),
//! out of place, as a four-step FFT: view the signal as n1 rows of n2 points
//! (element (i, j) at `i * n2 + j`); a column pass does the n2 column FFTs of
//! length n1 (lane i of a warp at `i * n2 + j`: every lane `8 * n2` bytes from
//! the last, uncoalesced, a page per lane once `n2 >= 512`, and a column spans
//! `8 * n1 * n2` bytes = every VA block of the array), stores in the same
//! layout to the work array; a row pass does the n1 row FFTs of length n2
//! (lanes contiguous) from the work array into the output. Forward: signal ->
//! work -> spectrum; inverse: spectrum -> work -> result. One thread per
//! point, load, wait, `log2(length) * compute_cycles`, store. ASSUMED: the
//! twiddle factors are computed in registers (no table); the final transpose
//! of the four-step is folded into the row pass (it stores where it loads:
//! same pages, in order); cuFFT's radix kernels load several points per
//! thread (same lines and pages per warp).
//!
//! `tealeaf`: UK-MAC TeaLeaf's CG solver (TeaLeaf_CUDA, no preconditioner) on
//! an nx x ny grid of f64, one thread per cell, borders clamped (TeaLeaf's
//! halo cells are not modelled). Arrays: density, energy, u, u0, kx, ky, r, p,
//! w. Init: u = u0 = energy * density; kx, ky from density at (x, y) and
//! (x-1, y) / (x, y-1); r = u0 - A u and p = r (A u: 5-point u with kx at x,
//! x+1 and ky at y, y+1). Then per iteration: w = A p; u += alpha p, r -=
//! alpha w; p = r + beta p. ASSUMED: the dot products reduce in shared memory
//! and registers (their per-block partial sums, a few KiB, are not modelled).
//!
//! `hpgmg`: NVIDIA's HPGMG-FV as a geometric multigrid V-cycle on an n^3 f64
//! grid (constant-coefficient 7-point Poisson), levels n, n/2, ..., `bottom`.
//! Per level arrays u (solution), f (right-hand side) and, above the bottom,
//! r (residual). V-cycle: per level from the finest, `smooths` GSRB smooths
//! (each a red and a black pass: 7-point u and f, store u), the residual (r =
//! f - A u), and the restriction (one thread per coarse cell: the 8 fine r
//! cells at stride 2, `Index::Affine`; stores the coarse u = 0 and f); at the
//! bottom `bottom_smooths` smooths; then per level from the coarsest above the
//! bottom, piecewise-constant interpolation (u += coarse u at (x/2, y/2, z/2),
//! `Index::Coarse`) and `smooths` smooths. `cycles` V-cycles. ASSUMED /
//! simplified: HPGMG-FV decomposes each level into boxes with ghost zones
//! and its variable-coefficient operator also reads alpha, beta_i/j/k and
//! Dinv; here each level is one lexicographic array per vector, borders
//! clamped; the colour test of a pass is not modelled (every lane loads and
//! stores, as both colours share every line); the bottom solver (BiCGStab in
//! HPGMG) is modelled as smooths.
//!
//! `cusparse`: a dense n x n float matrix (row-major) converted to CSR with a
//! fixed `nnz_per_row`, then y = A x with that CSR. Kernels: nnz count (a warp
//! per row reads the row in warp-wide coalesced chunks, one chunk per loop
//! iteration, and stores the row's count), a scan (a thread per row: count
//! in, row_ptr[r + 1] out), dense-to-CSR (a warp per row reads row_ptr[r],
//! re-reads the row, then stores its column indices and values in warp-wide
//! chunks), and `spmv`'s CSR-vector kernel on those arrays (same band +
//! random columns as `spmv` with these parameters). ASSUMED: cuSPARSE's
//! matrices are column-major and its scan is multi-pass; row-major and one
//! pass here (the brief of issue #4); the conversion writes a row's entries
//! after scanning it; lanes of the count store all write the row's word.
//!
//! First touch (lockstep), every generator: the buffers in allocation order,
//! each in ascending pages, except `cusparse`'s dense matrix (each row's
//! first 4 KiB, rows ascending, then each row's next 4 KiB, ...) and x (the
//! band pages near each row, ascending, mixed with random columns' pages).

use super::grid::{Array, GridKernel, Index, Step};
use super::spmv::{self, SpmvParams};
use super::{check, Buffer, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};
use crate::config::Config;

section! {
    /// Parameters of `cufft` (seed uvm-driver Table 5.1 "cufft": forward and inverse cuFFT).
    pub struct CufftParams {
        /// Rows of the four-step decomposition: the column FFTs' length (points).
        pub n1: u64 = 512,
        /// Columns: the row FFTs' length; the column pass's lanes are 8 * n2 bytes apart.
        pub n2: u64 = 512,
    }
}

section! {
    /// Parameters of `tealeaf` (seed uvm-driver Table 5.1 "tealeaf": UK-MAC TeaLeaf CG).
    pub struct TealeafParams {
        /// Grid width (cells along x, contiguous in memory).
        pub nx: u64 = 512,
        /// Grid height (cells along y).
        pub ny: u64 = 512,
        /// CG iterations (three kernels each), after the three init kernels.
        pub iterations: u32 = 3,
    }
}

section! {
    /// Parameters of `hpgmg` (seed uvm-driver Table 5.1 "hpgmg": NVIDIA's HPGMG-FV).
    pub struct HpgmgParams {
        /// Cells along each edge of the finest grid (a power of two).
        pub n: u64 = 64,
        /// Cells along each edge of the coarsest (bottom) grid (a power of two, at most n).
        pub bottom: u64 = 4,
        /// GSRB smooths per level on the way down and on the way up (each a red and a black pass).
        pub smooths: u32 = 1,
        /// GSRB smooths on the bottom level (standing in for HPGMG's bottom solver).
        pub bottom_smooths: u32 = 4,
        /// V-cycles.
        pub cycles: u32 = 2,
    }
}

section! {
    /// Parameters of `cusparse` (seed uvm-driver Table 5.1 "cusparse": dense to CSR, then a sparse product).
    pub struct CusparseParams {
        /// Rows (= columns) of the matrix; a multiple of gpu.warp_size.
        pub n: u64 = 2048,
        /// Non-zeros in every row; a multiple of gpu.warp_size, at most n.
        pub nnz_per_row: u32 = 64,
        /// Half-width of the band around the diagonal, in columns (as `spmv`).
        pub band_cols: u64 = 64,
        /// Fraction of the entries inside the band, the rest uniform random columns (as `spmv`), 0 to 1.
        pub band_fraction: f64 = 0.9,
    }
}

impl CufftParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "n1", self.n1, 2, 1 << 20)?;
        check(p, "n2", self.n2, 2, 1 << 20)?;
        if self.n1 * self.n2 > 1 << 32 {
            return Err((format!("{p}.n2"), format!("n1 * n2 must be at most 2^32 points, got {}", self.n1 * self.n2)));
        }
        Ok(())
    }

    /// Signal, work, spectrum and result, 8 B per point each.
    pub fn footprint(&self) -> u128 {
        4 * 8 * self.n1 as u128 * self.n2 as u128
    }
}

impl TealeafParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "nx", self.nx, 1, 1 << 20)?;
        check(p, "ny", self.ny, 1, 1 << 20)?;
        check(p, "iterations", self.iterations as u64, 1, 10_000)
    }

    /// Nine f64 arrays of nx * ny.
    pub fn footprint(&self) -> u128 {
        9 * 8 * self.nx as u128 * self.ny as u128
    }
}

impl HpgmgParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "n", self.n, 1, 1 << 13)?;
        check(p, "bottom", self.bottom, 1, self.n)?;
        for (name, v) in [("n", self.n), ("bottom", self.bottom)] {
            if !v.is_power_of_two() {
                return Err((format!("{p}.{name}"), format!("must be a power of two, got {v}")));
            }
        }
        check(p, "smooths", self.smooths as u64, 1, 100)?;
        check(p, "bottom_smooths", self.bottom_smooths as u64, 1, 1000)?;
        check(p, "cycles", self.cycles as u64, 1, 1000)
    }

    /// Edge of each level's grid, finest first.
    fn levels(&self) -> Vec<u64> {
        std::iter::successors(Some(self.n), |&m| (m > self.bottom).then_some(m / 2)).collect()
    }

    /// Per level u and f, plus r above the bottom: 8 B per cell each.
    pub fn footprint(&self) -> u128 {
        let l = self.levels();
        l.iter().enumerate().map(|(i, &m)| if i + 1 < l.len() { 3 } else { 2 } * 8 * (m as u128).pow(3)).sum()
    }
}

impl CusparseParams {
    pub fn validate(&self, p: &str, warp_size: u32) -> Result<(), (String, String)> {
        check(p, "n", self.n, warp_size as u64, 1 << 20)?;
        check(p, "nnz_per_row", self.nnz_per_row as u64, warp_size as u64, self.n)?;
        for (name, v) in [("n", self.n), ("nnz_per_row", self.nnz_per_row as u64)] {
            if v % warp_size as u64 != 0 {
                return Err((format!("{p}.{name}"), format!("must be a multiple of gpu.warp_size ({warp_size}), got {v}")));
            }
        }
        check(p, "band_cols", self.band_cols, 0, 1 << 30)?;
        if !(0.0..=1.0).contains(&self.band_fraction) {
            return Err((format!("{p}.band_fraction"), format!("must be between 0 and 1, got {}", self.band_fraction)));
        }
        Ok(())
    }

    /// Dense matrix, per-row counts, row_ptr (n + 1), column indices, values, x, y: 4 B each.
    pub fn footprint(&self) -> u128 {
        let (n, nnz) = (self.n as u128, self.n as u128 * self.nnz_per_row as u128);
        4 * (n * n + n + (n + 1) + 2 * nnz + 2 * n)
    }
}

fn arrays(bufs: &[Buffer], elem_bytes: u32) -> Vec<Array> {
    bufs.iter().map(|b| Array { base: b.base, elem_bytes }).collect()
}

fn launch(name: &'static str, k: GridKernel, w: &WorkloadConfig) -> KernelSpec {
    KernelSpec { name, threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) }
}

/// One thread per element of `dims`.
fn grid(dims: [u64; 3], arrays: Vec<Array>, body: Vec<Step>) -> GridKernel {
    GridKernel::new(dims, dims.iter().product(), 1, arrays, body)
}

pub(super) fn build_cufft(p: &CufftParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let (n1, n2) = (p.n1, p.n2);
    let [signal, work, spectrum, result] = [(); 4].map(|_| va.alloc(n1 * n2 * 8, page));
    let pass = |name, src: Buffer, dst: Buffer, column: bool| {
        // Column pass: x = row i (lanes), y = column j, element i * n2 + j. Row pass: x = j, y = i.
        let (dims, at, len) = if column { ([n1, n2, 1], Index::affine(0, n2, 1), n1) } else { ([n2, n1, 1], Index::HERE, n2) };
        let body = vec![Step::load(0, at), Step::Wait, Step::Compute(len.ilog2().max(1) * w.compute_cycles), Step::store(1, at)];
        launch(name, grid(dims, arrays(&[src, dst], 8), body), w)
    };
    let kernels = vec![
        pass("cufft-fwd-columns", signal, work, true),
        pass("cufft-fwd-rows", work, spectrum, false),
        pass("cufft-inv-columns", spectrum, work, true),
        pass("cufft-inv-rows", work, result, false),
    ];
    (kernels, signal.bytes)
}

pub(super) fn build_tealeaf(p: &TealeafParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    const NAMES: [&str; 9] = ["density", "energy", "u", "u0", "kx", "ky", "r", "p", "w"];
    let bufs: Vec<Buffer> = NAMES.iter().map(|_| va.alloc(p.nx * p.ny * 8, page)).collect();
    let a = |name: &str| NAMES.iter().position(|n| *n == name).unwrap() as u8;
    let (density, energy, u, u0, kx, ky, r, pp, ww) =
        (a("density"), a("energy"), a("u"), a("u0"), a("kx"), a("ky"), a("r"), a("p"), a("w"));
    let here = Index::HERE;
    let c = w.compute_cycles;
    // A v: the 5-point v with kx at x and x+1, ky at y and y+1 (TeaLeaf's smvp).
    let apply = |v: u8| {
        let mut s: Vec<Step> =
            [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)].iter().map(|&(dx, dy)| Step::load(v, Index::at(dx, dy, 0))).collect();
        s.extend([Step::load(kx, here), Step::load(kx, Index::at(1, 0, 0)), Step::load(ky, here), Step::load(ky, Index::at(0, 1, 0))]);
        s
    };
    let k = |name, body: Vec<Step>| launch(name, grid([p.nx, p.ny, 1], arrays(&bufs, 8), body), w);
    let tail = |stores: &[u8]| {
        let mut s = vec![Step::Wait, Step::Compute(c)];
        s.extend(stores.iter().map(|&x| Step::store(x, here)));
        s
    };
    let mut kernels = vec![
        k("tealeaf-init-u", [vec![Step::load(density, here), Step::load(energy, here)], tail(&[u, u0])].concat()),
        k(
            "tealeaf-init-k",
            [
                vec![Step::load(density, here), Step::load(density, Index::at(-1, 0, 0)), Step::load(density, Index::at(0, -1, 0))],
                tail(&[kx, ky]),
            ]
            .concat(),
        ),
        k("tealeaf-init-r", [apply(u), vec![Step::load(u0, here)], tail(&[r, pp])].concat()),
    ];
    for _ in 0..p.iterations {
        kernels.push(k("tealeaf-w", [apply(pp), tail(&[ww])].concat()));
        kernels.push(k("tealeaf-ur", [[u, pp, r, ww].map(|x| Step::load(x, here)).to_vec(), tail(&[u, r])].concat()));
        kernels.push(k("tealeaf-p", [vec![Step::load(r, here), Step::load(pp, here)], tail(&[pp])].concat()));
    }
    (kernels, 2 * bufs[0].bytes)
}

pub(super) fn build_hpgmg(p: &HpgmgParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let levels = p.levels();
    let last = levels.len() - 1;
    // Per level [u, f, r]; the bottom level has no r (a residual is never taken there).
    let bufs: Vec<Vec<Buffer>> = levels
        .iter()
        .enumerate()
        .map(|(l, &m)| (0..if l < last { 3 } else { 2 }).map(|_| va.alloc(m * m * m * 8, page)).collect())
        .collect();
    let c = w.compute_cycles;
    let cube = |m: u64| [m, m, m];
    let seven = |v: u8| -> Vec<Step> {
        [(0, 0, 0), (-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1), (0, 0, 1)]
            .iter()
            .map(|&(dx, dy, dz)| Step::load(v, Index::at(dx, dy, dz)))
            .collect()
    };
    let here = Index::HERE;
    // Arrays of a level's kernels: 0 = u, 1 = f, 2 = r.
    let smooth = |l: usize, passes: u32, out: &mut Vec<KernelSpec>| {
        for _ in 0..passes {
            let body = [seven(0), vec![Step::load(1, here), Step::Wait, Step::Compute(c), Step::store(0, here)]].concat();
            out.push(launch("hpgmg-smooth", grid(cube(levels[l]), arrays(&bufs[l][..2], 8), body), w));
        }
    };
    let mut cycle = vec![];
    for l in 0..last {
        let m = levels[l];
        smooth(l, 2 * p.smooths, &mut cycle);
        let body = [seven(0), vec![Step::load(1, here), Step::Wait, Step::Compute(c), Step::store(2, here)]].concat();
        cycle.push(launch("hpgmg-residual", grid(cube(m), arrays(&bufs[l], 8), body), w));
        // Coarse cell (x, y, z) averages fine r at (2x + dx, 2y + dy, 2z + dz); then coarse u = 0 and f.
        let mut body: Vec<Step> = (0..8u64)
            .map(|d| {
                let c0 = (d & 1) + (d >> 1 & 1) * m + (d >> 2) * m * m;
                Step::load(0, Index::Affine { c0, cx: 2, cy: 2 * m, ydiv: 1, cz: 2 * m * m })
            })
            .collect();
        body.extend([Step::Wait, Step::Compute(c), Step::store(1, here), Step::store(2, here)]);
        let arr = arrays(&[bufs[l][2], bufs[l + 1][0], bufs[l + 1][1]], 8);
        cycle.push(launch("hpgmg-restrict", grid(cube(m / 2), arr, body), w));
    }
    smooth(last, 2 * p.bottom_smooths, &mut cycle);
    for l in (0..last).rev() {
        let body = vec![Step::load(0, here), Step::load(1, Index::Coarse { div: 2 }), Step::Wait, Step::Compute(c), Step::store(0, here)];
        cycle.push(launch("hpgmg-interpolate", grid(cube(levels[l]), arrays(&[bufs[l][0], bufs[l + 1][0]], 8), body), w));
        smooth(l, 2 * p.smooths, &mut cycle);
    }
    let kernels = (0..p.cycles).flat_map(|_| cycle.iter().cloned()).collect();
    // The host initialises the finest u and f.
    (kernels, bufs[0][0].bytes + bufs[0][1].bytes)
}

pub(super) fn build_cusparse(
    p: &CusparseParams,
    w: &WorkloadConfig,
    cfg: &Config,
    page: u64,
    va: &mut VaAllocator,
) -> (Vec<KernelSpec>, u64) {
    let (n, nnz) = (p.n, p.nnz_per_row as u64);
    let ws = cfg.gpu.warp_size as u64;
    let dense = va.alloc(n * n * 4, page);
    let (counts, row_ptr) = (va.alloc(n * 4, page), va.alloc((n + 1) * 4, page));
    let (col, val) = (va.alloc(n * nnz * 4, page), va.alloc(n * nnz * 4, page));
    let (x, y) = (va.alloc(n * 4, page), va.alloc(n * 4, page));
    let c = w.compute_cycles;
    // A warp per row: x = lane, y = row. Chunk k of the row: elements k * ws + lane.
    let rows = [ws, n, 1];
    let row_word = Index::affine(0, 0, 1);
    let scan_row = |a: u8| (0..n / ws).flat_map(move |k| [Step::load(a, Index::affine(k * ws, 1, n)), Step::Wait, Step::Compute(c)]);
    let mut body: Vec<Step> = scan_row(0).collect();
    body.extend([Step::Compute(ws.ilog2() * c), Step::store(1, row_word)]);
    let count = launch("cusparse-nnz", GridKernel::new(rows, n * ws, 1, arrays(&[dense, counts], 4), body), w);
    let body = vec![Step::load(0, Index::HERE), Step::Wait, Step::Compute(c), Step::store(1, Index::affine(1, 1, 0))];
    let scan = launch("cusparse-scan", grid([n, 1, 1], arrays(&[counts, row_ptr], 4), body), w);
    let mut body = vec![Step::load(0, row_word), Step::Wait];
    body.extend(scan_row(1));
    for k in 0..nnz / ws {
        body.extend([Step::store(2, Index::affine(k * ws, 1, nnz)), Step::store(3, Index::affine(k * ws, 1, nnz))]);
    }
    let convert = launch("cusparse-dense2csr", GridKernel::new(rows, n * ws, 1, arrays(&[row_ptr, dense, col, val], 4), body), w);
    let sp = SpmvParams {
        rows: n,
        nnz_per_row: p.nnz_per_row,
        band_cols: p.band_cols,
        band_fraction: p.band_fraction,
        value_bytes: 4,
        warp_per_row: true,
    };
    let k = spmv::kernel_on(&sp, [row_ptr, col, val, x, y], w, cfg);
    let product =
        KernelSpec { name: "cusparse-spmv", threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Spmv(Box::new(k)) };
    (vec![count, scan, convert, product], dense.bytes + x.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::testutil::*;
    use crate::workload::{MemKind, Op, Program};

    fn names(p: &Program) -> Vec<&'static str> {
        kernels(p).iter().map(|k| k.name).collect()
    }

    fn bytes(p: &Program) -> u128 {
        p.buffers.iter().map(|b| b.bytes as u128).sum()
    }

    /// Buffers in allocation order, and which of them are touched in ascending pages.
    fn touch_order(p: &Program) -> (Vec<usize>, Vec<bool>) {
        let ft = first_touch(p);
        let mut order: Vec<usize> = ft.iter().map(|&(b, _)| b).collect();
        order.dedup();
        let asc = (0..p.buffers.len())
            .map(|b| {
                let pages: Vec<u64> = ft.iter().filter(|(x, _)| *x == b).map(|&(_, pg)| pg).collect();
                pages.windows(2).all(|w| w[0] < w[1]) && pages.len() as u64 == p.buffers[b].bytes.div_ceil(4096)
            })
            .collect();
        (order, asc)
    }

    #[test]
    fn cufft_column_pass_lanes_are_a_row_apart_and_row_pass_is_contiguous() {
        let p = program(&["workload.kind=cufft", "workload.cufft.n1=64", "workload.cufft.n2=512"]);
        assert_eq!(bytes(&p), CufftParams { n1: 64, n2: 512 }.footprint());
        assert_eq!(names(&p), ["cufft-fwd-columns", "cufft-fwd-rows", "cufft-inv-columns", "cufft-inv-rows"]);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        // Column pass, warp 3: column j = 1 (2 warps of 32 rows per column), rows 32..64: lane i at 8 (i * 512 + 1).
        let ops = mem_ops(&mut warps(&p, 0)[3]);
        assert_eq!(ops[0], (MemKind::Load, (32..64).map(|i| b[0] + 8 * (i * 512 + 1)).collect()));
        assert_eq!(ops[1], (MemKind::Store, (32..64).map(|i| b[1] + 8 * (i * 512 + 1)).collect()));
        // Row pass, warp 17: row i = 1 (16 warps per 512-point row), points 32..64 of it.
        let ops = mem_ops(&mut warps(&p, 1)[17]);
        assert_eq!(ops[0], (MemKind::Load, (32..64).map(|j| b[1] + 8 * (512 + j)).collect()));
        assert_eq!(ops[1], (MemKind::Store, (32..64).map(|j| b[2] + 8 * (512 + j)).collect()));
        // The inverse reads the spectrum and writes the result.
        assert_eq!(mem_ops(&mut warps(&p, 2)[0])[0].1[0], b[2]);
        assert_eq!(mem_ops(&mut warps(&p, 3)[0])[1].1[0], b[3]);
        assert_eq!(touch_order(&p), (vec![0, 1, 2, 3], vec![true; 4]));
    }

    #[test]
    fn tealeaf_kernels_read_the_cg_arrays() {
        let p = program(&["workload.kind=tealeaf", "workload.tealeaf.nx=512", "workload.tealeaf.ny=8", "workload.tealeaf.iterations=2"]);
        assert_eq!(bytes(&p), TealeafParams { nx: 512, ny: 8, iterations: 2 }.footprint());
        let it = ["tealeaf-w", "tealeaf-ur", "tealeaf-p"];
        assert_eq!(names(&p), [&["tealeaf-init-u", "tealeaf-init-k", "tealeaf-init-r"][..], &it, &it].concat());
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        let (density, u, u0, kx, ky, r, pp, w) = (b[0], b[2], b[3], b[4], b[5], b[6], b[7], b[8]);
        let e = |x: u64, y: u64| 8 * (y * 512 + x);
        // Warp 16 = row y 1, x 0..32; lane 0 = cell (0, 1).
        let lane0 = |k: usize| mem_ops(&mut warps(&p, k)[16]).into_iter().map(|(m, v)| (m, v[0])).collect::<Vec<_>>();
        use MemKind::{Load as L, Store as S};
        assert_eq!(
            lane0(1),
            [(L, density + e(0, 1)), (L, density + e(0, 1)), (L, density + e(0, 0)), (S, kx + e(0, 1)), (S, ky + e(0, 1))]
        );
        let ap = |v: u64| vec![(L, v + e(0, 1)), (L, v + e(0, 1)), (L, v + e(1, 1)), (L, v + e(0, 0)), (L, v + e(0, 2))];
        let k = vec![(L, kx + e(0, 1)), (L, kx + e(1, 1)), (L, ky + e(0, 1)), (L, ky + e(0, 2))];
        assert_eq!(lane0(2), [ap(u), k.clone(), vec![(L, u0 + e(0, 1)), (S, r + e(0, 1)), (S, pp + e(0, 1))]].concat());
        assert_eq!(lane0(3), [ap(pp), k, vec![(S, w + e(0, 1))]].concat());
        assert_eq!(lane0(4), [(L, u + e(0, 1)), (L, pp + e(0, 1)), (L, r + e(0, 1)), (L, w + e(0, 1)), (S, u + e(0, 1)), (S, r + e(0, 1))]);
        assert_eq!(lane0(5), [(L, r + e(0, 1)), (L, pp + e(0, 1)), (S, pp + e(0, 1))]);
        assert_eq!(touch_order(&p), ((0..9).collect(), vec![true; 9]));
    }

    #[test]
    fn hpgmg_v_cycle_restricts_at_stride_two_and_interpolates_from_the_coarse_cell() {
        let hp = HpgmgParams { n: 16, bottom: 4, smooths: 1, bottom_smooths: 2, cycles: 1 };
        let p = program(&["workload.kind=hpgmg", "workload.hpgmg.n=16", "workload.hpgmg.bottom_smooths=2", "workload.hpgmg.cycles=1"]);
        // Levels 16, 8, 4: u, f, r, u, f, r, u, f.
        assert_eq!(p.buffers.len(), 8);
        assert_eq!(bytes(&p), hp.footprint());
        assert_eq!(hp.footprint(), 8 * (3 * 4096 + 3 * 512 + 2 * 64));
        let (sm, res, rst, int) = ("hpgmg-smooth", "hpgmg-residual", "hpgmg-restrict", "hpgmg-interpolate");
        let down = [sm, sm, res, rst];
        let up = [int, sm, sm];
        assert_eq!(names(&p), [&down[..], &down, &[sm; 4], &up, &up].concat());
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        // Restriction 16 -> 8 (kernel 3), warp 5 = coarse cells x 0..8, y 4..8 of plane z 2 (8 per row, 32 per warp).
        // Lane 9 = coarse (1, 5, 2): fine r at (2 + dx, 10 + dy, 4 + dz), d = dx + 2 dy + 4 dz.
        let ops = mem_ops(&mut warps(&p, 3)[5]);
        let fine = |x: u64, y: u64, z: u64| b[2] + 8 * (x + 16 * (y + 16 * z));
        for (d, (_, v)) in (0u64..).zip(&ops[..8]) {
            assert_eq!(v[9], fine(2 + (d & 1), 10 + (d >> 1 & 1), 4 + (d >> 2)));
        }
        let coarse = |x: u64, y: u64, z: u64| 8 * (x + 8 * (y + 8 * z));
        assert_eq!(ops[8], (MemKind::Store, (0..32).map(|i| b[3] + coarse(i % 8, 4 + i / 8, 2)).collect()));
        assert_eq!(ops[9].1[9], b[4] + coarse(1, 5, 2));
        // Smooth on level 1 (kernel 4): the +z neighbour a plane of 64 cells away, then f.
        let ops = mem_ops(&mut warps(&p, 4)[0]);
        assert_eq!(ops[6].1[0], b[3] + 8 * 64);
        assert_eq!(ops[7].1[0], b[4]);
        // Interpolation 8 -> 16 (kernel 15): lane 5 of warp 9 = fine (5, 2, 1) (16 per row): coarse (2, 1, 0).
        let ops = mem_ops(&mut warps(&p, 15)[9]);
        assert_eq!(ops[0].1[5], b[0] + 8 * (5 + 16 * (2 + 16)));
        assert_eq!(ops[1].1[5], b[3] + coarse(2, 1, 0));
        assert_eq!(ops[2].1[5], b[0] + 8 * (5 + 16 * (2 + 16)));
        assert_eq!(touch_order(&p), ((0..8).collect(), vec![true; 8]));
    }

    #[test]
    fn hpgmg_on_a_bottom_sized_grid_only_smooths() {
        let p = program(&["workload.kind=hpgmg", "workload.hpgmg.n=4", "workload.hpgmg.cycles=3"]);
        assert_eq!(p.buffers.len(), 2);
        assert_eq!(names(&p), ["hpgmg-smooth"; 3 * 8]);
    }

    #[test]
    fn cusparse_scans_the_dense_rows_then_writes_and_multiplies_the_csr() {
        let cp = CusparseParams { n: 2048, nnz_per_row: 64, band_cols: 64, band_fraction: 0.9 };
        let p = program(&["workload.kind=cusparse"]);
        assert_eq!(bytes(&p), cp.footprint());
        assert_eq!(names(&p), ["cusparse-nnz", "cusparse-scan", "cusparse-dense2csr", "cusparse-spmv"]);
        let b: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        let (dense, counts, row_ptr, col, val) = (b[0], b[1], b[2], b[3], b[4]);
        // nnz: warp 3 = row 3, 64 chunks of 32 floats, then the count.
        let ops = mem_ops(&mut warps(&p, 0)[3]);
        assert_eq!(ops.len(), 65);
        assert_eq!(ops[1].1, (0..32).map(|l| dense + 4 * (3 * 2048 + 32 + l)).collect::<Vec<_>>());
        assert_eq!(ops[64], (MemKind::Store, vec![counts + 12; 32]));
        // scan: thread r writes row_ptr[r + 1].
        let ops = mem_ops(&mut warps(&p, 1)[1]);
        assert_eq!(ops[1], (MemKind::Store, (33..65).map(|r| row_ptr + 4 * r).collect()));
        // dense2csr: row_ptr[3], the row again, then indices and values in 2 chunks of 32.
        let ops = mem_ops(&mut warps(&p, 2)[3]);
        assert_eq!(ops.len(), 1 + 64 + 4);
        assert_eq!(ops[0].1, vec![row_ptr + 12; 32]);
        assert_eq!(ops[65], (MemKind::Store, (0..32).map(|e| col + 4 * (3 * 64 + e)).collect()));
        assert_eq!(ops[68], (MemKind::Store, (32..64).map(|e| val + 4 * (3 * 64 + e)).collect()));
        // SpMV on the same arrays: row pointers, then the row's indices (spmv's own kernel, tested there).
        let ops = mem_ops(&mut warps(&p, 3)[3]);
        assert_eq!(ops[0].1, [row_ptr + 12, row_ptr + 16]);
        assert_eq!(ops[1].1, (0..32).map(|e| col + 4 * (3 * 64 + e)).collect::<Vec<_>>());
    }

    #[test]
    fn cusparse_first_touch() {
        let p = program(&["workload.kind=cusparse", "workload.cusparse.n=2048", "workload.cusparse.band_fraction=1"]);
        let (order, asc) = touch_order(&p);
        assert_eq!(order, (0..7).collect::<Vec<_>>());
        // A dense row is 8 KiB: every row's first page, then every row's second.
        assert!(!asc[0] && asc[1..5].iter().all(|&a| a));
        let dense: Vec<u64> = first_touch(&p).iter().filter(|(b, _)| *b == 0).map(|&(_, pg)| pg).collect();
        assert_eq!(dense, (0..2048).map(|r| 2 * r).chain((0..2048).map(|r| 2 * r + 1)).collect::<Vec<_>>());
    }

    #[test]
    fn cufft_passes_compute_log2_of_their_fft_length() {
        // Column FFTs of n1 = 64 points: log2 = 6; row FFTs of n2 = 512: 9; times compute_cycles (4).
        let p = program(&["workload.kind=cufft", "workload.cufft.n1=64", "workload.cufft.n2=512"]);
        let computes = |k| all_ops(&mut warps(&p, k)[0]).into_iter().filter(|o| matches!(o, Op::Compute(_))).collect::<Vec<_>>();
        assert_eq!([computes(0), computes(1)], [[Op::Compute(24)], [Op::Compute(36)]]);
        // At most 2^32 points: 2^16 x 2^16 is allowed, one more column is not.
        assert!(CufftParams { n1: 1 << 16, n2: 1 << 16 }.validate("c").is_ok());
        assert_eq!(CufftParams { n1: 1 << 16, n2: (1 << 16) + 1 }.validate("c").unwrap_err().0, "c.n2");
    }

    /// The arrays the host initialises (`memcpy_inputs` copies them in).
    #[test]
    fn the_inputs_are_the_arrays_the_host_initialises() {
        let inputs = |sets: &[&str]| program(sets).host.input_bytes;
        // tealeaf: density and energy, 512 x 8 f64 = 32 KiB each.
        assert_eq!(inputs(&["workload.kind=tealeaf", "workload.tealeaf.nx=512", "workload.tealeaf.ny=8"]), Some(2 * 32_768));
        // hpgmg: the finest u and f, 16^3 f64 = 32 KiB each.
        assert_eq!(inputs(&["workload.kind=hpgmg", "workload.hpgmg.n=16"]), Some(2 * 32_768));
        // cusparse: the dense matrix, 2048^2 floats = 16 MiB, and x, 2048 floats = 8 KiB.
        assert_eq!(inputs(&["workload.kind=cusparse"]), Some((16 << 20) + 8192));
    }

    #[test]
    fn cusparse_needs_warp_multiples() {
        let c = CusparseParams { nnz_per_row: 48, ..CusparseParams::default() };
        assert_eq!(c.validate("w", 32).unwrap_err().0, "w.nnz_per_row");
        assert!(c.validate("w", 16).is_ok());
        assert!(HpgmgParams { n: 48, ..HpgmgParams::default() }.validate("h").is_err());
    }
}
