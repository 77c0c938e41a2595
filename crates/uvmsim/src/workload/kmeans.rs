//! `kmeans` (Hetero-Mark KMeans, "KM" of seed multi-gpu Tables 3 and 6: L2-TLB
//! MPKI 0.502; MGPUSim `amd/samples/kmeans`): first a swap kernel transposes
//! the features from point-major (`feature[p][f]`) to feature-major
//! (`feature_swap[f][p]`): thread `p` loads each of its features (lanes
//! `features * 4` bytes apart: one line per lane for 32 features) and stores
//! it coalesced. Then one launch per iteration: thread `p`, for every
//! cluster and feature, loads `feature_swap[f][p]` (coalesced; the cluster
//! centres are uniform, scalar loads, not modelled), waits and computes, then
//! stores its membership. MGPUSim's sample runs `iterations` launches (its
//! default `-max-iter 5`; Hetero-Mark stops early on convergence).
//!
//! Checked against the MGPUSim trace (`kmeans.csv.gz`, 2048 points): 2,176
//! accesses per swap wavefront (32 x 64 + 32 x 4), 644 per iteration
//! wavefront (5 x 32 x 4 + 4), 130 pages.
//!
//! Arrays in allocation order: feature, feature_swap (floats), membership
//! (ints). First touch (lockstep): feature (all of it, feature 0 of every
//! point first), then feature_swap as each feature row is stored; membership
//! at the end of the first iteration.

use super::grid::{Array, GridKernel, Index, Step};
use super::{check, KernelGen, KernelSpec, VaAllocator, WorkloadConfig};

section! {
    /// Parameters of `kmeans` (Hetero-Mark KMeans as MGPUSim runs it).
    pub struct KmeansParams {
        /// Points, one thread each (MGPUSim `-points`; its trace: 2048).
        pub points: u64 = 2048,
        /// Features per point (MGPUSim default 32).
        pub features: u32 = 32,
        /// Clusters (MGPUSim default 5).
        pub clusters: u32 = 5,
        /// Iterations, one launch each after the swap (MGPUSim `-max-iter`, default 5).
        pub iterations: u32 = 5,
    }
}

impl KmeansParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "points", self.points, 1, 1 << 30)?;
        check(p, "features", self.features as u64, 1, 1024)?;
        check(p, "clusters", self.clusters as u64, 1, 1024)?;
        check(p, "iterations", self.iterations as u64, 1, 1000)
    }

    /// feature, feature_swap, membership.
    pub fn footprint(&self) -> u128 {
        (2 * self.features as u128 + 1) * 4 * self.points as u128
    }
}

pub(super) fn build(p: &KmeansParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let (n, f) = (p.points, p.features as u64);
    let (feat, swap, member) = (va.alloc(n * f * 4, page), va.alloc(n * f * 4, page), va.alloc(n * 4, page));
    let arrays: Vec<Array> = [feat, swap, member].iter().map(|b| Array { base: b.base, elem_bytes: 4 }).collect();
    let spec = |name, k: GridKernel| KernelSpec { name, threads: k.threads(), threads_per_cta: w.threads_per_cta, gen: KernelGen::Grid(k) };
    let mut body = vec![];
    for i in 0..f {
        body.extend([Step::load(0, Index::affine(i, f, 0)), Step::Wait, Step::store(1, Index::affine(i * n, 1, 0))]);
    }
    let mut kernels = vec![spec("kmeans-swap", GridKernel::new([n, 1, 1], n, 1, arrays.clone(), body))];
    let mut body = vec![];
    for _ in 0..p.clusters {
        for i in 0..f {
            body.extend([Step::load(1, Index::affine(i * n, 1, 0)), Step::Wait, Step::Compute(w.compute_cycles)]);
        }
    }
    body.push(Step::store(2, Index::HERE));
    let k = GridKernel::new([n, 1, 1], n, 1, arrays, body);
    kernels.extend((0..p.iterations).map(|_| spec("kmeans", k.clone())));
    (kernels, n * f * 4)
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

    #[test]
    fn matches_the_mgpusim_trace() {
        // kmeans.csv.gz (2048 points, 32 features, 5 clusters, 5 iterations): 192 wavefronts, 172,672 accesses, 130 pages.
        let p = program(&["gpu.warp_size=64", "workload.kind=kmeans"]);
        assert_eq!(trace_stats(&p, 64), (192, 172_672, 130));
    }

    #[test]
    fn swap_transposes_then_iterations_read_feature_major() {
        let p = program(&["workload.kind=kmeans", "workload.kmeans.points=64", "workload.kmeans.features=2", "workload.kmeans.clusters=2"]);
        let (f, s) = (p.buffers[0].base, p.buffers[1].base);
        assert_eq!(kernels(&p).len(), 6);
        let ops = mem_ops(&mut warps(&p, 0)[1]);
        // Points 32..64: feature 0 at p*2, stored at swap[0][p]; feature 1 at p*2+1, stored at swap[1][p].
        assert_eq!(ops[0], (MemKind::Load, (32..64).map(|q| f + 8 * q).collect()));
        assert_eq!(ops[1], (MemKind::Store, (32..64).map(|q| s + 4 * q).collect()));
        assert_eq!(ops[3].1[0], s + 4 * (64 + 32));
        // An iteration: clusters x features coalesced loads, then membership.
        let ops = mem_ops(&mut warps(&p, 1)[0]);
        let firsts: Vec<u64> = ops.iter().map(|(_, v)| v[0]).collect();
        assert_eq!(firsts, [s, s + 256, s, s + 256, p.buffers[2].base]);
    }

    #[test]
    fn loads_are_waited_for_iterations_compute_per_feature_and_the_host_copies_the_features() {
        let p = program(&[
            "workload.kind=kmeans",
            "workload.kmeans.points=64",
            "workload.kmeans.features=2",
            "workload.kmeans.clusters=2",
            "workload.kmeans.iterations=1",
            "workload.compute_cycles=7",
        ]);
        let (f, s, m) = (p.buffers[0].base, p.buffers[1].base, p.buffers[2].base);
        let points = || 32..64u64;
        // Swap, warp 1 (points 32..64): per feature i, load feature[p][i], wait, store feature_swap[i][p].
        let want: Vec<(char, Vec<u64>)> = (0..2)
            .flat_map(|i| {
                [
                    ('l', points().map(|q| f + 4 * (2 * q + i)).collect()),
                    ('w', vec![]),
                    ('s', points().map(|q| s + 4 * (64 * i + q)).collect()),
                ]
            })
            .collect();
        assert_eq!(ops_with_addrs(&mut warps(&p, 0)[1]), want);
        // Iteration, warp 1: per cluster and feature, load feature_swap[i][p], wait, 7 cycles; then the
        // membership store.
        let mut want: Vec<(char, Vec<u64>)> = (0..2 * 2)
            .flat_map(|ci| [('l', points().map(|q| s + 4 * (64 * (ci % 2) + q)).collect()), ('w', vec![]), ('c', vec![7])])
            .collect();
        want.push(('s', points().map(|q| m + 4 * q).collect()));
        assert_eq!(ops_with_addrs(&mut warps(&p, 1)[1]), want);
        // The features (64 x 2 floats = 512 bytes) are copied; feature_swap and membership are not.
        assert_eq!(p.host.input_bytes, Some(512));
        assert_footprint_is_the_buffers(&["workload.kind=kmeans", "workload.kmeans.points=100", "workload.kmeans.features=3"]);
    }
}
