//! `regular` and `random`: every thread reads, then writes back, one element
//! of a page of its own (uvm-driver Ch. 3 microbenchmarks). `regular` maps
//! thread g to page g; `random` to page perm(g) for a seeded permutation, so
//! every page is touched exactly once in both.

use super::{Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, Permutation, VaAllocator, WarpId, WorkloadConfig, MAX_LANES};
use crate::config::{ByteSize, Config};

section! {
    /// Parameters of the regular / random page-touch kernels.
    pub struct RegularParams {
        /// Threads; each touches one page, so this is also the number of pages.
        pub threads: u64 = 65_536,
        /// Distance between the elements of consecutive threads (the 'page' of the pattern; bytes or a size such as "64KiB").
        pub bytes_per_thread: ByteSize = ByteSize(4096),
        /// Write the element back after reading it.
        pub write: bool = true,
    }
}

impl RegularParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        if !(1..=1 << 34).contains(&self.threads) {
            return Err((format!("{p}.threads"), format!("must be between 1 and 2^34, got {}", self.threads)));
        }
        if !(4..=1 << 30).contains(&self.bytes_per_thread.0) {
            return Err((format!("{p}.bytes_per_thread"), format!("must be between 4 and 1GiB, got {}", self.bytes_per_thread)));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct RegularKernel {
    buf: Buffer,
    p: RegularParams,
    perm: Option<Permutation>,
    compute: u32,
}

pub(super) fn build(
    p: &RegularParams,
    random: bool,
    w: &WorkloadConfig,
    cfg: &Config,
    page: u64,
    va: &mut VaAllocator,
) -> (KernelSpec, u64) {
    let buf = va.alloc(p.threads * p.bytes_per_thread.0, page);
    let perm = random.then(|| Permutation::new(p.threads, crate::sim::mix64(cfg.sim.seed ^ 0x7261_6e64)));
    let kernel = KernelSpec {
        name: if random { "random" } else { "regular" },
        threads: p.threads,
        threads_per_cta: w.threads_per_cta,
        gen: KernelGen::Regular(RegularKernel { buf, p: p.clone(), perm, compute: w.compute_cycles }),
    };
    (kernel, buf.bytes)
}

impl RegularKernel {
    pub fn warp(&self, id: WarpId) -> RegularWarp {
        RegularWarp { k: self.clone(), first: id.first_thread, lanes: id.lanes, phase: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct RegularWarp {
    k: RegularKernel,
    first: u64,
    lanes: u32,
    phase: u8,
}

impl RegularWarp {
    fn lanes(&self, scratch: &mut [u64; MAX_LANES]) -> Lanes {
        let (b, s) = (self.k.buf.base, self.k.p.bytes_per_thread.0);
        match &self.k.perm {
            None => Lanes::Strided { base: b + self.first * s, stride: s, n: self.lanes },
            Some(p) => {
                for (i, slot) in scratch.iter_mut().take(self.lanes as usize).enumerate() {
                    *slot = b + p.apply(self.first + i as u64) * s;
                }
                Lanes::Explicit { n: self.lanes }
            }
        }
    }

    pub fn next(&mut self, scratch: &mut [u64; MAX_LANES]) -> Op {
        self.phase += 1;
        match self.phase {
            1 => Op::Mem { kind: MemKind::Load, lanes: self.lanes(scratch), bytes: 4 },
            2 => Op::Wait,
            3 => Op::Compute(self.k.compute),
            4 if self.k.p.write => Op::Mem { kind: MemKind::Store, lanes: self.lanes(scratch), bytes: 4 },
            _ => {
                self.phase = 9;
                Op::Exit
            }
        }
    }
}
