//! `tiled-gemm`: C = A * B for n x n row-major matrices with shared-memory
//! tiles (the CUDA-samples / Parboil sgemm structure, the "sgemm" of seed
//! uvm-driver). A CTA of tile x tile threads computes one tile of C; CTAs are
//! numbered column tile fastest (`bx = cta % (n/tile)`, `by = cta / (n/tile)`),
//! and thread (tx, ty) = (t % tile, t / tile). For each k-step `k` in
//! 0..n/tile, every thread loads `A[by*tile + ty][k*tile + tx]` and
//! `B[k*tile + ty][bx*tile + tx]` (rows of a tile are contiguous, so a warp
//! reads 32 / tile row segments of tile elements each), waits at the barrier,
//! and computes tile multiply-adds (`tile * compute_cycles` cycles). After the
//! last k-step it stores `C[by*tile + ty][bx*tile + tx]`.
//! The CTA size is tile^2 threads; `workload.threads_per_cta` does not apply.
//!
//! First touch (lockstep): at k-step 0, column tile 0 of A for every row
//! tile, interleaved with row tile 0 of B; then A's column tile 1 and B's
//! row tile 1, and so on (A column-tile by column-tile, B row-major); C
//! row-major at the end.

use super::{Buffer, KernelGen, KernelSpec, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;

section! {
    /// Parameters of the shared-memory tiled matrix multiply.
    pub struct GemmParams {
        /// Matrix order (rows = columns of A, B and C); a multiple of tile.
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
        if self.n == 0 || self.n % self.tile as u64 != 0 || self.n > 1 << 22 {
            return Err((format!("{p}.n"), format!("must be a positive multiple of {p}.tile ({}) up to 2^22, got {}", self.tile, self.n)));
        }
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
    (vec![KernelSpec { name: "tiled-gemm", threads: p.n * p.n, threads_per_cta, gen }], 2 * bytes)
}

impl GemmKernel {
    pub fn warp(&self, id: WarpId) -> GemmWarp {
        let t2 = (self.p.tile * self.p.tile) as u64;
        let cta = id.first_thread / t2;
        let tiles = self.p.n / self.p.tile as u64;
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
    /// Lane addresses in `m` at tile (row tile `r`, column tile `c`) for the warp's threads.
    fn tile(&self, m: Buffer, r: u64, c: u64, scratch: &mut [u64; MAX_LANES]) -> Op {
        let (n, t, eb) = (self.k.p.n, self.k.p.tile as u64, self.k.p.element_bytes as u64);
        for (l, slot) in scratch.iter_mut().take(self.lanes as usize).enumerate() {
            let th = self.t0 + l as u64;
            *slot = m.base + ((r * t + th / t) * n + c * t + th % t) * eb;
        }
        let lanes = super::grid::compact(scratch, self.lanes as usize);
        Op::Mem { kind: MemKind::Load, lanes, bytes: eb as u32 }
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let ksteps = self.k.p.n / self.k.p.tile as u64;
        if self.kstep > ksteps {
            return Op::Exit;
        }
        if self.kstep == ksteps {
            self.kstep += 1;
            let Op::Mem { lanes, bytes, .. } = self.tile(self.k.c, self.by, self.bx, scratch) else { unreachable!() };
            return Op::Mem { kind: MemKind::Store, lanes, bytes };
        }
        self.phase += 1;
        match self.phase {
            1 => self.tile(self.k.a, self.by, self.kstep, scratch),
            2 => self.tile(self.k.b, self.kstep, self.bx, scratch),
            3 => Op::Wait,
            _ => {
                self.phase = 0;
                self.kstep += 1;
                Op::Compute(self.k.p.tile * self.k.compute)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

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
}
