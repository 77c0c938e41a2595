//! `fir` (Hetero-Mark FIR, the FIR of seed multi-gpu Tables 3 and 6: L2-TLB
//! MPKI 0.009, "adjacent" pattern; MGPUSim `amd/samples/fir`): one thread per
//! output sample, `taps` taps. Thread `t` loads `input[t - j]` for each tap
//! `j` in turn (load, wait, multiply-add: the loop is not unrolled, so each
//! tap's load waits for the previous one), then stores `output[t]`. The
//! coefficients are uniform across the wavefront (scalar loads in GCN3, not
//! modelled); threads `t < j` read Hetero-Mark's `history` array instead, a
//! few samples, modelled as the clamped `input[0]`.
//!
//! Checked against the MGPUSim trace (`fir.csv.gz`, `-length 524288`): 83
//! coalesced 64 B accesses per 64-lane wavefront (tap 0 aligned: 4 lines;
//! taps 1..15 shifted: 5 lines each; the store: 4) and 1,024 of its 1,025 pages.
//!
//! Arrays in allocation order: input, output (floats). First touch
//! (lockstep): input ascending, then output ascending.

use super::grid::{Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of `fir` (Hetero-Mark FIR as MGPUSim runs it).
    pub struct FirParams {
        /// Input samples (floats), one thread each (MGPUSim `-length`; its trace: 524,288).
        pub length: u64 = 524_288,
        /// Filter taps (Hetero-Mark FIR: 16).
        pub taps: u32 = 16,
    }
}

impl FirParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "length", self.length, 1, 1 << 34)?;
        check(p, "taps", self.taps as u64, 1, 1024)
    }

    /// Input and output.
    pub fn footprint(&self) -> u128 {
        2 * 4 * self.length as u128
    }
}

pub(super) fn build(p: &FirParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let bytes = p.length * 4;
    let (input, output) = (va.alloc(bytes, page), va.alloc(bytes, page));
    let mut body = vec![];
    for j in 0..p.taps as i32 {
        body.extend([Step::load(0, Index::at(-j, 0, 0)), Step::Wait, Step::Compute(w.compute_cycles)]);
    }
    body.push(Step::store(1, Index::HERE));
    let arrays = vec![Array { base: input.base, elem_bytes: 4 }, Array { base: output.base, elem_bytes: 4 }];
    let k = GridKernel::new([p.length, 1, 1], p.length, 1, arrays, body);
    (vec![KernelSpec { name: "fir", threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) }], bytes)
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;

    #[test]
    fn matches_the_mgpusim_trace() {
        // fir.csv.gz (-length 524288): 8,192 wavefronts, 679,936 accesses (83 each), 1,025 pages.
        let p = program(&["gpu.warp_size=64", "workload.kind=fir"]);
        let (waves, acc, pages) = trace_stats(&p, 64);
        assert_eq!(waves, 8192);
        near("accesses", acc as f64, 679_936.0, 0.01);
        near("pages", pages as f64, 1025.0, 0.01);
    }

    #[test]
    fn taps_read_earlier_samples_one_at_a_time() {
        let p = program(&["workload.kind=fir", "workload.fir.length=256", "workload.fir.taps=3"]);
        let (i, o) = (p.buffers[0].base, p.buffers[1].base);
        let ops = mem_ops(&mut warps(&p, 0)[1]);
        // Warp 1 = samples 32..64: taps 0, 1, 2 read 32.., 31.., 30..; then the store.
        let firsts: Vec<u64> = ops.iter().map(|(_, v)| v[0]).collect();
        assert_eq!(firsts, [i + 128, i + 124, i + 120, o + 128]);
        // Warp 0, tap 2: samples 0 and 1 clamp to input[0] (Hetero-Mark reads its small history there).
        assert_eq!(mem_ops(&mut warps(&p, 0)[0])[2].1[..3], [i, i, i]);
    }

    #[test]
    fn each_tap_waits_for_its_sample_then_multiply_adds_and_the_host_copies_the_input() {
        let p = program(&["workload.kind=fir", "workload.fir.length=256", "workload.fir.taps=3", "workload.compute_cycles=7"]);
        let (i, o) = (p.buffers[0].base, p.buffers[1].base);
        // Warp 1 = samples 32..64: per tap j the load of input[t - j], a wait, one multiply-add of 7
        // cycles (the loop is not unrolled); then the store of output[t].
        let tap = |j: u64| [('l', (32..64).map(|t| i + 4 * (t - j)).collect()), ('w', vec![]), ('c', vec![7])];
        let want: Vec<(char, Vec<u64>)> =
            [tap(0), tap(1), tap(2)].concat().into_iter().chain([('s', (32..64).map(|t| o + 4 * t).collect())]).collect();
        assert_eq!(ops_with_addrs(&mut warps(&p, 0)[1]), want);
        // The input (256 floats = 1024 bytes) is copied; the output is not.
        assert_eq!(p.host.input_bytes, Some(1024));
        assert_footprint_is_the_buffers(&["workload.kind=fir", "workload.fir.length=1000", "workload.fir.taps=5"]);
    }
}
