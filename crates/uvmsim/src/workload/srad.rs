//! `srad` (Rodinia srad_v2): speckle-reducing anisotropic diffusion on a
//! rows x cols image, two kernels per iteration, each in the order of its
//! PTX (docs/workloads.md, "Load order"): every load's value goes straight to
//! shared memory or into the next multiply, so a warp has one load in flight
//! but for kernel 2's dN and dS. Kernel 1 (`srad_cuda_1`): load the north
//! neighbour of J, wait, the south one, wait, meet its CTA; the west, wait,
//! the east, wait, meet; J at the pixel, wait, meet; compute the directional
//! derivatives and the diffusion coefficient, meet; store c, dE, dW, dS, dN
//! (Rodinia's order): 4 barriers. Kernel 2 (`srad_cuda_2`): load J, wait,
//! meet; the south neighbour's c, wait, meet; the east one's, wait, meet; the
//! pixel's c, wait, meet; dN and dS, wait, dW, wait, dE, wait; compute, meet;
//! store J: 5 barriers. Neighbours clamp at the image edge.
//!
//! Simplified from Rodinia: one thread per pixel, row-major (Rodinia uses 16 x
//! 16 thread tiles whose staging loads read the tile's halo, the row above and
//! below the tile and the columns left and right of it, where each pixel here
//! reads its own neighbours: the same array in the same rounds); the CTAs at
//! the image's edge reload their clamped border in Rodinia (one more load and
//! wait in the round), left out here: clamping gives the addresses.
//!
//! The host program is srad_v2's (`srad.cu`): each iteration the host first
//! reads J's region of interest, the top-left `roi_rows` x `roi_cols` pixels
//! (its run script's `0 127 0 127`), for the speckle statistics q0sqr, then
//! copies J to the GPU, runs the two kernels and copies J back. With explicit
//! copies (`workload.memcpy_inputs` / `memcpy_outputs`) J goes in before each
//! iteration's kernel 1 and out after its kernel 2, and the other five arrays
//! are never copied (they live on the GPU only); the host's read is of its own
//! copy and moves nothing. With managed memory there is no copy and the read
//! is a host access to the managed J, one per ROI row (row-major, as the
//! host's loop reads): from the second iteration on, the ROI's pages are on
//! the GPU (kernel 2 stored J), so they fault back to the host and kernel 1
//! faults them in again. The reduction's arithmetic (2 x roi_rows x roi_cols
//! flops on the host) is not timed. Before 2026-12-06 neither the host's read
//! nor the per-iteration copies were modelled: J was copied in once before
//! the first iteration and the other five arrays out once after the last.
//! Before 2026-12-01 kernel 1 loaded J and its four neighbours
//! and kernel 2 its eight values all in flight together, each kernel met its
//! CTA only after all its loads, and kernel 1 stored dN, dS, dW, dE, then c.
//!
//! Arrays in allocation order: J, c, dN, dS, dW, dE. First touch (lockstep):
//! J row-major (kernel 1's loads), then c, dE, dW, dS and dN, each row-major
//! in that store order.

use super::grid::{staged, Array, GridKernel, Index, Step};
use super::{check, HostOp, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of the Rodinia SRAD image diffusion.
    pub struct SradParams {
        /// Image rows (pixels along y).
        pub rows: u64 = 256,
        /// Image columns (pixels along x, contiguous).
        pub cols: u64 = 256,
        /// Iterations; each is two kernel launches.
        pub iterations: u32 = 2,
        /// Rows of the region of interest the host reads at the start of each iteration (from row 0; Rodinia's
        /// run script: rows 0-127); clamped to `rows`. 0 (or roi_cols = 0): no host read.
        pub roi_rows: u64 = 128,
        /// Columns of the region of interest (from column 0; Rodinia's run script: columns 0-127); clamped to `cols`.
        pub roi_cols: u64 = 128,
    }
}

