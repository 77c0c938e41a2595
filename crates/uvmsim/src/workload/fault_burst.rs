//! `fault-burst` (issue 3; svm-apu §IV.B's fault bursts and fault-latency
//! microbenchmark): `faults` threads each touch one new page at the same
//! moment, so with managed memory every thread raises its own first-touch far
//! fault at once. Thread t makes one 4-byte access (a load, or a store with
//! `write`) at `t * stride_bytes` and, for a load, waits for it. With the
//! default 4 KiB stride each thread's page is its own; a smaller stride puts
//! several threads on one page (their faults are duplicates the driver
//! coalesces), a larger one skips pages.
//!
//! "At the same moment" means as soon as each warp is scheduled: every warp
//! issues its access as its first instruction, so all the faults of the
//! resident CTAs are raised within a few cycles; when `faults` exceeds the
//! threads the GPU holds, later CTAs start as earlier ones finish (their
//! faults serviced). For a fault-latency study, vary `faults` (1 to 64 is the
//! svm-apu concurrency range; 512,000 its burst) with `workload.managed = true`.
//!
//! One array; first touch: page `t * stride_bytes / 4096` for t ascending.

use super::{check, Buffer, KernelGen, KernelSpec, Lanes, MemKind, Op, VaAllocator, WarpId, WorkloadConfig};
use crate::config::ByteSize;

section! {
    /// Parameters of the concurrent first-touch fault burst.
    pub struct FaultBurstParams {
        /// Threads, each touching its own address at the same moment (n concurrent first-touch faults).
        pub faults: u64 = 4096,
        /// Distance between the addresses of consecutive threads (bytes or a size; 4KiB = one new page each).
        pub stride_bytes: ByteSize = ByteSize(4096),
        /// Store instead of load (a write fault).
        pub write: bool = false,
    }
}

impl FaultBurstParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        check(p, "faults", self.faults, 1, 1 << 30)?;
        if self.stride_bytes.0 < 4 || self.stride_bytes.0 % 4 != 0 || self.stride_bytes.0 > 1 << 30 {
            return Err((format!("{p}.stride_bytes"), format!("must be a multiple of 4 between 4 and 1GiB, got {}", self.stride_bytes)));
        }
        Ok(())
    }

    /// One 4-byte word every stride_bytes.
    pub fn footprint(&self) -> u128 {
        (self.faults as u128 - 1) * self.stride_bytes.0 as u128 + 4
    }
}

#[derive(Debug, Clone)]
pub struct FaultBurstKernel {
    buf: Buffer,
    stride: u64,
    write: bool,
}

pub(super) fn build(p: &FaultBurstParams, w: &WorkloadConfig, page: u64, va: &mut VaAllocator) -> (Vec<KernelSpec>, u64) {
    let buf = va.alloc((p.faults - 1) * p.stride_bytes.0 + 4, page);
    let gen = KernelGen::FaultBurst(FaultBurstKernel { buf, stride: p.stride_bytes.0, write: p.write });
    (vec![KernelSpec { name: "fault-burst", threads: p.faults, threads_per_cta: w.threads_per_cta, gen }], buf.bytes)
}

impl FaultBurstKernel {
    pub fn warp(&self, id: WarpId) -> FaultBurstWarp {
        FaultBurstWarp {
            base: self.buf.base + id.first_thread * self.stride,
            stride: self.stride,
            lanes: id.lanes,
            write: self.write,
            step: 0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct FaultBurstWarp {
    base: u64,
    stride: u64,
    lanes: u32,
    write: bool,
    step: u8,
}

impl FaultBurstWarp {
    pub fn next(&mut self) -> Op {
        self.step += 1;
        match self.step {
            1 => {
                let kind = if self.write { MemKind::Store } else { MemKind::Load };
                Op::Mem { kind, lanes: Lanes::Strided { base: self.base, stride: self.stride, n: self.lanes }, bytes: 4 }
            }
            2 if !self.write => Op::Wait,
            _ => {
                self.step = 3;
                Op::Exit
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FaultBurstParams;
    use crate::config::ByteSize;
    use crate::workload::testutil::*;
    use crate::workload::MemKind;

    #[test]
    fn the_footprint_ends_at_the_last_threads_word_and_strides_are_whole_words() {
        let f = |stride| FaultBurstParams { faults: 40, stride_bytes: ByteSize(stride), write: false };
        // 40 threads 4 KiB apart: the last word starts at 39 * 4096 and is 4 bytes long.
        assert_eq!(f(4096).footprint(), 39 * 4096 + 4);
        assert_eq!(f(6).validate("w").unwrap_err().0, "w.stride_bytes");
        assert!(f(8).validate("w").is_ok());
    }

    #[test]
    fn each_thread_touches_its_own_page_once() {
        let p = program(&["workload.kind=fault-burst", "workload.fault_burst.faults=40"]);
        let base = p.buffers[0].base;
        assert_eq!(p.buffers[0].bytes, 39 * 4096 + 4);
        let w = warps(&p, 0);
        assert_eq!(w.len(), 2);
        let ops: Vec<_> = w.into_iter().flat_map(|mut w| mem_ops(&mut w)).collect();
        assert_eq!(ops[0], (MemKind::Load, (0..32).map(|t| base + t * 4096).collect()));
        assert_eq!(ops[1], (MemKind::Load, (32..40).map(|t| base + t * 4096).collect()));
        assert_eq!(first_touch(&p), (0..40).map(|t| (0, t)).collect::<Vec<_>>());
    }

    #[test]
    fn stride_and_write() {
        // 1 KiB apart: four threads per page; stores, nothing waits.
        let p = program(&[
            "workload.kind=fault-burst",
            "workload.fault_burst.faults=64",
            "workload.fault_burst.stride_bytes=1KiB",
            "workload.fault_burst.write=true",
        ]);
        let base = p.buffers[0].base;
        let mut w = warps(&p, 0).remove(1);
        let mut s = [0; crate::workload::MAX_LANES];
        let op = w.next(&mut s);
        assert_eq!(addrs(op, &s), (32..64).map(|t| base + t * 1024).collect::<Vec<_>>());
        assert!(matches!(op, crate::workload::Op::Mem { kind: MemKind::Store, .. }));
        assert_eq!(w.next(&mut s), crate::workload::Op::Exit);
        assert_eq!(first_touch(&p), (0..16).map(|pg| (0, pg)).collect::<Vec<_>>());
    }
}
