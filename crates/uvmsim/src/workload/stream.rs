//! `stream`: the STREAM triad a[i] = b[i] + s*c[i] with a grid-stride loop.
//! Accesses are fully coalesced and sequential, so after the first touch of a
//! page every access hits in the TLBs: the TLB-hit-heavy benchmark stream.

use super::{Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig};

section! {
    /// Parameters of the STREAM triad.
    pub struct StreamParams {
        /// Elements per array.
        pub elements: u64 = 1 << 22,
        /// Bytes per element.
        pub element_bytes: u32 = 8,
        /// Threads of the grid-stride loop (a multiple of the warp size).
        pub threads: u64 = 1 << 16,
    }
}

impl StreamParams {
    pub fn validate(&self, p: &str, warp: u32) -> Result<(), (String, String)> {
        if !(1..=1 << 36).contains(&self.elements) {
            return Err((format!("{p}.elements"), format!("must be between 1 and 2^36, got {}", self.elements)));
        }
        if !matches!(self.element_bytes, 4 | 8 | 16) {
            return Err((format!("{p}.element_bytes"), format!("must be 4, 8 or 16, got {}", self.element_bytes)));
        }
        if self.threads == 0 || self.threads % warp as u64 != 0 {
            return Err((format!("{p}.threads"), format!("must be a positive multiple of gpu.warp_size ({warp}), got {}", self.threads)));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct StreamKernel {
    a: Buffer,
    b: Buffer,
    c: Buffer,
    p: StreamParams,
    compute: u32,
}

pub(super) fn build(p: &StreamParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (KernelSpec, u64) {
    let bytes = p.elements * p.element_bytes as u64;
    let (a, b, c) = (va.alloc(bytes, page), va.alloc(bytes, page), va.alloc(bytes, page));
    let kernel = KernelSpec {
        name: "stream",
        threads: p.threads,
        threads_per_cta: w.threads_per_cta,
        gen: KernelGen::Stream(StreamKernel { a, b, c, p: p.clone(), compute: w.compute_cycles }),
    };
    (kernel, 2 * bytes)
}

impl StreamKernel {
    pub fn warp(&self, id: WarpId) -> StreamWarp {
        StreamWarp { k: self.clone(), i: id.first_thread, width: id.lanes as u64, step: self.p.threads, phase: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct StreamWarp {
    k: StreamKernel,
    /// First element of the current iteration.
    i: u64,
    width: u64,
    step: u64,
    phase: u8,
}

impl StreamWarp {
    #[inline]
    pub fn next(&mut self) -> Op {
        let n = self.k.p.elements;
        if self.i >= n {
            return Op::Exit;
        }
        let eb = self.k.p.element_bytes as u64;
        let lanes = (n - self.i).min(self.width) as u32;
        let at = |buf: &Buffer| Lanes::Strided { base: buf.base + self.i * eb, stride: eb, n: lanes };
        self.phase += 1;
        match self.phase {
            1 => Op::Mem { kind: MemKind::Load, lanes: at(&self.k.b), bytes: eb as u32 },
            2 => Op::Mem { kind: MemKind::Load, lanes: at(&self.k.c), bytes: eb as u32 },
            3 => Op::Wait,
            4 => Op::Compute(self.k.compute),
            _ => {
                let op = Op::Mem { kind: MemKind::Store, lanes: at(&self.k.a), bytes: eb as u32 };
                self.phase = 0;
                self.i += self.step;
                op
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::MemKind::{Load as L, Store as S};

    #[test]
    fn a_warp_strides_by_the_grid_and_its_last_trip_takes_the_elements_left() {
        // 100 elements, 64 threads: warp 1 takes elements 32..64, then 96..100 (4 lanes);
        // per trip b then c loaded, a stored (8-byte elements).
        let p = program(&["workload.kind=stream", "workload.stream.elements=100", "workload.stream.threads=64"]);
        let [a, b, c] = [0, 1, 2].map(|i| p.buffers[i].base);
        let at = |buf: u64, r: std::ops::Range<u64>| r.map(|e| buf + 8 * e).collect::<Vec<_>>();
        assert_eq!(
            mem_ops(&mut warps(&p, 0).remove(1)),
            [(L, at(b, 32..64)), (L, at(c, 32..64)), (S, at(a, 32..64)), (L, at(b, 96..100)), (L, at(c, 96..100)), (S, at(a, 96..100))]
        );
    }
}
