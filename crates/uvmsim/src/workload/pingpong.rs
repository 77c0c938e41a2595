//! `ping-pong`: the host and the GPU take turns on the same managed pages
//! (issue 4's thrashing scenario). Each iteration launches the `regular`
//! kernel over the buffer (thread g reads, and with `gpu_write` writes, one
//! element of page g), then the host touches every page of the buffer
//! (writes, or reads), then computes for `host_us`. With managed memory the
//! pages migrate to the GPU at each kernel and back at each host phase until
//! thrashing mitigation throttles, then pins them (docs/workloads.md).
//! One allocation: `pages` × 4 KiB (index 0).

use super::regular::{self, RegularParams};
use super::{HostOp, KernelSpec, VaAllocator, WorkloadConfig};
use crate::config::{ByteSize, Config};

section! {
    /// Parameters of the host/GPU ping-pong.
    pub struct PingPongParams {
        /// Pages of the buffer (4 KiB each); one GPU thread per page.
        pub pages: u64 = 16,
        /// Iterations: kernel, host access, host compute.
        pub iterations: u32 = 2000,
        /// The GPU kernel writes its element back after reading it.
        pub gpu_write: bool = false,
        /// The host writes the pages (else reads them).
        pub host_write: bool = true,
        /// Host computation after its access, in µs.
        pub host_us: f64 = 100.0,
    }
}

impl PingPongParams {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        super::check(p, "pages", self.pages, 1, 1 << 24)?;
        super::check(p, "iterations", self.iterations as u64, 1, 1_000_000)?;
        if !(self.host_us.is_finite() && (0.0..=1e9).contains(&self.host_us)) {
            return Err((format!("{p}.host_us"), format!("must be between 0 and 1e9 µs, got {}", self.host_us)));
        }
        Ok(())
    }

    pub fn footprint(&self) -> u128 {
        self.pages as u128 * 4096
    }
}

pub(super) fn build(p: &PingPongParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> Vec<HostOp> {
    let r = RegularParams { threads: p.pages, bytes_per_thread: ByteSize(4096), write: p.gpu_write };
    let (mut k, bytes): (KernelSpec, u64) = regular::build(&r, false, w, cfg, page, va);
    k.name = "ping-pong";
    let mut ops = vec![];
    for _ in 0..p.iterations {
        ops.push(HostOp::Launch(k.clone()));
        ops.push(HostOp::HostAccess { buffer: 0, offset: 0, bytes, write: p.host_write });
        if p.host_us > 0.0 {
            ops.push(HostOp::HostCompute { ns: p.host_us * 1000.0 });
        }
    }
    ops
}
