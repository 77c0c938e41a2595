//! `srad` (Rodinia srad_v2): speckle-reducing anisotropic diffusion on a
//! rows x cols image, two kernels per iteration. Kernel 1: each pixel loads
//! its value J and its four neighbours' (N, S, W, E, clamped at the image
//! edge), computes the directional derivatives and the diffusion coefficient,
//! and stores dN, dS, dW, dE and c. Kernel 2: each pixel loads its c and its
//! south and east neighbours' c, its dN, dS, dW, dE and J, and stores the
//! updated J. Each kernel meets its CTA at Rodinia's barriers (4 and 5): the
//! first once the loads have landed, the last before the stores.
//!
//! Simplified from Rodinia: one thread per pixel, row-major (Rodinia uses 16 x
//! 16 thread tiles); the statistics of the region of interest (a host-side
//! reduction in srad_v2) are not modelled.
//!
//! Arrays in allocation order: J, c, dN, dS, dW, dE. First touch (lockstep):
//! J row-major (kernel 1's loads), then dN, dS, dW, dE and c, each row-major in that store order.

use super::grid::{staged, Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of the Rodinia SRAD image diffusion.
    pub struct SradParams {
        /// Image rows (pixels along y).
        pub rows: u64 = 256,
        /// Image columns (pixels along x, contiguous).
        pub cols: u64 = 256,
        /// Iterations; each is two kernel launches.
        pub iterations: u32 = 2,
    }
}

impl SradParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "rows", self.rows, 1, 1 << 24)?;
        check(p, "cols", self.cols, 1, 1 << 24)?;
        check(p, "iterations", self.iterations as u64, 1, 10_000)
    }

    /// J, c and the four derivative arrays, floats.
    pub fn footprint(&self) -> u128 {
        6 * self.rows as u128 * self.cols as u128 * 4
    }
}

const J: u8 = 0;
const C: u8 = 1;
const DN: u8 = 2;

pub(super) fn build(p: &SradParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let bytes = p.rows * p.cols * 4;
    let arrays: Vec<Array> = (0..6).map(|_| Array { base: va.alloc(bytes, page).base, elem_bytes: 4 }).collect();
    let here = Index::HERE;
    let mut k1: Vec<Step> =
        [(0, 0), (0, -1), (0, 1), (-1, 0), (1, 0)].iter().map(|&(dx, dy)| Step::load(J, Index::at(dx, dy, 0))).collect();
    // srad_cuda_1 meets 4 times: after staging north/south, west/east and the centre in shared
    // memory (here loaded together: the first barrier follows them all), and before its stores.
    k1.push(Step::Wait);
    k1.extend(staged(0, w.compute_cycles, 4));
    k1.extend((DN..DN + 4).map(|d| Step::store(d, here)));
    k1.push(Step::store(C, here));
    let mut k2 = vec![Step::load(C, here), Step::load(C, Index::at(0, 1, 0)), Step::load(C, Index::at(1, 0, 0))];
    k2.extend((DN..DN + 4).map(|d| Step::load(d, here)));
    // srad_cuda_2 meets 5 times: after staging J, south c, east c and c, and before its store.
    k2.extend([Step::load(J, here), Step::Wait]);
    k2.extend(staged(0, w.compute_cycles, 5));
    k2.push(Step::store(J, here));
    let kernel = |body: &Vec<Step>| {
        let k = GridKernel::new([p.cols, p.rows, 1], p.rows * p.cols, 1, arrays.clone(), body.clone());
        KernelSpec { name: "srad", threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) }
    };
    let kernels = (0..p.iterations).flat_map(|_| [kernel(&k1), kernel(&k2)]).collect();
    (kernels, bytes)
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
        // Pixel (0, 1) = lane 0 of warp 1.
        let k1: Vec<(MemKind, u64)> = mem_ops(&mut warps(&p, 0)[1]).iter().map(|(k, a)| (*k, a[0])).collect();
        let loads = [px(0, 0, 1), px(0, 0, 0), px(0, 0, 2), px(0, 0, 1), px(0, 1, 1)];
        let stores = [px(2, 0, 1), px(3, 0, 1), px(4, 0, 1), px(5, 0, 1), px(1, 0, 1)];
        assert_eq!(k1, loads.map(|a| (MemKind::Load, a)).into_iter().chain(stores.map(|a| (MemKind::Store, a))).collect::<Vec<_>>());
        let k2: Vec<(MemKind, u64)> = mem_ops(&mut warps(&p, 1)[1]).iter().map(|(k, a)| (*k, a[0])).collect();
        let loads = [px(1, 0, 1), px(1, 0, 2), px(1, 1, 1), px(2, 0, 1), px(3, 0, 1), px(4, 0, 1), px(5, 0, 1), px(0, 0, 1)];
        assert_eq!(k2[..8], loads.map(|a| (MemKind::Load, a)));
        assert_eq!(k2[8], (MemKind::Store, px(0, 0, 1)));
        assert_eq!(first_touch(&p).iter().map(|&(b, _)| b).collect::<Vec<_>>(), [0, 2, 3, 4, 5, 1]);
    }

    #[test]
    fn each_kernel_meets_after_its_loads_and_before_its_stores() {
        use crate::workload::Op;
        let p = program(&["workload.kind=srad", "workload.srad.rows=4", "workload.srad.cols=32", "workload.srad.iterations=1"]);
        for (k, (loads, barriers, stores)) in [(5, 4, 5), (8, 5, 1)].into_iter().enumerate() {
            let ops = all_ops(&mut warps(&p, k)[1]);
            assert!(ops[..loads].iter().all(|o| matches!(o, Op::Mem { .. })));
            assert_eq!(ops[loads..loads + 2], [Op::Wait, Op::Barrier]);
            assert!(matches!(ops[loads + 2], Op::Compute(_)));
            assert_eq!(ops[loads + 3..loads + 2 + barriers], vec![Op::Barrier; barriers - 1]);
            assert_eq!(ops.len(), loads + 2 + barriers + stores);
        }
    }
}
