//! `shootdown` (svm-apu §VI, Table 4): the GPU TLB shootdown microbenchmark.
//! A one-work-item kernel touches `pages` pages (filling the GPU's TLBs with
//! their translations), the host then changes mappings and shoots down the
//! GPU's translations `count` times, one page after another (single-entry
//! invalidations) or flushing everything each time (`flush_all`), and the
//! kernel runs again, missing on every translation that was shot down.
//! Needs translation.mode = "iommu" (the APU path the seed measured).
//!
//! One array of `pages` pages; first touch in page order.

use super::{stride, HostOp, KernelSpec, VaAllocator, WorkloadConfig};
use crate::config::{ByteSize, Config};

section! {
    /// Parameters of the TLB shootdown microbenchmark.
    pub struct ShootdownParams {
        /// Pages the kernel touches before and after the shootdowns (their translations fill the GPU TLBs).
        pub pages: u32 = 64,
        /// Shootdowns the host performs, serially (page i mod `pages` for single-entry ones).
        pub count: u32 = 1000,
        /// Flush every translation each time instead of invalidating one page.
        pub flush_all: bool = false,
    }
}

impl ShootdownParams {
    pub fn validate(&self, p: &str, cfg: &Config) -> Result<(), (String, String)> {
        if !(1..=1 << 20).contains(&self.pages) {
            return Err((format!("{p}.pages"), format!("must be between 1 and 1048576, got {}", self.pages)));
        }
        if !(1..=10_000_000).contains(&self.count) {
            return Err((format!("{p}.count"), format!("must be between 1 and 10000000, got {}", self.count)));
        }
        // One page of translation.page_size each (the generic footprint check assumes at most 2 MiB).
        if self.pages as u128 * cfg.translation.page_size.0 as u128 > 1 << 46 {
            return Err((
                format!("{p}.pages"),
                format!("{} pages of {} ask for more than the 64 TiB that can be allocated", self.pages, cfg.translation.page_size),
            ));
        }
        if cfg.multi.gpus > 1 {
            return Err(("multi.gpus".into(), "workload.kind = \"shootdown\" models one APU: it needs multi.gpus = 1".into()));
        }
        if cfg.multi.model_one_gpu {
            // The multi-GPU model's IOMMU is shared, outside the GPU the host's shootdowns go to.
            return Err((
                "multi.model_one_gpu".into(),
                "workload.kind = \"shootdown\" models one APU: it needs multi.model_one_gpu = false".into(),
            ));
        }
        if cfg.translation.mode != crate::config::TranslationMode::Iommu {
            return Err((
                "translation.mode".into(),
                "workload.kind = \"shootdown\" models the APU's IOMMU path: it needs translation.mode = \"iommu\"".into(),
            ));
        }
        Ok(())
    }
}

/// The kernel (one work-item touching each page once) and the host's shootdown step.
pub(super) fn build(p: &ShootdownParams, w: &WorkloadConfig, cfg: &Config, page: u64, va: &mut VaAllocator) -> (KernelSpec, HostOp) {
    let touch = stride::StrideParams { work_items: 1, accesses: p.pages, stride_bytes: ByteSize(page), access_bytes: 4 };
    let (kernel, _) = stride::build(&touch, w, cfg, page, va);
    let base = va.buffers.last().expect("stride::build allocates its array").base;
    (kernel, HostOp::Shootdown { va: base, page_bytes: page, pages: p.pages as u64, count: p.count as u64, all: p.flush_all })
}

#[cfg(test)]
mod tests {
    use crate::workload::testutil::*;
    use crate::workload::{HostOp, MemKind};

    #[test]
    fn the_kernel_touches_a_translation_page_each_and_the_host_shoots_them_down() {
        let p = program(&[
            "translation.mode=iommu",
            "translation.page_size=\"2MiB\"",
            "workload.kind=shootdown",
            "workload.shootdown.pages=3",
            "workload.shootdown.count=5",
        ]);
        let base = p.buffers[0].base;
        // One work-item, one load per 2 MiB page, before and after the shootdowns.
        let touches: Vec<_> = (0..3).map(|i| (MemKind::Load, vec![base + i * (2 << 20)])).collect();
        assert_eq!(mem_ops(&mut warps(&p, 0).remove(0)), touches);
        assert_eq!(mem_ops(&mut warps(&p, 1).remove(0)), touches);
        // The host's shootdowns name the same pages.
        assert!(matches!(p.ops[1], HostOp::Shootdown { va, page_bytes: 0x20_0000, .. } if va == base), "{:?}", p.ops[1]);
    }
}
