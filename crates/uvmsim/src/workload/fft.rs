//! `fft` (SHOC FFT, seed multi-gpu Table 3: L2-TLB MPKI 0.008, "stride"
//! pattern; MGPUSim `amd/samples/fft`): in-place 512-point FFTs of complex
//! single-precision points, one 64-thread work-group per 512 points (4 KiB):
//! thread `l` loads points `l, l + 64, ..., l + 448` of its transform (eight
//! coalesced 512 B loads), waits, computes the butterflies (in registers and
//! local memory), and stores the eight points back the same way. One launch
//! (MGPUSim `-passes 1`).
//!
//! Checked against the MGPUSim trace (`fft.csv.gz`, 2 MiB): 512 wavefronts,
//! 64 loads + 64 stores of 64 B each, 512 pages. (MGPUSim issues the eight
//! loads in a permuted order; the lines and pages are the same.)
//!
//! One array. First touch (lockstep): ascending, one 4 KiB transform per warp.

use super::grid::{Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of `fft` (SHOC FFT as MGPUSim runs it).
    pub struct FftParams {
        /// Complex single-precision points (8 B each), a multiple of 512 (MGPUSim `-bytes` / 8; its trace: 262,144 = 2 MiB).
        pub points: u64 = 262_144,
    }
}

impl FftParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "points", self.points, 512, 1 << 34)?;
        if self.points % 512 != 0 {
            return Err((format!("{p}.points"), format!("must be a multiple of 512, got {}", self.points)));
        }
        Ok(())
    }

    pub fn footprint(&self) -> u128 {
        8 * self.points as u128
    }
}

pub(super) fn build(p: &FftParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let data = va.alloc(p.points * 8, page);
    let arrays = vec![Array { base: data.base, elem_bytes: 8 }];
    // x = thread in the transform (0..64), y = transform: point i*64 + x + 512 y.
    let at = |i: u64| Index::affine(i * 64, 1, 512);
    let mut body: Vec<Step> = (0..8).map(|i| Step::load(0, at(i))).collect();
    body.extend([Step::Wait, Step::Compute(8 * w.compute_cycles)]);
    body.extend((0..8).map(|i| Step::store(0, at(i))));
    let k = GridKernel::new([64, p.points / 512, 1], p.points / 8, 1, arrays, body);
    (vec![KernelSpec { name: "fft", threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) }], data.bytes)
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;

    #[test]
    fn matches_the_mgpusim_trace() {
        // fft.csv.gz (2 MiB): 512 wavefronts, 65,536 accesses (64 loads + 64 stores), 512 pages.
        let p = program(&["gpu.warp_size=64", "workload.kind=fft"]);
        assert_eq!(trace_stats(&p, 64), (512, 65_536, 512));
    }

    #[test]
    fn each_group_stays_in_its_own_4k() {
        let p = program(&["gpu.warp_size=64", "workload.kind=fft", "workload.fft.points=1024", "workload.threads_per_cta=64"]);
        let b = p.buffers[0].base;
        let k = kernels(&p)[0];
        let mut w = k.gen.warp(crate::workload::WarpId { global: 1, first_thread: 64, lanes: 64 });
        let ops = mem_ops(&mut w);
        assert_eq!(ops.len(), 16);
        for (i, (_, v)) in ops.iter().enumerate() {
            assert_eq!(v[0], b + 4096 + 512 * (i as u64 % 8));
            assert!(v.iter().all(|a| (a - b) / 4096 == 1));
        }
    }

    #[test]
    fn eight_loads_one_wait_the_butterflies_then_eight_stores_and_the_host_copies_the_data() {
        let p = program(&["workload.kind=fft", "workload.fft.points=1024", "workload.compute_cycles=7"]);
        let b = p.buffers[0].base;
        // Warp 3 = threads 32..64 of transform 1 (points 512..1024): point 512 + 64 i + l, 8 bytes each.
        let at = |i: u64| (32..64u64).map(|l| b + 8 * (512 + 64 * i + l)).collect::<Vec<_>>();
        let mut want: Vec<(char, Vec<u64>)> = (0..8).map(|i| ('l', at(i))).collect();
        // One wait, then the eight points' butterflies: 8 x 7 cycles.
        want.extend([('w', vec![]), ('c', vec![56])]);
        want.extend((0..8).map(|i| ('s', at(i))));
        assert_eq!(ops_with_addrs(&mut warps(&p, 0)[3]), want);
        // In place: the data (1024 points x 8 bytes) is the input.
        assert_eq!(p.host.input_bytes, Some(8192));
        assert_footprint_is_the_buffers(&["workload.kind=fft", "workload.fft.points=1536"]);
        // A transform is 512 points: 768 is refused, 1536 accepted (above).
        assert!(refused(&["workload.kind=fft", "workload.fft.points=768"]).contains("workload.fft.points"));
    }
}
