//! `vecadd-probe`: seed uvm-driver Listing 3.1, the vector addition that
//! exposes how faults reach the fault buffer. Each thread adds the first
//! float of a page of `a` and `b` into `c`, for `iterations` pages
//! (`page_k = tid * 512 + k * 512 * threads` floats); per iteration the warp
//! issues LDG a, LDG b, waits (FADD needs both), and STG c (Listing 3.2).
//! With `prefetch`, the warp first issues `prefetch.global.L2` for every page
//! it will touch (seed §3.2.1, Fig. 3.3).

use super::{Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig};

section! {
    /// Parameters of the vector-addition fault probe.
    pub struct VecaddParams {
        /// Threads (Listing 3.1: 32, one warp).
        pub threads: u32 = 32,
        /// Additions per thread, each on its own page of a, b and c (Listing 3.1: 3).
        pub iterations: u32 = 3,
        /// Prefetch every page first with prefetch instructions (Fig. 3.3).
        pub prefetch: bool = false,
    }
}

impl VecaddParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        if !(1..=1 << 20).contains(&self.threads) {
            return Err((format!("{p}.threads"), format!("must be between 1 and 1048576, got {}", self.threads)));
        }
        if !(1..=1024).contains(&self.iterations) {
            return Err((format!("{p}.iterations"), format!("must be between 1 and 1024, got {}", self.iterations)));
        }
        Ok(())
    }
}

const PAGE: u64 = 4096;

#[derive(Debug, Clone)]
pub struct VecaddKernel {
    bufs: [Buffer; 3],
    p: VecaddParams,
    compute: u32,
}

pub(super) fn build(p: &VecaddParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (KernelSpec, u64) {
    let bytes = p.threads as u64 * p.iterations as u64 * PAGE;
    let bufs = [va.alloc(bytes, page), va.alloc(bytes, page), va.alloc(bytes, page)];
    let kernel = KernelSpec {
        name: "vecadd-probe",
        threads: p.threads as u64,
        threads_per_cta: w.threads_per_cta,
        gen: KernelGen::Vecadd(VecaddKernel { bufs, p: p.clone(), compute: w.compute_cycles }),
    };
    (kernel, 2 * bytes)
}

impl VecaddKernel {
    pub fn warp(&self, id: WarpId) -> VecaddWarp {
        VecaddWarp { k: self.clone(), first: id.first_thread, lanes: id.lanes, step: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct VecaddWarp {
    k: VecaddKernel,
    first: u64,
    lanes: u32,
    step: u32,
}

impl VecaddWarp {
    /// Lanes of array `a` (0, 1, 2 = a, b, c) at iteration `it`.
    fn at(&self, array: usize, it: u32) -> Lanes {
        let threads = self.k.p.threads as u64;
        let base = self.k.bufs[array].base + (self.first + it as u64 * threads) * PAGE;
        Lanes::Strided { base, stride: PAGE, n: self.lanes }
    }

    pub fn next(&mut self) -> Op {
        let its = self.k.p.iterations;
        let pre = if self.k.p.prefetch { 3 * its } else { 0 };
        let s = self.step;
        self.step += 1;
        if s < pre {
            // Prefetch a, b, c of every iteration, array by array.
            return Op::Mem { kind: MemKind::Prefetch, lanes: self.at((s / its) as usize, s % its), bytes: 4 };
        }
        let s = s - pre;
        let (it, phase) = (s / 5, s % 5);
        if it >= its {
            self.step -= 1; // stay at the end
            return Op::Exit;
        }
        match phase {
            0 => Op::Mem { kind: MemKind::Load, lanes: self.at(0, it), bytes: 4 },
            1 => Op::Mem { kind: MemKind::Load, lanes: self.at(1, it), bytes: 4 },
            2 => Op::Wait,
            3 => Op::Compute(self.k.compute),
            _ => Op::Mem { kind: MemKind::Store, lanes: self.at(2, it), bytes: 4 },
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind::{Load as L, Prefetch as P, Store as S};

    #[test]
    fn iteration_k_is_a_grid_of_pages_further_and_prefetches_go_array_by_array() {
        // 64 threads, 2 iterations: thread t's page of iteration k is t + 64 k. Warp 1 = threads 32..64.
        let p = program(&[
            "workload.kind=vecadd-probe",
            "workload.vecadd_probe.threads=64",
            "workload.vecadd_probe.iterations=2",
            "workload.vecadd_probe.prefetch=true",
        ]);
        let [a, b, c] = [0, 1, 2].map(|i| p.buffers[i].base);
        let pages = |buf: u64, k: u64| (32..64).map(|t| buf + (t + 64 * k) * 4096).collect::<Vec<_>>();
        let want = vec![
            (P, pages(a, 0)),
            (P, pages(a, 1)),
            (P, pages(b, 0)),
            (P, pages(b, 1)),
            (P, pages(c, 0)),
            (P, pages(c, 1)),
            (L, pages(a, 0)),
            (L, pages(b, 0)),
            (S, pages(c, 0)),
            (L, pages(a, 1)),
            (L, pages(b, 1)),
            (S, pages(c, 1)),
        ];
        assert_eq!(mem_ops(&mut warps(&p, 0).remove(1)), want);
        // The inputs are a and b: 2 * 64 threads * 2 pages * 4 KiB.
        assert_eq!(p.host.input_bytes, Some(2 * 64 * 2 * 4096));
    }
}
