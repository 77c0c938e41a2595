//! `tiled-gemm`: C = A * B for n x n row-major matrices with shared-memory
//! tiles (the CUDA-samples sgemm structure; seed uvm-driver's sgemm is
//! cuBLAS's, which `blas-gemm` models, and seed paged-memory's is Parboil's,
//! which `parboil-sgemm` models). A CTA of tile x tile threads
//! computes one tile of C; CTAs are
//! numbered column tile fastest (`bx = cta % (n/tile)`, `by = cta / (n/tile)`),
//! and thread (tx, ty) = (t % tile, t / tile). For each k-step `k` in
//! 0..n/tile, every thread loads `A[by*tile + ty][k*tile + tx]`, waits for
//! it, loads `B[k*tile + ty][bx*tile + tx]`, waits for it (rows of a tile are
//! contiguous, so a warp reads 32 / tile row segments of tile elements each;
//! each load's value is stored to shared memory right after it in the
//! kernel's PTX, so a warp has one load in flight: docs/workloads.md, "Load
//! order"; before 2026-12-01 the two were in flight together) and
//! meets the CTA at the barrier (`__syncthreads`), computes tile multiply-adds
//! (`tile * compute_cycles` cycles) and meets it again (the tile in shared
//! memory is then free for the next k-step). After the last k-step it stores
//! `C[by*tile + ty][bx*tile + tx]`.
//! The CTA size is tile^2 threads; `workload.threads_per_cta` does not apply.
//!
//! `n` need not be a multiple of `tile` (Allen's sgemm sizes, 29,228 to
//! 47,660, are not multiples of 16): the grid is ceil(n/tile)^2 CTAs, and a
//! thread whose element of A, B or C lies outside the n x n matrix skips that
//! load or store (guards of this model's own: the CUDA-samples kernel has none
//! and requires multiples of its block size), so edge tiles are partial and
//! nothing outside the matrices is touched. It still waits at the barriers
//! and computes.
//!
//! First touch (lockstep): at k-step 0, column tile 0 of A for every row
//! tile, interleaved with row tile 0 of B; then A's column tile 1 and B's
//! row tile 1, and so on (A column-tile by column-tile, B row-major); C
//! row-major at the end.

