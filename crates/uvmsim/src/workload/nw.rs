//! `nw` (Rodinia Needleman-Wunsch): global alignment of two sequences of
//! length n, filling an (n+1) x (n+1) score matrix in block x block tiles,
//! one kernel launch per anti-diagonal of tiles (2 * n/block - 1 launches;
//! Rodinia's two kernels are the upper-left and lower-right halves). Tile
//! (bx, by) covers rows by*block+1.. and columns bx*block+1..; it is one CTA
//! of one warp, lane tx active for tx < block. In Rodinia's order the warp
//! loads the tile's north-west corner (lane 0), the reference tile row by
//! row, the west column (`matrix[by*block+1+tx][bx*block]`, one row per
//! lane) and the north row (`matrix[by*block][bx*block+1+tx]`), computes
//! the 2*block anti-diagonals in shared memory (`2 * block * compute_cycles`),
//! and stores the tile row by row. The lower-right kernel
//! (`needle_cuda_shared_2`) loads the corner after the reference rows.
//!
//! Each load waits for its value before the next is issued: every load's
//! value is stored straight into shared memory, and the PTX issues the
//! `st.shared` right after its `ld.global` (NVRTC 12.9, -O3, the loops
//! unrolled: docs/workloads.md, "Load order"), so a warp executing the PTX
//! in order, as GPGPU-Sim does, has one load in flight at a time: 2*block+3
//! page-crossing loads in series per tile. (Before 2026-12-01 the model
//! issued the corner and the block reference rows together.)
//!
//! Arrays in allocation order: score matrix, reference matrix (ints). First
//! touch: tile by tile along the anti-diagonals, i.e. a wavefront from the
//! top-left corner: diagonal d reaches the tiles with bx + by = d.

use super::{check, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig};
use crate::config::Config;

section! {
    /// Parameters of the Rodinia Needleman-Wunsch alignment.
    pub struct NwParams {
        /// Sequence length (the matrices are (n+1) x (n+1) ints); a multiple of block.
        pub n: u64 = 1024,
        /// Tile edge; one warp per tile with block active lanes (at most gpu.warp_size).
        pub block: u32 = 16,
    }
}

impl NwParams {
    pub fn validate(&self, p: &str, cfg: &Config) -> Result<(), (String, String)> {
        check(p, "block", self.block as u64, 1, cfg.gpu.warp_size as u64)?;
        if self.n == 0 || self.n % self.block as u64 != 0 || self.n > 1 << 20 {
            return Err((
                format!("{p}.n"),
                format!("must be a positive multiple of {p}.block ({}) up to 2^20, got {}", self.block, self.n),
            ));
        }
        Ok(())
    }

    /// Score and reference matrices.
    pub fn footprint(&self) -> u128 {
        2 * (self.n as u128 + 1) * (self.n as u128 + 1) * 4
    }
}

#[derive(Debug, Clone)]
pub struct NwKernel {
    score: Buffer,
    reference: Buffer,
    cols: u64,
    block: u64,
    /// Tile column of the diagonal's first tile (whose tile row is diagonal - x0).
    x0: u64,
    diagonal: u64,
    warp_size: u64,
    compute: u32,
}

pub(super) fn build(p: &NwParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let cols = p.n + 1;
    let score = va.alloc(cols * cols * 4, page);
    let reference = va.alloc(cols * cols * 4, page);
    let (nb, ws) = (p.n / p.block as u64, cfg.gpu.warp_size as u64);
    let kernels = (0..2 * nb - 1)
        .map(|d| {
            let x0 = d.saturating_sub(nb - 1);
            let tiles = d.min(nb - 1) - x0 + 1;
            let k = NwKernel { score, reference, cols, block: p.block as u64, x0, diagonal: d, warp_size: ws, compute: w.compute_cycles };
            KernelSpec { name: "nw", threads: tiles * ws, threads_per_cta: ws as u32, gen: KernelGen::Nw(k) }
        })
        .collect();
    (kernels, 2 * score.bytes)
}

