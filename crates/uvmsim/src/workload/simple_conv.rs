//! `simple-convolution` (AMDAPPSDK SimpleConvolution, "SC" of seed
//! multi-gpu Table 6, "adjacent" pattern, MPKI 0.018 in §3.3.1; MGPUSim
//! `amd/samples/simpleconvolution`): a `mask` x `mask` convolution of a
//! `width` x `height` image; the input is padded to (width + mask - 1) x
//! (height + mask - 1). One thread per output pixel, numbered row-major (so
//! a wavefront wraps across output rows): for each mask row and column it
//! loads the input pixel (load, wait, multiply-add; the mask itself is
//! uniform, scalar loads, not modelled), then stores the output pixel.
//!
//! Checked against the MGPUSim trace (`simpleconvolution.csv.gz`, 510 x 510,
//! mask 3): 4,065 wavefronts, about 48 accesses each, 510 of its 511 pages.
//!
//! Arrays in allocation order: padded input, output (floats). First touch
//! (lockstep): input row-major, the output row-major after it.

use super::grid::{Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of `simple-convolution` (AMDAPPSDK SimpleConvolution as MGPUSim runs it).
    pub struct SimpleConvParams {
        /// Output width in pixels (MGPUSim `-width`; its trace: 510).
        pub width: u64 = 510,
        /// Output height in pixels (MGPUSim `-height`; its trace: 510).
        pub height: u64 = 510,
        /// Mask edge (MGPUSim `-mask-size`, default 3).
        pub mask: u32 = 3,
    }
}

impl SimpleConvParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "width", self.width, 1, 1 << 20)?;
        check(p, "height", self.height, 1, 1 << 20)?;
        check(p, "mask", self.mask as u64, 1, 63)
    }

    /// Padded input and output.
    pub fn footprint(&self) -> u128 {
        let m = self.mask as u128 - 1;
        4 * ((self.width as u128 + m) * (self.height as u128 + m) + self.width as u128 * self.height as u128)
    }
}

pub(super) fn build(p: &SimpleConvParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let m = p.mask as u64;
    let pitch = p.width + m - 1;
    let input = va.alloc(pitch * (p.height + m - 1) * 4, page);
    let output = va.alloc(p.width * p.height * 4, page);
    let arrays = vec![Array { base: input.base, elem_bytes: 4 }, Array { base: output.base, elem_bytes: 4 }];
    let mut body = vec![];
    for j in 0..m {
        for i in 0..m {
            body.extend([Step::load(0, Index::affine(j * pitch + i, 1, pitch)), Step::Wait, Step::Compute(w.compute_cycles)]);
        }
    }
    body.push(Step::store(1, Index::affine(0, 1, p.width)));
    let n = p.width * p.height;
    let k = GridKernel::new([p.width, p.height, 1], n, 1, arrays, body);
    (
        vec![KernelSpec { name: "simple-convolution", threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) }],
        input.bytes,
    )
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;

    #[test]
    fn matches_the_mgpusim_trace() {
        // simpleconvolution.csv.gz (510 x 510, mask 3): 4,065 wavefronts, 196,623 accesses, 511 pages.
        let p = program(&["gpu.warp_size=64", "workload.kind=simple-convolution"]);
        let (waves, acc, pages) = trace_stats(&p, 64);
        assert_eq!(waves, 4065);
        near("accesses", acc as f64, 196_623.0, 0.05);
        near("pages", pages as f64, 511.0, 0.01);
    }

    #[test]
    fn neighbourhood_in_the_padded_input() {
        let p =
            program(&["workload.kind=simple-convolution", "workload.simple_convolution.width=40", "workload.simple_convolution.height=4"]);
        let (i, o) = (p.buffers[0].base, p.buffers[1].base);
        let ops = mem_ops(&mut warps(&p, 0)[1]);
        assert_eq!(ops.len(), 10);
        // Lane 0 of warp 1 = output pixel 32 = (32, 0); lane 8 = (0, 1). Pitch 42.
        assert_eq!((ops[0].1[0], ops[0].1[8]), (i + 4 * 32, i + 4 * 42));
        assert_eq!(ops[8].1[8], i + 4 * (2 * 42 + 2 + 42));
        assert_eq!((ops[9].1[0], ops[9].1[8]), (o + 4 * 32, o + 4 * 40));
    }

    #[test]
    fn taps_go_row_by_row_each_waited_for_and_the_host_copies_the_padded_input() {
        let p =
            program(&["workload.kind=simple-convolution", "workload.simple_convolution.width=40", "workload.simple_convolution.height=4"]);
        let i = p.buffers[0].base;
        // Per tap: load, wait, multiply-add; then the store.
        assert_eq!(op_shape(&all_ops(&mut warps(&p, 0)[0])), "mwc".repeat(9) + "m");
        // Lane 0 = pixel (0, 0): tap 1 = mask row 0, column 1 = element 1; tap 3 = row 1, column 0 = element 42.
        let ops = mem_ops(&mut warps(&p, 0)[0]);
        assert_eq!((ops[1].1[0], ops[3].1[0]), (i + 4, i + 4 * 42));
        // Input: the padded image, (40 + 2) x (4 + 2) floats = 1008 bytes; the output is not copied.
        assert_eq!(p.host.input_bytes, Some(1008));
    }
}