use super::{check, Buffer, KernelGen, KernelSpec, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;

section! {
    /// Parameters of the shared-memory tiled matrix multiply.
    pub struct GemmParams {
        /// Matrix order (rows = columns of A, B and C); any size: edge tiles are partial when tile does not divide it.
        pub n: u64 = 256,
        /// Tile edge: a CTA of tile x tile threads computes a tile x tile block of C.
        pub tile: u32 = 16,
        /// Bytes per element (4 = sgemm, 8 = dgemm).
        pub element_bytes: u32 = 4,
    }
}

impl GemmParams {
    pub fn validate(&self, p: &str, cfg: &Config) -> Result<(), (String, String)> {
        let (ws, max) = (cfg.gpu.warp_size, cfg.gpu.max_warps_per_sm);
        let threads = self.tile as u64 * self.tile as u64;
        if !matches!(self.tile, 4 | 8 | 16 | 32) || threads % ws as u64 != 0 || threads > (ws * max) as u64 {
            return Err((
                format!("{p}.tile"),
                format!(
                    "must be 4, 8, 16 or 32, with tile^2 threads a multiple of gpu.warp_size ({ws}) and at most gpu.max_warps_per_sm ({max}) warps, got {}",
                    self.tile
                ),
            ));
        }
        check(p, "n", self.n, 1, 1 << 22)?;
        if !matches!(self.element_bytes, 4 | 8) {
            return Err((format!("{p}.element_bytes"), format!("must be 4 or 8, got {}", self.element_bytes)));
        }
        Ok(())
    }

    /// A, B and C.
    pub fn footprint(&self) -> u128 {
        3 * self.n as u128 * self.n as u128 * self.element_bytes as u128
    }
}

#[derive(Debug, Clone)]
pub struct GemmKernel {
    a: Buffer,
    b: Buffer,
    c: Buffer,
    p: GemmParams,
    compute: u32,
}

pub(super) fn build(p: &GemmParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let bytes = p.n * p.n * p.element_bytes as u64;
    let (a, b, c) = (va.alloc(bytes, page), va.alloc(bytes, page), va.alloc(bytes, page));
    let threads_per_cta = p.tile * p.tile;
    let gen = KernelGen::Gemm(GemmKernel { a, b, c, p: p.clone(), compute: w.compute_cycles });
    let tiles = p.n.div_ceil(p.tile as u64);
    (vec![KernelSpec { name: "tiled-gemm", threads: tiles * tiles * threads_per_cta as u64, threads_per_cta, gen }], 2 * bytes)
}

impl GemmKernel {
    pub fn warp(&self, id: WarpId) -> GemmWarp {
        let t2 = (self.p.tile * self.p.tile) as u64;
        let cta = id.first_thread / t2;
        let tiles = self.p.n.div_ceil(self.p.tile as u64);
        GemmWarp { k: self.clone(), bx: cta % tiles, by: cta / tiles, t0: id.first_thread % t2, lanes: id.lanes, kstep: 0, phase: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct GemmWarp {
    k: GemmKernel,
    bx: u64,
    by: u64,
    /// First thread of the warp within its CTA.
    t0: u64,
    lanes: u32,
    kstep: u64,
    phase: u8,
}

impl GemmWarp {
    /// The access of the warp's threads to `m` at tile (row tile `r`, column tile `c`);
    /// threads whose element is outside the matrix are inactive, and `None` if all are.
    fn tile(&self, kind: MemKind, m: Buffer, r: u64, c: u64, scratch: &mut [u64; MAX_LANES]) -> Option<Op> {
        let (n, t, eb) = (self.k.p.n, self.k.p.tile as u64, self.k.p.element_bytes as u64);
        if self.lanes > 0 && r * t + (self.t0 + u64::from(self.lanes) - 1) / t < n && (c + 1) * t <= n {
            // Every lane's row and column inside the matrix (an interior tile, when t does not
            // divide n): no lane is inactive; the lanes are filled a row of the tile at a time.
            let (mut ty, mut tx) = (self.t0 / t, self.t0 % t);
            let mut i = 0;
            while i < self.lanes as usize {
                let run = ((t - tx) as usize).min(self.lanes as usize - i);
                let at = m.base + ((r * t + ty) * n + c * t + tx) * eb;
                for (j, x) in scratch[i..i + run].iter_mut().enumerate() {
                    *x = at + j as u64 * eb;
                }
                i += run;
                (ty, tx) = (ty + 1, 0);
            }
            return (i > 0).then(|| Op::Mem { kind, lanes: super::grid::compact(scratch, i), bytes: eb as u32 });
        }
        let mut active = 0;
        // Thread th sits at (th / t, th % t) in the tile: step through it instead of dividing per lane
        // (two divisions per lane were a tenth of a multi-GPU GEMM run).
        let (mut ty, mut tx) = (self.t0 / t, self.t0 % t);
        for _ in 0..self.lanes {
            let (row, col) = (r * t + ty, c * t + tx);
            if row < n && col < n {
                scratch[active] = m.base + (row * n + col) * eb;
                active += 1;
            }
            tx += 1;
            if tx == t {
                tx = 0;
                ty += 1;
            }
        }
        (active > 0).then(|| Op::Mem { kind, lanes: super::grid::compact(scratch, active), bytes: eb as u32 })
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let ksteps = self.k.p.n.div_ceil(self.k.p.tile as u64);
        loop {
            if self.kstep > ksteps {
                return Op::Exit;
            }
            if self.kstep == ksteps {
                self.kstep += 1;
                match self.tile(MemKind::Store, self.k.c, self.by, self.bx, scratch) {
                    Some(op) => return op,
                    None => continue,
                }
            }
            self.phase += 1;
            let op = match self.phase {
                // Each tile load's value is stored to shared memory at once (the PTX), so the
                // warp waits for A before it loads B.
                1 => self.tile(MemKind::Load, self.k.a, self.by, self.kstep, scratch),
                2 | 4 => Some(Op::Wait),
                3 => self.tile(MemKind::Load, self.k.b, self.kstep, self.bx, scratch),
                5 => Some(Op::Barrier),
                6 => Some(Op::Compute(self.k.p.tile * self.k.compute)),
                _ => {
                    self.phase = 0;
                    self.kstep += 1;
                    Some(Op::Barrier)
                }
            };
            if let Some(op) = op {
                return op;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

    #[test]
    fn each_k_step_meets_the_cta_before_and_after_its_compute() {
        // n = 40, tile 16: 3 k-steps of load A, wait, load B, wait, barrier, compute, barrier; then the store.
        let p = program(&["workload.kind=tiled-gemm", "workload.tiled_gemm.n=40"]);
        for mut w in warps(&p, 0) {
            let ops = all_ops(&mut w);
            // Edge warps skip loads or the store outside the matrices, never a wait or a barrier.
            let s = op_shape(&ops).replace('m', "");
            assert_eq!(s, "wwbcb".repeat(3), "{ops:?}");
        }
        let mut w = warps(&p, 0).swap_remove(0);
        assert_eq!(op_shape(&all_ops(&mut w)), format!("{}m", "mwmwbcb".repeat(3)));
    }

    #[test]
    fn tile_addresses_of_one_cta_at_one_k_step() {
        // n = 64, tile 16: 4 x 4 CTAs of 8 warps. CTA 6 = (bx 2, by 1); its warp 3 = threads 96..128 = rows ty 6, 7.
        let p = program(&["workload.kind=tiled-gemm", "workload.tiled_gemm.n=64"]);
        let (a, b, c) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        let ops = mem_ops(&mut warps(&p, 0)[6 * 8 + 3]);
        assert_eq!(ops.len(), 2 * 4 + 1);
        let el = |m: u64, row: u64, col: u64| m + (row * 64 + col) * 4;
        let rows = |m: u64, r0: u64, c0: u64| -> Vec<u64> { (0..32).map(|l| el(m, r0 + l / 16, c0 + l % 16)).collect() };
        // k-step 2: A rows 16+6, 16+7 at columns 32..48; B rows 32+6, 32+7 at columns 32..48.
        assert_eq!(ops[4], (MemKind::Load, rows(a, 22, 32)));
        assert_eq!(ops[5], (MemKind::Load, rows(b, 38, 32)));
        assert_eq!(ops[8], (MemKind::Store, rows(c, 22, 32)));
    }

    #[test]
    fn edge_tiles_are_partial_when_the_tile_does_not_divide_n() {
        // n = 20, tile 16: 2 x 2 CTAs of 8 warps (threads 4 * 256). CTA 3 = (bx 1, by 1) covers rows and columns 16..20.
        let p = program(&["workload.kind=tiled-gemm", "workload.tiled_gemm.n=20"]);
        assert_eq!(kernels(&p)[0].threads, 4 * 256);
        let (a, b, c) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        assert_eq!(p.buffers[0].bytes, 20 * 20 * 4);
        let el = |m: u64, row: u64, col: u64| m + (row * 20 + col) * 4;
        // Warp 0 of CTA 3 = ty 0, 1: rows 16 and 17; k-step 0 reads A at columns 0..16, k-step 1 at 16..20.
        let ops = mem_ops(&mut warps(&p, 0)[3 * 8]);
        assert_eq!(ops.len(), 2 * 2 + 1);
        let seg = |m: u64, rows: std::ops::Range<u64>, cols: std::ops::Range<u64>| -> Vec<u64> {
            rows.flat_map(|r| cols.clone().map(move |col| el(m, r, col))).collect()
        };
        assert_eq!(ops[0], (MemKind::Load, seg(a, 16..18, 0..16)));
        assert_eq!(ops[1], (MemKind::Load, seg(b, 0..2, 16..20)));
        assert_eq!(ops[2], (MemKind::Load, seg(a, 16..18, 16..20)));
        assert_eq!(ops[3], (MemKind::Load, seg(b, 16..18, 16..20)));
        assert_eq!(ops[4], (MemKind::Store, seg(c, 16..18, 16..20)));
        // Warp 2 of CTA 3 = rows 20, 21: outside A and C; it reads only B's rows 4, 5 at k-step 0 (B rows 20+ do not exist).
        let ops = mem_ops(&mut warps(&p, 0)[3 * 8 + 2]);
        assert_eq!(ops, [(MemKind::Load, seg(b, 4..6, 16..20))]);
        // Every address stays inside the matrices; every element of C is stored exactly once.
        let mut stored = vec![];
        for mut w in warps(&p, 0) {
            for (kind, v) in mem_ops(&mut w) {
                assert!(v.iter().all(|&x| [a, b, c].iter().any(|&m| x >= m && x < m + 1600)));
                if kind == MemKind::Store {
                    stored.extend(v);
                }
            }
        }
        stored.sort_unstable();
        assert_eq!(stored, (0..400).map(|e| c + 4 * e).collect::<Vec<_>>());
    }

    #[test]
    fn allens_sizes_are_accepted() {
        use crate::config::{resolve, Source};
        for n in [29_228u64, 30_764, 47_660] {
            let c = resolve(&[] as &[Source], &["workload.kind=tiled-gemm".into(), format!("workload.tiled_gemm.n={n}")]).unwrap();
            let k = crate::workload::build(&c).unwrap();
            assert_eq!(k.buffers.iter().map(|b| b.bytes).sum::<u64>(), 3 * n * n * 4);
            assert_eq!(kernels(&k)[0].threads, n.div_ceil(16).pow(2) * 256);
        }
    }

    #[test]
    fn first_touch_walks_a_by_column_tiles_and_b_by_row_tiles() {
        // n = 512 doubles: one page per matrix row; tile 32 -> 16 x 16 CTAs, k-steps of 32 rows of B.
        let p = program(&[
            "workload.kind=tiled-gemm",
            "workload.tiled_gemm.n=512",
            "workload.tiled_gemm.tile=32",
            "workload.tiled_gemm.element_bytes=8",
        ]);
        let ft = first_touch(&p);
        assert_eq!(ft.len(), 3 * 512);
        // k-step 0 reads column tile 0 of every row of A: all of A's pages, top to bottom, then B's rows 0..32.
        assert_eq!(ft[..512], (0..512).map(|r| (0, r)).collect::<Vec<_>>());
        assert_eq!(ft[512..544], (0..32).map(|r| (1, r)).collect::<Vec<_>>());
        // B's later rows come one row tile per k-step; C last, row-major.
        assert_eq!(ft[512..1024], (0..512).map(|r| (1, r)).collect::<Vec<_>>());
        assert_eq!(ft[1024..], (0..512).map(|r| (2, r)).collect::<Vec<_>>());
    }

    #[test]
    fn a_k_step_computes_a_tile_of_products_and_the_host_copies_a_and_b() {
        use crate::workload::Op;
        let p = program(&["workload.kind=tiled-gemm", "workload.tiled_gemm.n=32"]);
        // tile 16 x compute_cycles 4 = 64 cycles: load A, wait, load B, wait, barrier, compute.
        assert_eq!(all_ops(&mut warps(&p, 0)[0])[5], Op::Compute(64));
        // A and B, 32 x 32 floats = 4096 bytes each; C is an output.
        assert_eq!(p.host.input_bytes, Some(2 * 4096));
    }
}

#[cfg(test)]
mod mgpusim_tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

    #[test]
    fn mm_stores_c_once_as_the_mgpusim_trace_does() {
        // MM of seed multi-gpu = AMDAPPSDK MatrixMultiplication; MGPUSim's trace
        // (matrixmultiplication.csv.gz, 256^3) writes 4,096 lines: C once. tiled-gemm at n = 256
        // does too. Its loads and pages do not match (trace 65,600 loads over 137 pages, of which
        // A only 8; tiled-gemm 32,768 over 192 pages): docs/workloads.md, "MGPUSim benchmarks".
        let p = program(&["gpu.warp_size=64", "workload.kind=tiled-gemm", "workload.tiled_gemm.n=256"]);
        let mut stores = std::collections::HashSet::new();
        for mut w in warps(&p, 0) {
            for (k, v) in mem_ops(&mut w) {
                if k == MemKind::Store {
                    stores.extend(v.iter().map(|a| a >> 6));
                }
            }
        }
        assert_eq!(stores.len(), 4096);
    }

    /// Every warp's accesses, whole and edge tiles alike, are the lanes' elements computed one by
    /// one (thread th of a CTA at row th / tile, column th % tile of its tile; outside the matrix:
    /// inactive), for tile edges that divide n or not (n = 31: one column short of two tiles of 16),
    /// and warps of 16 and 32 lanes.
    #[test]
    fn tiles_match_lane_by_lane_addresses() {
        for (n, tile, warp) in [(20u64, 16u64, 32u64), (64, 16, 32), (33, 8, 32), (70, 4, 16), (45, 32, 32), (9, 4, 16), (31, 16, 32)] {
            let p = program(&[
                "workload.kind=tiled-gemm",
                &format!("workload.tiled_gemm.n={n}"),
                &format!("workload.tiled_gemm.tile={tile}"),
                &format!("gpu.warp_size={warp}"),
            ]);
            let (a, b, c) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
            let tiles = n.div_ceil(tile);
            let warps_per_cta = (tile * tile).div_ceil(warp);
            for (i, mut w) in warps(&p, 0).into_iter().enumerate() {
                let (cta, wi) = (i as u64 / warps_per_cta, i as u64 % warps_per_cta);
                let (bx, by) = (cta % tiles, cta / tiles);
                let block = |m: u64, r: u64, col: u64| -> Vec<u64> {
                    (wi * warp..((wi + 1) * warp).min(tile * tile))
                        .map(|th| (r * tile + th / tile, col * tile + th % tile))
                        .filter(|&(row, cl)| row < n && cl < n)
                        .map(|(row, cl)| m + (row * n + cl) * 4)
                        .collect()
                };
                let mut want = vec![];
                for k in 0..tiles {
                    want.push((MemKind::Load, block(a, by, k)));
                    want.push((MemKind::Load, block(b, k, bx)));
                }
                want.push((MemKind::Store, block(c, by, bx)));
                want.retain(|(_, v)| !v.is_empty());
                assert_eq!(mem_ops(&mut w), want, "n {n}, tile {tile}, warp {i}");
            }
        }
    }
}
