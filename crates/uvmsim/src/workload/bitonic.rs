//! `bitonic-sort` (AMDAPPSDK BitonicSort, "BS" of seed multi-gpu Table 3:
//! L2-TLB MPKI 0.102, "random" pattern; MGPUSim `amd/samples/bitonicsort`):
//! sorts `length` u32 keys in place with one launch per pass: for stage `s`
//! in 0..log2(length) and pass `q` in 0..=s, the pair distance is `d =
//! 2^(s-q)` and thread `t` (length / 2 threads) compares
//! `left = (t mod d) + (t / d) * 2d` with `right = left + d`: it loads both,
//! waits, compares and stores both (the kernel always writes both).
//! log2(n) (log2(n) + 1) / 2 launches: 91 for 8192 keys.
//!
//! Checked against the MGPUSim trace (`bitonicsort.csv.gz`, 8192 keys):
//! 5,824 wavefronts (91 x 64), 16 accesses per wavefront when d >= 64 (4
//! lines per load or store) and 32 when d < 64 (each spans 8 lines), 8 pages.
//!
//! One array. First touch (lockstep): ascending (stage 0 pairs neighbours).

use super::grid::{Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of `bitonic-sort` (AMDAPPSDK bitonic sort as MGPUSim runs it).
    pub struct BitonicParams {
        /// Keys (u32), a power of two (MGPUSim `-length`; its trace: 8192).
        pub length: u64 = 8192,
    }
}

impl BitonicParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "length", self.length, 2, 1 << 32)?;
        if !self.length.is_power_of_two() {
            return Err((format!("{p}.length"), format!("must be a power of two, got {}", self.length)));
        }
        Ok(())
    }

    pub fn footprint(&self) -> u128 {
        4 * self.length as u128
    }
}

pub(super) fn build(p: &BitonicParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let data = va.alloc(p.length * 4, page);
    let arrays = vec![Array { base: data.base, elem_bytes: 4 }];
    let half = p.length / 2;
    let stages = p.length.trailing_zeros() as u64;
    let mut kernels = vec![];
    for s in 0..stages {
        for q in 0..=s {
            let d = 1u64 << (s - q);
            // x = t mod d, y = t / d: left = x + 2d y, right = left + d.
            let (l, r) = (Index::affine(0, 1, 2 * d), Index::affine(d, 1, 2 * d));
            let body =
                vec![Step::load(0, l), Step::load(0, r), Step::Wait, Step::Compute(w.compute_cycles), Step::store(0, l), Step::store(0, r)];
            let k = GridKernel::new([d, half / d, 1], half, 1, arrays.clone(), body);
            kernels.push(KernelSpec {
                name: "bitonic-sort",
                threads: k.threads(),
                threads_per_cta: w.threads_per_cta,
                gen: KernelGen::Grid(k),
            });
        }
    }
    (kernels, data.bytes)
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;

    #[test]
    fn matches_the_mgpusim_trace() {
        // bitonicsort.csv.gz (8192 keys): 5,824 wavefronts, 140,288 accesses (46 passes x 64 wavefronts
        // with d < 16 make 32, the rest 16), 8 pages.
        let p = program(&["gpu.warp_size=64", "workload.kind=bitonic-sort"]);
        assert_eq!(trace_stats(&p, 64), (5824, 140_288, 8));
    }

    #[test]
    fn pairs_are_the_pair_distance_apart() {
        let p = program(&["workload.kind=bitonic-sort", "workload.bitonic_sort.length=256"]);
        assert_eq!(kernels(&p).len(), 8 * 9 / 2);
        let b = p.buffers[0].base;
        // Stage 2, pass 0 (launch 3): d = 4; thread t pairs (t%4 + t/4*8) with +4.
        let ops = mem_ops(&mut warps(&p, 3)[0]);
        let left: Vec<u64> = (0..32u64).map(|t| b + 4 * (t % 4 + t / 4 * 8)).collect();
        assert_eq!(ops[0].1, left);
        assert_eq!(ops[1].1, left.iter().map(|a| a + 16).collect::<Vec<_>>());
        assert_eq!((ops[2].1.clone(), ops[3].1.clone()), (ops[0].1.clone(), ops[1].1.clone()));
    }

    #[test]
    fn a_pass_loads_both_keys_waits_compares_and_stores_both_and_the_host_copies_the_keys() {
        let p = program(&["workload.kind=bitonic-sort", "workload.bitonic_sort.length=128", "workload.compute_cycles=7"]);
        let b = p.buffers[0].base;
        // Stage 6, pass 0 (launch 6 x 7 / 2 = 21): d = 64; warp 1 = threads 32..64, left = t, right = t + 64.
        let (l, r): (Vec<u64>, Vec<u64>) = (32..64u64).map(|t| (b + 4 * t, b + 4 * (t + 64))).unzip();
        let want = vec![('l', l.clone()), ('l', r.clone()), ('w', vec![]), ('c', vec![7]), ('s', l), ('s', r)];
        assert_eq!(ops_with_addrs(&mut warps(&p, 21)[1]), want);
        // In place: the keys (128 x 4 bytes) are the input.
        assert_eq!(p.host.input_bytes, Some(512));
        assert_footprint_is_the_buffers(&["workload.kind=bitonic-sort", "workload.bitonic_sort.length=64"]);
        // Passes need a power of two: 96 (even) is refused.
        assert!(refused(&["workload.kind=bitonic-sort", "workload.bitonic_sort.length=96"]).contains("power of two"));
    }
}
