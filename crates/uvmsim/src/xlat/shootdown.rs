//! GPU TLB shootdowns on an APU (seed svm-apu §VI, Table 4): when the host
//! changes a mapping the GPU may cache, the IOMMU driver invalidates the
//! IOMMU's TLB and then, through the IOMMU, the GPU's TLBs, waiting for each.
//!
//! How it works: four serial phases. *Initialization* and *finalization* are
//! host software (they scale with the host clock like the PPR path). Each of
//! the two invalidation phases is what the Linux AMD IOMMU driver does: queue
//! an invalidation command and a COMPLETION_WAIT in the in-memory command
//! buffer (per command: read the head and tail registers, write the tail —
//! uncached MMIO), then poll the completion semaphore, busy-waiting a fixed
//! interval between polls (`wait_on_sem`: `udelay(1)`). The hardware side
//! runs meanwhile: the IOMMU fetches the command from memory and invalidates
//! its TLB, or sends an ATS invalidation over the link to the GPU, which
//! invalidates its TLBs and answers over the link; the COMPLETION_WAIT then
//! writes the semaphore. A phase ends at the first poll that sees it. The
//! poll interval makes the two phases nearly equal even though the GPU's
//! takes a link round trip more (Table 4: 1,970 vs 2,021 ns). Flushing all
//! entries is one command as well (the size bit), so it costs about the same
//! as one entry (Table 4: 4,234 vs 4,409 ns).

use crate::sim::{ns_to_ps, Ps};
use crate::stats::{Latency, Metrics};

section! {
    /// TLB shootdowns on an APU (translation.mode = "iommu"; seed svm-apu §VI, Table 4). The software
    /// phases are in ns at `iommu.ppr.ref_ghz` and scale with `iommu.ppr.ref_ghz / iommu.ppr.host_ghz`.
    /// The IOMMU's own memory accesses (command fetch, semaphore write) take `iommu.walker.level_latency_ns`.
    pub struct ShootdownConfig {
        /// Host software before the first command is queued ("initialization"), in ns.
        pub init_ns: f64 = 79.0,
        /// Host software after the last completion ("finalization"), in ns.
        pub final_ns: f64 = 162.0,
        /// One uncached read of an IOMMU MMIO register by the host CPU (head and tail pointers), in ns. ASSUMPTION.
        pub mmio_read_ns: f64 = 200.0,
        /// One posted MMIO write (the command-buffer tail), host CPU time, in ns. ASSUMPTION.
        pub mmio_write_ns: f64 = 30.0,
        /// Busy-wait between two polls of the completion semaphore, in ns (Linux amd_iommu `wait_on_sem`: `udelay(1)`).
        pub poll_interval_ns: f64 = 1000.0,
        /// GPU time to invalidate its TLBs for one ATS invalidation request (all L1 TLBs in parallel, then the L2), in GPU cycles. ASSUMPTION.
        pub gpu_invalidate_cycles: u32 = 20,
    }
}

impl ShootdownConfig {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        for (k, v) in [
            ("init_ns", self.init_ns),
            ("final_ns", self.final_ns),
            ("mmio_read_ns", self.mmio_read_ns),
            ("mmio_write_ns", self.mmio_write_ns),
        ] {
            if !(v.is_finite() && (0.0..=1e9).contains(&v)) {
                return Err((format!("{p}.{k}"), format!("must be between 0 and 1e9 ns, got {v}")));
            }
        }
        if !(self.poll_interval_ns.is_finite() && (1.0..=1e9).contains(&self.poll_interval_ns)) {
            return Err((format!("{p}.poll_interval_ns"), format!("must be between 1 and 1e9 ns, got {}", self.poll_interval_ns)));
        }
        if self.gpu_invalidate_cycles > 1_000_000 {
            return Err((format!("{p}.gpu_invalidate_cycles"), format!("must be at most 1000000, got {}", self.gpu_invalidate_cycles)));
        }
        Ok(())
    }
}

