//! `stride` and `concurrency`: each work-item makes K dependent accesses S
//! bytes apart in a region of its own (svm-apu §IV.A: "Each workitem accesses
//! 10,000 different memory locations in a loop and performs a simple
//! computation (XOR) on the data"). Work-items are lanes of the same warps,
//! so N work-items give up to N concurrent misses per instruction.

use super::{pages_of, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig};
use crate::config::{ByteSize, Config};

section! {
    /// Parameters of the stride / concurrency microbenchmarks.
    pub struct StrideParams {
        /// Work-items (threads); each works in its own region.
        pub work_items: u32 = 1,
        /// Dependent accesses per work-item.
        pub accesses: u32 = 10_000,
        /// Distance between consecutive accesses of one work-item (bytes, or a size such as "4KiB").
        pub stride_bytes: ByteSize = ByteSize(64),
        /// Bytes read per access.
        pub access_bytes: u32 = 4,
    }
}

impl StrideParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        if !(1..=1 << 20).contains(&self.work_items) {
            return Err((format!("{p}.work_items"), format!("must be between 1 and 1048576, got {}", self.work_items)));
        }
        if self.accesses == 0 {
            return Err((format!("{p}.accesses"), "must be greater than 0".into()));
        }
        if self.stride_bytes.0 == 0 || self.stride_bytes.0 > 1 << 30 {
            return Err((format!("{p}.stride_bytes"), format!("must be between 1 and 1GiB, got {}", self.stride_bytes)));
        }
        if !matches!(self.access_bytes, 1 | 2 | 4 | 8 | 16) {
            return Err((format!("{p}.access_bytes"), format!("must be 1, 2, 4, 8 or 16, got {}", self.access_bytes)));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct StrideKernel {
    buf: Buffer,
    region: u64,
    p: StrideParams,
    compute: u32,
}

pub(super) fn build(p: &StrideParams, w: &WorkloadConfig, _cfg: &Config, page: u64, va: &mut VaAllocator) -> (KernelSpec, u64) {
    // Regions are padded to an odd number of pages: work-items whose regions
    // started a power of two of pages apart would all map to a few TLB sets.
    let region = (pages_of(p.accesses as u64 * p.stride_bytes.0, page) | 1) * page;
    let buf = va.alloc(region * p.work_items as u64, page);
    let kernel = KernelSpec {
        name: "stride",
        threads: p.work_items as u64,
        threads_per_cta: w.threads_per_cta,
        gen: KernelGen::Stride(StrideKernel { buf, region, p: p.clone(), compute: w.compute_cycles }),
    };
    (kernel, buf.bytes)
}

impl StrideKernel {
    pub fn warp(&self, id: WarpId) -> StrideWarp {
        StrideWarp {
            base: self.buf.base + id.first_thread * self.region,
            region: self.region,
            stride: self.p.stride_bytes.0,
            left: self.p.accesses,
            lanes: id.lanes,
            bytes: self.p.access_bytes,
            compute: self.compute,
            phase: 0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct StrideWarp {
    base: u64,
    region: u64,
    stride: u64,
    left: u32,
    lanes: u32,
    bytes: u32,
    compute: u32,
    phase: u8,
}

impl StrideWarp {
    #[inline]
    pub fn next(&mut self) -> Op {
        if self.left == 0 {
            return Op::Exit;
        }
        match self.phase {
            0 => {
                self.phase = 1;
                Op::Mem {
                    kind: MemKind::Load,
                    lanes: Lanes::Strided { base: self.base, stride: self.region, n: self.lanes },
                    bytes: self.bytes,
                }
            }
            1 => {
                self.phase = 2;
                Op::Wait
            }
            _ => {
                self.phase = 0;
                self.left -= 1;
                self.base += self.stride;
                Op::Compute(self.compute)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{Lanes, MemKind, Op};

    #[test]
    fn regions_are_an_odd_number_of_pages_and_each_access_waits_then_computes() {
        // 2 accesses 4 KiB apart need 2 pages, padded to 3: the two work-items' lanes are 12 KiB apart.
        let p = program(&[
            "workload.kind=stride",
            "workload.stride.work_items=2",
            "workload.stride.accesses=2",
            "workload.stride.stride_bytes=4KiB",
        ]);
        let base = p.buffers[0].base;
        assert_eq!(p.buffers[0].bytes, 2 * 3 * 4096);
        let load = |at| Op::Mem { kind: MemKind::Load, lanes: Lanes::Strided { base: at, stride: 3 * 4096, n: 2 }, bytes: 4 };
        let ops = all_ops(&mut warps(&p, 0).remove(0));
        assert_eq!(ops, [load(base), Op::Wait, Op::Compute(4), load(base + 4096), Op::Wait, Op::Compute(4)]);
    }
}
