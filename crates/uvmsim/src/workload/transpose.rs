//! `matrix-transpose` (AMDAPPSDK MatrixTranspose, "MT" of seed multi-gpu
//! Tables 3 and 6: L2-TLB MPKI 2.394, the highest, "scatter-gather"
//! pattern; MGPUSim `amd/samples/matrixtranspose`): transposes a `width` x
//! `width` float matrix into another. Each thread moves a 4 x 4 block with
//! float4 accesses; work-groups are 16 x 16 threads (64 x 64 elements), so
//! `threads_per_cta` is 256 whatever `workload.threads_per_cta` says. Thread
//! (gx, gy) (gx fastest within a group, groups x fastest) loads input rows
//! `4 gy + i`, columns `4 gx .. 4 gx + 4`, for i = 0..4 (one load each),
//! waits, and stores output rows `4 gx + i`, columns `4 gy .. 4 gy + 4`
//! (the block's column i). A 64-lane wavefront (16 x 4 threads) reads 4
//! lines in each of 4 rows per load and writes one line in each of 16 rows
//! per store: the reads are row-local, the writes stride over 16 pages.
//!
//! Checked against the MGPUSim trace (`matrixtranspose.csv.gz`, width
//! 2048): 4,096 wavefronts of 64 loads + 64 stores, 8,192 pages.
//!
//! Arrays in allocation order: input, output. First touch (lockstep): input
//! in 16-row bands (each CTA row), output column-band by column-band.

use super::{check, Buffer, KernelGen, KernelSpec, MemKind, Op, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::Config;

/// Threads per work-group edge (AMDAPPSDK: 16 x 16).
const GROUP: u64 = 16;

section! {
    /// Parameters of `matrix-transpose` (AMDAPPSDK MatrixTranspose as MGPUSim runs it).
    pub struct TransposeParams {
        /// Matrix edge in floats, a multiple of 64 (MGPUSim `-width`; its trace: 2048).
        pub width: u64 = 2048,
    }
}

impl TransposeParams {
    pub fn validate(&self, p: &str, cfg: &Config) -> Result<(), (String, String)> {
        check(p, "width", self.width, 64, 1 << 20)?;
        if self.width % 64 != 0 {
            return Err((format!("{p}.width"), format!("must be a multiple of 64 (16 x 16 groups of 4 x 4 blocks), got {}", self.width)));
        }
        let (ws, max) = (cfg.gpu.warp_size as u64, cfg.gpu.max_warps_per_sm as u64);
        if 256 % ws != 0 || 256 / ws > max {
            return Err((
                format!("{p}.width"),
                format!("needs 256-thread CTAs: gpu.warp_size ({ws}) must divide 256 with at most gpu.max_warps_per_sm ({max}) warps"),
            ));
        }
        Ok(())
    }

    pub fn footprint(&self) -> u128 {
        2 * 4 * self.width as u128 * self.width as u128
    }
}

#[derive(Debug, Clone)]
pub struct TransposeKernel {
    input: Buffer,
    output: Buffer,
    width: u64,
    compute: u32,
}

pub(super) fn build(p: &TransposeParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let bytes = p.width * p.width * 4;
    let k = TransposeKernel { input: va.alloc(bytes, page), output: va.alloc(bytes, page), width: p.width, compute: w.compute_cycles };
    let threads = (p.width / 4) * (p.width / 4);
    (vec![KernelSpec { name: "matrix-transpose", threads, threads_per_cta: 256, gen: KernelGen::Transpose(k) }], bytes)
}

impl TransposeKernel {
    pub fn warp(&self, id: WarpId) -> TransposeWarp {
        TransposeWarp { k: self.clone(), t0: id.first_thread, lanes: id.lanes, step: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct TransposeWarp {
    k: TransposeKernel,
    t0: u64,
    lanes: u32,
    step: u32,
}

impl TransposeWarp {
    /// (gx, gy) of thread `t`.
    fn pos(&self, t: u64) -> (u64, u64) {
        let groups = self.k.width / 4 / GROUP;
        let (cta, local) = (t / (GROUP * GROUP), t % (GROUP * GROUP));
        ((cta % groups) * GROUP + local % GROUP, (cta / groups) * GROUP + local / GROUP)
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        let s = self.step;
        self.step += 1;
        let w = self.k.width;
        let (kind, m, i) = match s {
            0..=3 => (MemKind::Load, self.k.input, s as u64),
            4 => return Op::Wait,
            5 => return Op::Compute(self.k.compute),
            6..=9 => (MemKind::Store, self.k.output, s as u64 - 6),
            _ => return Op::Exit,
        };
        for l in 0..self.lanes as u64 {
            let (gx, gy) = self.pos(self.t0 + l);
            let (row, col) = if kind == MemKind::Load { (4 * gy + i, 4 * gx) } else { (4 * gx + i, 4 * gy) };
            scratch[l as usize] = m.base + (row * w + col) * 4;
        }
        Op::Mem { kind, lanes: super::grid::compact(scratch, self.lanes as usize), bytes: 16 }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

    #[test]
    fn matches_the_mgpusim_trace() {
        // matrixtranspose.csv.gz (width 2048): 4,096 wavefronts, 524,288 accesses (64 + 64), 8,192 pages.
        let p = program(&["gpu.warp_size=64", "workload.kind=matrix-transpose"]);
        assert_eq!(trace_stats(&p, 64), (4096, 524_288, 8192));
    }

    #[test]
    fn blocks_land_transposed() {
        let p = program(&["gpu.warp_size=64", "workload.kind=matrix-transpose", "workload.matrix_transpose.width=128"]);
        let (i, o) = (p.buffers[0].base, p.buffers[1].base);
        let k = kernels(&p)[0];
        // CTA 1 = group (1, 0); its warp 1 = threads 64..128 = local rows ly 4..8: gx = 16 + lx, gy = 4 + ly'.
        let mut w = k.gen.warp(crate::workload::WarpId { global: 5, first_thread: 256 + 64, lanes: 64 });
        let ops = mem_ops(&mut w);
        assert_eq!(ops.len(), 8);
        let el = |m: u64, r: u64, c: u64| m + (r * 128 + c) * 4;
        // Lane 0 = (gx 16, gy 4), lane 17 = (gx 17, gy 5).
        assert_eq!((ops[1].1[0], ops[1].1[17]), (el(i, 17, 64), el(i, 21, 68)));
        assert_eq!(ops[5], (MemKind::Store, ops[5].1.clone()));
        assert_eq!((ops[5].1[0], ops[5].1[17]), (el(o, 65, 16), el(o, 69, 20)));
    }

    #[test]
    fn stores_write_the_blocks_columns_after_the_loads_land_in_256_thread_ctas() {
        use crate::workload::Op;
        let p = program(&["workload.kind=matrix-transpose", "workload.matrix_transpose.width=128"]);
        assert_eq!(kernels(&p)[0].threads_per_cta, 256);
        let ops = all_ops(&mut warps(&p, 0)[0]);
        assert_eq!(op_shape(&ops), "mmmmwcmmmm");
        // float4 stores.
        assert!(matches!(ops[9], Op::Mem { kind: MemKind::Store, bytes: 16, .. }), "{:?}", ops[9]);
        // Store 3 of lane 1 (gx 1, gy 0): output row 4 x 1 + 3 = 7, columns 0..4.
        let o = p.buffers[1].base;
        assert_eq!(mem_ops(&mut warps(&p, 0)[0])[7].1[1], o + 7 * 128 * 4);
        // Input: 128 x 128 floats = 65,536 bytes; the output is not copied.
        assert_eq!(p.host.input_bytes, Some(65_536));
    }
}