impl NwKernel {
    pub fn warp(&self, id: WarpId) -> NwWarp {
        let bx = self.x0 + id.first_thread / self.warp_size;
        NwWarp { k: self.clone(), bx, by: self.diagonal - bx, lanes: (id.lanes as u64).min(self.block) as u32, step: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct NwWarp {
    k: NwKernel,
    bx: u64,
    by: u64,
    lanes: u32,
    step: u64,
}

impl NwWarp {
    /// `n` lanes from (row, col) of `m`, `stride` elements apart.
    fn at(&self, kind: MemKind, m: Buffer, row: u64, col: u64, stride: u64, n: u32) -> Op {
        let lanes = Lanes::Strided { base: m.base + (row * self.k.cols + col) * 4, stride: stride * 4, n };
        Op::Mem { kind, lanes, bytes: 4 }
    }

    pub fn next(&mut self) -> Op {
        let b = self.k.block;
        let (r0, c0) = (self.by * b, self.bx * b);
        let (s, n) = (self.step, self.lanes);
        self.step += 1;
        let (score, reference) = (self.k.score, self.k.reference);
        // Every load's value goes straight to shared memory, so each is followed by its wait
        // (odd steps). The lower-right kernel loads the corner after the reference rows.
        // Rodinia's needle_cuda_shared_1 runs diagonals 0..n/block, needle_cuda_shared_2 the rest.
        let upper = self.k.diagonal < (self.k.cols - 1) / b;
        let (corner, rows) = if upper { (0, 2) } else { (2 * b, 0) };
        if s < 2 * b + 6 && s % 2 == 1 {
            return Op::Wait;
        }
        match s {
            s if s == corner => self.at(MemKind::Load, score, r0, c0, 0, 1),
            s if s >= rows && s < rows + 2 * b => self.at(MemKind::Load, reference, r0 + 1 + (s - rows) / 2, c0 + 1, 1, n),
            s if s == 2 * b + 2 => self.at(MemKind::Load, score, r0 + 1, c0, self.k.cols, n),
            s if s == 2 * b + 4 => self.at(MemKind::Load, score, r0, c0 + 1, 1, n),
            s if s == 2 * b + 6 => Op::Compute(2 * b as u32 * self.k.compute),
            s if s <= 3 * b + 6 => self.at(MemKind::Store, score, r0 + s - (2 * b + 6), c0 + 1, 1, n),
            _ => {
                self.step -= 1;
                Op::Exit
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

    #[test]
    fn one_launch_per_anti_diagonal_and_the_tile_reads() {
        // n = 64, block 16: 4 x 4 tiles, 7 diagonals of 1, 2, 3, 4, 3, 2, 1 tiles.
        let p = program(&["workload.kind=nw", "workload.nw.n=64"]);
        let sizes: Vec<usize> = (0..7).map(|d| warps(&p, d).len()).collect();
        assert_eq!(sizes, [1, 2, 3, 4, 3, 2, 1]);
        let (m, r) = (p.buffers[0].base, p.buffers[1].base);
        let el = |b: u64, row: u64, col: u64| b + (row * 65 + col) * 4;
        // Diagonal 4, its second tile: the first is (bx 1, by 3), so this is (bx 2, by 2).
        let ops = mem_ops(&mut warps(&p, 4)[1]);
        assert_eq!(ops.len(), 1 + 16 + 2 + 16);
        // Diagonal 4 is in the lower-right half (needle_cuda_shared_2): the corner after the reference rows.
        assert_eq!(ops[0], (MemKind::Load, (0..16).map(|tx| el(r, 33, 33 + tx)).collect()));
        assert_eq!(ops[15], (MemKind::Load, (0..16).map(|tx| el(r, 48, 33 + tx)).collect()));
        assert_eq!(ops[16], (MemKind::Load, vec![el(m, 32, 32)]));
        assert_eq!(ops[17], (MemKind::Load, (0..16).map(|tx| el(m, 33 + tx, 32)).collect()));
        assert_eq!(ops[18], (MemKind::Load, (0..16).map(|tx| el(m, 32, 33 + tx)).collect()));
        assert_eq!(ops[19], (MemKind::Store, (0..16).map(|tx| el(m, 33, 33 + tx)).collect()));
        assert_eq!(ops[34], (MemKind::Store, (0..16).map(|tx| el(m, 48, 33 + tx)).collect()));
        // Diagonal 3, the last of the upper-left half: the corner first.
        let ops = mem_ops(&mut warps(&p, 3)[2]);
        assert_eq!(ops[0], (MemKind::Load, vec![el(m, 16, 32)]));
        assert_eq!(ops[1], (MemKind::Load, (0..16).map(|tx| el(r, 17, 33 + tx)).collect()));
    }

    #[test]
    fn each_load_is_waited_for_before_the_next() {
        // Every load feeds a st.shared at once in Rodinia's PTX: one load in flight at a time.
        let p = program(&["workload.kind=nw", "workload.nw.n=64"]);
        let want = format!("{}c{}", "mw".repeat(16 + 3), "m".repeat(16));
        for d in [0, 3, 4, 6] {
            for mut w in warps(&p, d) {
                assert_eq!(op_shape(&all_ops(&mut w)), want, "diagonal {d}");
            }
        }
    }

    #[test]
    fn first_touch_is_a_wavefront_from_the_top_left() {
        // n = 1023 + 1 = 1024 columns of ints: one page per row; block 32 -> tiles of 32 rows.
        let p = program(&["workload.kind=nw", "workload.nw.n=1023", "workload.nw.block=31"]);
        let ft = first_touch(&p);
        // Diagonal 0 = tile (0, 0): score row 0 (corner), reference rows 1..=31, score rows 1..=31.
        assert_eq!(ft[0], (0, 0));
        assert_eq!(ft[1..32], (1..32).map(|r| (1, r)).collect::<Vec<_>>());
        assert_eq!(ft[32..63], (1..32).map(|r| (0, r)).collect::<Vec<_>>());
        // Diagonal 1 = tiles (bx 0, by 1) and (1, 0): the second row of tiles starts with its reference rows.
        assert_eq!(ft[63], (1, 32));
        // Each diagonal adds the next tile row: both matrices are first touched top to bottom.
        for m in 0..2 {
            let rows: Vec<u64> = ft.iter().filter(|(b, _)| *b == m).map(|&(_, r)| r).collect();
            assert_eq!(rows, (m as u64..1024).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_tile_computes_its_2_block_anti_diagonals_and_the_host_copies_both_matrices() {
        use crate::workload::Op;
        let p = program(&["workload.kind=nw", "workload.nw.n=64"]);
        // block 16, compute_cycles 4: 2 x 16 x 4 = 128 cycles after the 19 waited loads.
        let ops = all_ops(&mut warps(&p, 0)[0]);
        assert_eq!(ops[2 * 19], Op::Compute(128));
        // Score and reference matrices, 65 x 65 ints = 16,900 bytes each.
        assert_eq!(p.host.input_bytes, Some(2 * 16_900));
    }
}
