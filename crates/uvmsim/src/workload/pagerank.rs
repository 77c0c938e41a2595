//! `pagerank` (Hetero-Mark PageRank, "PR" of seed multi-gpu Tables 3 and 6:
//! L2-TLB MPKI 0.409, "random" pattern; MGPUSim `amd/samples/pagerank`): the
//! power iteration on a random graph in CSR, one launch per iteration, each
//! a CSR-vector sparse matrix-vector product (one 64-lane wavefront per row,
//! MGPUSim's `PageRankUpdateGpu`): the `spmv` generator in its warp-per-row
//! mode with uniformly random columns (`band_fraction` = 0), the rank vectors
//! swapping roles between iterations.
//!
//! Checked against the MGPUSim trace (`pagerank.csv.gz`, 2048 nodes,
//! sparsity 0.01, 4 iterations): 8,192 wavefronts (rows x iterations) of
//! about 26.5 accesses (row offsets, column indices and values, about 20
//! gathers of the rank vector, the store); 89 pages.
//!
//! Arrays: as `spmv` (row_ptr, col_idx, values, rank, new rank). First touch: as `spmv` before
//! 2026-12-01 (the vector kernel's earlier order, which pagerank keeps: row_ptr, then per chunk the
//! indices and values, then the ranks they point at).

use super::spmv::{self, SpmvParams};
use super::{check, KernelSpec, VaAllocator, WorkloadConfig};
use crate::config::Config;

section! {
    /// Parameters of `pagerank` (Hetero-Mark PageRank as MGPUSim runs it).
    pub struct PagerankParams {
        /// Graph nodes = matrix rows (MGPUSim `-node`; its trace: 2048).
        pub nodes: u64 = 2048,
        /// Edges per node (MGPUSim `-sparsity` x nodes: 0.01 x 2048 = 20.5, rounded down).
        pub edges_per_node: u32 = 20,
        /// Power iterations, one launch each (MGPUSim `-iterations`; its trace: 4).
        pub iterations: u32 = 4,
    }
}

impl PagerankParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "nodes", self.nodes, 1, 1 << 30)?;
        check(p, "edges_per_node", self.edges_per_node as u64, 1, 4096)?;
        check(p, "iterations", self.iterations as u64, 1, 1000)
    }

    fn spmv(&self) -> SpmvParams {
        SpmvParams {
            rows: self.nodes,
            nnz_per_row: self.edges_per_node,
            band_cols: 0,
            band_fraction: 0.0,
            value_bytes: 4,
            warp_per_row: true,
        }
    }

    pub fn footprint(&self) -> u128 {
        self.spmv().footprint()
    }
}

pub(super) fn build(p: &PagerankParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    spmv::build_iterated(&p.spmv(), p.iterations, "pagerank", w, cfg, page, va)
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;

    #[test]
    fn matches_the_mgpusim_trace() {
        // pagerank.csv.gz (2048 nodes, sparsity 0.01, 4 iterations): 8,192 wavefronts, 217,484 accesses, 89 pages.
        let p = program(&["gpu.warp_size=64", "workload.kind=pagerank"]);
        let (waves, acc, pages) = trace_stats(&p, 64);
        assert_eq!(waves, 8192);
        near("accesses", acc as f64, 217_484.0, 0.10);
        near("pages", pages as f64, 89.0, 0.05);
    }

    #[test]
    fn rank_vectors_swap_between_iterations() {
        let p = program(&["workload.kind=pagerank", "workload.pagerank.nodes=64", "workload.pagerank.iterations=4"]);
        let (x, y) = (p.buffers[3], p.buffers[4]);
        let inside = |a: u64, b: crate::workload::Buffer| a >= b.base && a < b.base + b.bytes;
        // MGPUSim's launchPageRank: even iterations read x (the copied ranks) and write y, odd ones the reverse.
        for (k, src, dst) in [(0, x, y), (1, y, x), (2, x, y), (3, y, x)] {
            let ops = mem_ops(&mut warps(&p, k)[0]);
            // Row pointers, indices, values, the gather of the ranks, the store.
            assert_eq!(ops.len(), 5);
            assert!(ops[3].1.iter().all(|&a| inside(a, src)), "launch {k} gathers the other vector");
            assert!(inside(ops[4].1[0], dst), "launch {k} stores to the other vector");
        }
    }
}