impl SradParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "rows", self.rows, 1, 1 << 24)?;
        check(p, "cols", self.cols, 1, 1 << 24)?;
        check(p, "iterations", self.iterations as u64, 1, 10_000)?;
        check(p, "roi_rows", self.roi_rows, 0, 1 << 24)?;
        check(p, "roi_cols", self.roi_cols, 0, 1 << 24)
    }

    /// The rows and columns of the region of interest the host reads, clamped to the image; None: no read.
    pub fn roi(&self) -> Option<(u64, u64)> {
        let (r, c) = (self.roi_rows.min(self.rows), self.roi_cols.min(self.cols));
        (r > 0 && c > 0).then_some((r, c))
    }

    /// J, c and the four derivative arrays, floats.
    pub fn footprint(&self) -> u128 {
        6 * self.rows as u128 * self.cols as u128 * 4
    }
}

const J: u8 = 0;
const C: u8 = 1;
const DN: u8 = 2;
const DS: u8 = 3;
const DW: u8 = 4;
const DE: u8 = 5;

/// One load followed by its wait: the value is used at once (stored to shared memory, or multiplied).
fn load_wait(array: u8, at: Index) -> [Step; 2] {
    [Step::load(array, at), Step::Wait]
}

/// The host program: per iteration the ROI read (managed J only), J's copy in, the two kernels, J's copy out
/// (explicit copies only). Returns the operations and J's bytes (the program's input).
pub(super) fn build(p: &SradParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<HostOp>, u64) {
    let bytes = p.rows * p.cols * 4;
    let arrays: Vec<Array> = (0..6).map(|_| Array { base: va.alloc(bytes, page).base, elem_bytes: 4 }).collect();
    let here = Index::HERE;
    // srad_cuda_1 stages north and south, meets, west and east, meets, the centre, meets
    // (each load stored to shared memory at once), computes, meets before its stores.
    let mut k1: Vec<Step> = vec![];
    k1.extend(load_wait(J, Index::at(0, -1, 0)));
    k1.extend(load_wait(J, Index::at(0, 1, 0)));
    k1.push(Step::Barrier);
    k1.extend(load_wait(J, Index::at(-1, 0, 0)));
    k1.extend(load_wait(J, Index::at(1, 0, 0)));
    k1.push(Step::Barrier);
    k1.extend(load_wait(J, here));
    k1.extend(staged(0, w.compute_cycles, 2));
    k1.extend([C, DE, DW, DS, DN].map(|a| Step::store(a, here)));
    // srad_cuda_2 stages J, south c, east c and c, meeting after each; then dN and dS go
    // together (both issued before the first multiply uses one), dW and dE one at a time; it
    // meets before its store.
    let mut k2: Vec<Step> = vec![];
    for (a, at) in [(J, here), (C, Index::at(0, 1, 0)), (C, Index::at(1, 0, 0)), (C, here)] {
        k2.extend(load_wait(a, at));
        k2.push(Step::Barrier);
    }
    k2.extend([Step::load(DN, here), Step::load(DS, here), Step::Wait]);
    k2.extend(load_wait(DW, here));
    k2.extend(load_wait(DE, here));
    k2.extend([Step::Compute(w.compute_cycles), Step::Barrier, Step::store(J, here)]);
    let kernel = |body: &Vec<Step>| {
        let k = GridKernel::new([p.cols, p.rows, 1], p.rows * p.cols, 1, arrays.clone(), body.clone());
        KernelSpec { name: "srad", threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) }
    };
    let (k1, k2) = (kernel(&k1), kernel(&k2));
    let mut ops = vec![];
    for _ in 0..p.iterations {
        // The host reads the ROI row by row; on a device-memory J it reads its own copy (nothing to model).
        if let (Some((rows, cols)), true) = (p.roi(), w.managed) {
            ops.extend((0..rows).map(|r| HostOp::HostAccess { buffer: J as usize, offset: r * p.cols * 4, bytes: cols * 4, write: false }));
        }
        if w.memcpy_inputs {
            ops.push(HostOp::MemcpyH2D { bytes });
        }
        ops.extend([HostOp::Launch(k1.clone()), HostOp::Launch(k2.clone())]);
        if w.memcpy_outputs {
            ops.push(HostOp::MemcpyD2H { bytes });
        }
    }
    (ops, bytes)
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

    #[test]
    fn two_kernels_per_iteration_with_their_reads_and_writes() {
        let p = program(&["workload.kind=srad", "workload.srad.rows=4", "workload.srad.cols=32", "workload.srad.iterations=3"]);
        assert_eq!(kernels(&p).len(), 6);
        let base: Vec<u64> = p.buffers.iter().map(|b| b.base).collect();
        let px = |arr: usize, x: u64, y: u64| base[arr] + 4 * (y * 32 + x);
        let (j, c, dn, ds, dw, de) = (0, 1, 2, 3, 4, 5);
        // Pixel (0, 1) = lane 0 of warp 1: north, south, west (clamped to itself), east, itself.
        let k1: Vec<(MemKind, u64)> = mem_ops(&mut warps(&p, 0)[1]).iter().map(|(k, a)| (*k, a[0])).collect();
        let loads = [px(j, 0, 0), px(j, 0, 2), px(j, 0, 1), px(j, 1, 1), px(j, 0, 1)];
        // Rodinia's store order: c, dE, dW, dS, dN.
        let stores = [px(c, 0, 1), px(de, 0, 1), px(dw, 0, 1), px(ds, 0, 1), px(dn, 0, 1)];
        assert_eq!(k1, loads.map(|a| (MemKind::Load, a)).into_iter().chain(stores.map(|a| (MemKind::Store, a))).collect::<Vec<_>>());
        // Kernel 2: J, the south and east neighbours' c, its c, dN, dS, dW, dE; then J.
        let k2: Vec<(MemKind, u64)> = mem_ops(&mut warps(&p, 1)[1]).iter().map(|(k, a)| (*k, a[0])).collect();
        let loads = [px(j, 0, 1), px(c, 0, 2), px(c, 1, 1), px(c, 0, 1), px(dn, 0, 1), px(ds, 0, 1), px(dw, 0, 1), px(de, 0, 1)];
        assert_eq!(k2[..8], loads.map(|a| (MemKind::Load, a)));
        assert_eq!(k2[8..], [(MemKind::Store, px(j, 0, 1))]);
        // The last row's south neighbour clamps to itself (Rodinia's bottom CTAs reload their last row).
        let k1: Vec<(MemKind, u64)> = mem_ops(&mut warps(&p, 0)[3]).iter().map(|(k, a)| (*k, a[5])).collect();
        assert_eq!(k1[..2], [(MemKind::Load, px(j, 5, 2)), (MemKind::Load, px(j, 5, 3))]);
        assert_eq!(first_touch(&p).iter().map(|&(b, _)| b).collect::<Vec<_>>(), [j, c, de, dw, ds, dn]);
    }

    #[test]
    fn each_kernel_waits_and_meets_where_its_ptx_does() {
        use crate::workload::Op;
        let p = program(&["workload.kind=srad", "workload.srad.rows=4", "workload.srad.cols=32", "workload.srad.iterations=1"]);
        // Kernel 1: north, south, meet; west, east, meet; centre, meet; compute, meet; 5 stores.
        let k1 = all_ops(&mut warps(&p, 0)[1]);
        assert_eq!(op_shape(&k1), "mwmwbmwmwbmwbcbmmmmm");
        assert_eq!(k1.iter().filter(|o| **o == Op::Barrier).count(), 4);
        // Kernel 2: J, south c, east c, c, each met after; dN and dS together, dW, dE; compute, meet, store.
        let k2 = all_ops(&mut warps(&p, 1)[1]);
        assert_eq!(op_shape(&k2), "mwbmwbmwbmwbmmwmwmwcbm");
        assert_eq!(k2.iter().filter(|o| **o == Op::Barrier).count(), 5);
    }

    #[test]
    fn both_kernels_compute_for_compute_cycles_and_the_host_copies_j() {
        use crate::workload::Op;
        let p = program(&["workload.kind=srad", "workload.srad.rows=4", "workload.srad.cols=32", "workload.srad.iterations=1"]);
        // Six arrays: J, c and the four derivatives.
        assert_eq!(p.buffers.len(), 6);
        // Kernel 1's latency (compute_cycles 4) after its third barrier; kernel 2's before its last.
        assert_eq!(all_ops(&mut warps(&p, 0)[0])[13], Op::Compute(4));
        assert_eq!(all_ops(&mut warps(&p, 1)[0])[19], Op::Compute(4));
        // Input: J, 4 x 32 floats = 512 bytes.
        assert_eq!(p.host.input_bytes, Some(512));
    }

    /// The operations' shapes: 'r' a host read (offset, bytes), 'i'/'o' J's copy in / out (bytes), 'k' a launch.
    fn host_ops(p: &crate::workload::Program) -> Vec<(char, u64, u64)> {
        use crate::workload::HostOp;
        p.ops
            .iter()
            .map(|op| match op {
                HostOp::HostAccess { buffer: 0, offset, bytes, write: false } => ('r', *offset, *bytes),
                HostOp::MemcpyH2D { bytes } => ('i', 0, *bytes),
                HostOp::MemcpyD2H { bytes } => ('o', 0, *bytes),
                HostOp::Launch(_) => ('k', 0, 0),
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    #[test]
    fn managed_host_reads_the_clamped_roi_row_by_row_before_each_iteration() {
        // 4 x 32 image: Rodinia's 128 x 128 ROI clamps to all 4 rows of 32 pixels (128 bytes each, 128 apart).
        let p = program(&["workload.kind=srad", "workload.srad.rows=4", "workload.srad.cols=32", "workload.managed=true"]);
        let it: Vec<(char, u64, u64)> = (0..4).map(|r| ('r', r * 128, 128)).chain([('k', 0, 0), ('k', 0, 0)]).collect();
        assert_eq!(host_ops(&p), [it.clone(), it].concat());
        // A 2 x 8 ROI of a 16 x 64 image: the first 32 bytes of rows 0 and 1 (rows 256 bytes apart).
        let p = program(&[
            "workload.kind=srad",
            "workload.srad.rows=16",
            "workload.srad.cols=64",
            "workload.srad.roi_rows=2",
            "workload.srad.roi_cols=8",
            "workload.srad.iterations=1",
            "workload.managed=true",
        ]);
        assert_eq!(host_ops(&p), [('r', 0, 32), ('r', 256, 32), ('k', 0, 0), ('k', 0, 0)]);
        // No ROI, no read; and a device-memory J's read is of the host's own copy (nothing to model).
        for sets in [&["workload.managed=true", "workload.srad.roi_cols=0"][..], &["workload.managed=false"]] {
            let p = program(&[&["workload.kind=srad", "workload.srad.rows=4", "workload.srad.cols=32"], sets].concat());
            assert_eq!(host_ops(&p), [('k', 0, 0); 4], "{sets:?}");
        }
    }

    #[test]
    fn explicit_copies_move_j_in_and_out_around_every_iteration() {
        // srad_v2 copies J (4 x 32 floats = 512 bytes) in before kernel 1 and out after kernel 2 each iteration;
        // its five other arrays stay on the GPU.
        let p = program(&[
            "workload.kind=srad",
            "workload.srad.rows=4",
            "workload.srad.cols=32",
            "workload.srad.iterations=3",
            "workload.memcpy_inputs=true",
            "workload.memcpy_outputs=true",
        ]);
        let it = [('i', 0, 512), ('k', 0, 0), ('k', 0, 0), ('o', 0, 512)];
        assert_eq!(host_ops(&p), [it; 3].concat());
        assert_eq!(p.host.input_bytes, Some(512));
        // Only the way in.
        let p = program(&["workload.kind=srad", "workload.srad.rows=4", "workload.srad.cols=32", "workload.memcpy_inputs=true"]);
        assert_eq!(host_ops(&p), [[('i', 0, 512), ('k', 0, 0), ('k', 0, 0)]; 2].concat());
    }

    #[test]
    fn the_multi_gpu_model_refuses_the_managed_roi_read_and_names_the_way_out() {
        let e = refused(&["workload.kind=srad", "workload.managed=true", "multi.gpus=4"]);
        assert!(e.contains("workload.srad.roi_rows") && e.contains("multi.gpus = 1"), "{e}");
        // Without the read, or on device memory, it runs there.
        program(&["workload.kind=srad", "workload.managed=true", "workload.srad.roi_rows=0", "multi.gpus=4"]);
        program(&["workload.kind=srad", "multi.gpus=4"]);
        assert!(refused(&["workload.kind=srad", "workload.srad.roi_cols=16777217"]).contains("roi_cols"));
    }
}