/// The four phases of one shootdown, in ps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phases {
    pub init: Ps,
    pub iommu: Ps,
    pub gpu: Ps,
    pub finish: Ps,
}

impl Phases {
    pub fn total(&self) -> Ps {
        self.init + self.iommu + self.gpu + self.finish
    }
}

/// The shootdown model with its costs resolved to ps.
#[derive(Debug, Clone)]
pub struct Shootdown {
    init: Ps,
    finish: Ps,
    read: Ps,
    write: Ps,
    poll: Ps,
    /// An IOMMU memory access (command fetch, semaphore write).
    mem: Ps,
    /// The IOMMU TLB's invalidation (its lookup latency).
    iotlb: Ps,
    /// One-way GPU <-> IOMMU latency.
    link: Ps,
    /// The GPU's invalidation.
    gpu_inv: Ps,
    pub count: u64,
    pub entries_invalidated: u64,
    pub phases: [Latency; 4],
    pub latency: Latency,
}

impl Shootdown {
    /// `sw_scale` = ref_ghz / host_ghz; `mem_ns`, `iotlb_ns`, `link_ns` come from the IOMMU's config.
    pub fn new(c: &ShootdownConfig, sw_scale: f64, mem_ns: f64, iotlb_ns: f64, link_ns: f64, gpu_mhz: f64) -> Shootdown {
        Shootdown {
            init: ns_to_ps(c.init_ns * sw_scale),
            finish: ns_to_ps(c.final_ns * sw_scale),
            read: ns_to_ps(c.mmio_read_ns),
            write: ns_to_ps(c.mmio_write_ns),
            poll: ns_to_ps(c.poll_interval_ns),
            mem: ns_to_ps(mem_ns),
            iotlb: ns_to_ps(iotlb_ns),
            link: ns_to_ps(link_ns),
            gpu_inv: ns_to_ps(c.gpu_invalidate_cycles as f64 * 1e3 / gpu_mhz),
            count: 0,
            entries_invalidated: 0,
            phases: Default::default(),
            latency: Latency::default(),
        }
    }

    /// One invalidation phase: queue the command and a COMPLETION_WAIT, then
    /// poll. `hw` is the hardware's time from fetching the command to having
    /// done it.
    fn phase(&self, hw: Ps) -> Ps {
        let queue = 2 * self.read + self.write;
        // The IOMMU sees the command when the first tail write lands, fetches it from memory and does it.
        let done = queue + self.mem + hw;
        // The COMPLETION_WAIT, queued next, is fetched after its own tail write and waits for the
        // invalidation; then the IOMMU writes the semaphore to memory.
        let queued = 2 * queue;
        let sem = (queued + self.mem).max(done) + self.mem;
        // Polls at queued, queued + poll, ...: the first one at or after `sem` sees it (a memory read:
        // the IOMMU's write took the line out of the CPU's cache).
        let polls = (sem - queued).div_ceil(self.poll);
        queued + polls * self.poll + self.mem
    }

    /// The phases of one shootdown (the same for one entry and for all: one command either way).
    pub fn phases(&self) -> Phases {
        Phases {
            init: self.init,
            iommu: self.phase(self.iotlb),
            gpu: self.phase(self.link + self.gpu_inv + self.link),
            finish: self.finish,
        }
    }

    /// Count one shootdown that removed `entries` GPU TLB entries; returns its latency.
    pub fn record(&mut self, entries: usize) -> Ps {
        let p = self.phases();
        for (l, v) in self.phases.iter_mut().zip([p.init, p.iommu, p.gpu, p.finish]) {
            l.record(v);
        }
        self.latency.record(p.total());
        self.count += 1;
        self.entries_invalidated += entries as u64;
        p.total()
    }

    pub fn export(&self, m: &mut Metrics, p: &str) {
        m.int(format!("{p}.count"), self.count);
        m.int(format!("{p}.gpu_entries_invalidated"), self.entries_invalidated);
        self.latency.export(m, &format!("{p}.latency_ns"));
        for (name, l) in ["init", "iommu", "gpu", "final"].iter().zip(&self.phases) {
            l.export(m, &format!("{p}.{name}_ns"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(c: &ShootdownConfig) -> Shootdown {
        Shootdown::new(c, 1.0, 90.0, 20.0, 220.0, 720.0)
    }

    #[test]
    fn phase_is_queueing_plus_whole_polls() {
        // Hand-worked with the defaults: queue = 2*200 + 30 = 430 ns per command; the
        // COMPLETION_WAIT is queued at 860 ns. IOMMU: invalidation done at 430 + 90 + 20 = 540,
        // semaphore at max(860 + 90, 540) + 90 = 1040 -> 1 poll -> 860 + 1000 + 90 = 1950 ns.
        let s = model(&ShootdownConfig::default());
        let p = s.phases();
        assert_eq!(p.iommu, ns_to_ps(1950.0));
        // GPU: done at 430 + 90 + 220 + 27.8 + 220 = 987.8 -> semaphore at 1077.8 -> still 1 poll.
        assert_eq!(p.gpu, ns_to_ps(1950.0));
        assert_eq!(p.total(), ns_to_ps(79.0 + 1950.0 + 1950.0 + 162.0));
    }

    #[test]
    fn a_slower_link_costs_a_whole_poll() {
        // The GPU's round trip grows past the first poll: the phase grows by the poll interval, not the delay.
        let fast = Shootdown::new(&ShootdownConfig::default(), 1.0, 90.0, 20.0, 220.0, 720.0).phases();
        let slow = Shootdown::new(&ShootdownConfig::default(), 1.0, 90.0, 20.0, 700.0, 720.0).phases();
        assert_eq!(slow.iommu, fast.iommu);
        assert_eq!(slow.gpu, fast.gpu + ns_to_ps(1000.0));
    }

    #[test]
    fn software_phases_scale_with_the_host_clock() {
        let c = ShootdownConfig::default();
        let fast = Shootdown::new(&c, 1.0, 90.0, 20.0, 220.0, 720.0).phases();
        let slow = Shootdown::new(&c, 3.7 / 1.7, 90.0, 20.0, 220.0, 720.0).phases();
        assert_eq!(slow.iommu, fast.iommu);
        assert_eq!(slow.init, ns_to_ps(79.0 * 3.7 / 1.7));
    }

    #[test]
    fn record_counts_and_averages() {
        let mut s = model(&ShootdownConfig::default());
        let t = s.record(3);
        s.record(0);
        assert_eq!(s.count, 2);
        assert_eq!(s.entries_invalidated, 3);
        assert_eq!(t, s.phases().total());
        let mut m = Metrics::default();
        s.export(&mut m, "iommu.shootdown");
        assert_eq!(m.get("iommu.shootdown.count"), Some(2.0));
        assert!((m.get("iommu.shootdown.latency_ns.mean").unwrap() - 4141.0).abs() < 1e-6);
    }

    /// The hardware's part starts after the command's fetch (a memory access after the first tail
    /// write), and the semaphore is written after it (another access). A GPU round trip of 2 x 636.1 + 27.8 = 1300 ns is done at 430 + 90 + 1300 = 1820 ns
    /// and the semaphore written at 1910, 1050 ns after the COMPLETION_WAIT was queued (860): the
    /// second poll sees it, 860 + 2 x 1000 + 90 = 2950 ns (without the fetch or the write, 960 ns
    /// after: the first poll, 1950).
    #[test]
    fn the_invalidation_starts_after_the_command_fetch() {
        let p = Shootdown::new(&ShootdownConfig::default(), 1.0, 90.0, 20.0, 636.1, 720.0).phases();
        assert_eq!(p.gpu, ns_to_ps(2950.0));
    }
}
