//! The APU's GPU page-fault path (seed svm-apu §II, §V.A): an IOMMU walk that
//! finds no valid PTE fails the ATS request; the GPU sends a Peripheral Page
//! Request (PPR) to the IOMMU, which queues it and interrupts the CPU. The
//! IOMMU driver reads the request in the interrupt ("initialization") and puts
//! it on a work-queue; a kernel worker thread runs it later ("schedule") and
//! finds a page and updates the page table ("processing"); the driver notifies
//! the IOMMU, the IOMMU the GPU, which retries the translation.
//!
//! How it works: the interrupt handler and the worker are each one CPU thread,
//! so requests queue behind each other there; that queueing is what makes the
//! latency grow with concurrent faults and the throughput flat (Fig. 6). The
//! software phases run on the host CPU: they take `×ref_ghz/host_ghz` their
//! time at `ref_ghz` (Fig. 7: latency ∝ 1/frequency). A page already requested
//! is not requested again; its faulting warps wait for the same completion.

use super::Fault;
use crate::sim::{ns_to_ps, Ps};
use crate::stats::{Latency, Metrics};
use rustc_hash::FxHashSet;

section! {
    /// The APU's page-fault path (translation.mode = "iommu", workload.managed = true): PPR queue,
    /// interrupt, work-queue and worker on the host CPU (seed svm-apu §V.A). The defaults are the
    /// kaveri-apu fit to Fig. 6 (see presets/kaveri-apu.toml), in µs at `ref_ghz`.
    pub struct PprConfig {
        /// PPR from the GPU to the IOMMU queue and the interrupt raised on the CPU, in ns (not scaled by the CPU clock). ASSUMPTION.
        pub request_ns: f64 = 1000.0,
        /// Reading one request from the PPR queue and pre-processing it, in the interrupt handler ("initialization"), in µs.
        pub init_us: f64 = 0.3,
        /// From the work item's queuing to its worker running it ("schedule"; Fig. 6: the largest part), in µs.
        pub schedule_us: f64 = 0.3,
        /// Finding a physical page and updating the page table, by the one worker thread ("processing"), in µs.
        pub process_us: f64 = 3.4,
        /// Completion back to the GPU (driver to IOMMU to GPU) before its translation retry, in ns (not scaled). ASSUMPTION.
        pub complete_ns: f64 = 300.0,
        /// Host CPU clock in GHz: the software phases scale with ref_ghz / host_ghz (Fig. 7).
        pub host_ghz: f64 = 3.7,
        /// The clock the phase costs above are given at, in GHz (the A10-7850K's 3.7 GHz).
        pub ref_ghz: f64 = 3.7,
    }
}

impl PprConfig {
    pub fn validate(&self, p: &str) -> Result<(), (String, String)> {
        for (k, v, hi) in [
            ("request_ns", self.request_ns, 1e9),
            ("init_us", self.init_us, 1e6),
            ("schedule_us", self.schedule_us, 1e6),
            ("process_us", self.process_us, 1e6),
            ("complete_ns", self.complete_ns, 1e9),
        ] {
            if !(v.is_finite() && (0.0..=hi).contains(&v)) {
                return Err((format!("{p}.{k}"), format!("must be between 0 and {hi}, got {v}")));
            }
        }
        for (k, v) in [("host_ghz", self.host_ghz), ("ref_ghz", self.ref_ghz)] {
            if !(v.is_finite() && (0.1..=10.0).contains(&v)) {
                return Err((format!("{p}.{k}"), format!("must be between 0.1 and 10 GHz, got {v}")));
            }
        }
        Ok(())
    }
}

/// The PPR path's state: when the interrupt handler and the worker are next free.
#[derive(Debug)]
pub struct Ppr {
    request: Ps,
    init: Ps,
    schedule: Ps,
    process: Ps,
    complete: Ps,
    irq_free: Ps,
    worker_free: Ps,
    /// Pages with a request in flight.
    pending: FxHashSet<u64>,
    pub faults: u64,
    pub merged: u64,
    pub latency: Latency,
}

impl Ppr {
    pub fn new(c: &PprConfig) -> Ppr {
        let scale = c.ref_ghz / c.host_ghz;
        let cpu = |us: f64| ns_to_ps(us * 1000.0 * scale);
        Ppr {
            request: ns_to_ps(c.request_ns),
            init: cpu(c.init_us),
            schedule: cpu(c.schedule_us),
            process: cpu(c.process_us),
            complete: ns_to_ps(c.complete_ns),
            irq_free: 0,
            worker_free: 0,
            pending: FxHashSet::default(),
            faults: 0,
            merged: 0,
            latency: Latency::default(),
        }
    }

    /// A walk failed with `f`: when its page will be mapped and the GPU told
    /// (None if a request for the page is already in flight).
    pub fn raise(&mut self, f: &Fault) -> Option<Ps> {
        if !self.pending.insert(f.vpn) {
            self.merged += 1;
            return None;
        }
        self.faults += 1;
        let init_done = (f.time + self.request).max(self.irq_free) + self.init;
        self.irq_free = init_done;
        let start = (init_done + self.schedule).max(self.worker_free);
        self.worker_free = start + self.process;
        let done = self.worker_free + self.complete;
        self.latency.record(done - f.time);
        Some(done)
    }

    /// The page's request completed (it is mapped now).
    pub fn done(&mut self, vpn: u64) {
        self.pending.remove(&vpn);
    }

    pub fn export(&self, m: &mut Metrics) {
        m.int("apu.faults", self.faults);
        m.int("apu.faults.merged", self.merged);
        self.latency.export(m, "apu.fault_latency_ns");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(vpn: u64, time: Ps) -> Fault {
        Fault { time, vpn, utlb: 0, sm: 0, write: false, prefetch: false }
    }

    #[test]
    fn one_fault_costs_every_phase_once() {
        let c = PprConfig::default();
        let mut p = Ppr::new(&c);
        let done = p.raise(&fault(1, 0)).unwrap();
        // 1.0 + 0.3 + 0.3 + 3.4 + 0.3 = 5.3 µs
        assert_eq!(done, 5_300_000);
        assert_eq!(p.raise(&fault(1, 10)), None, "a second fault on the page waits for the same request");
        p.done(1);
        assert!(p.raise(&fault(1, 10_000_000)).is_some());
    }

    #[test]
    fn concurrent_faults_queue_at_the_worker() {
        let mut p = Ppr::new(&PprConfig::default());
        let ends: Vec<Ps> = (0..64).map(|v| p.raise(&fault(v, 0)).unwrap()).collect();
        // After the first, one completes every process_us: the worker is the bottleneck.
        assert!(ends.windows(2).all(|w| w[1] - w[0] == 3_400_000));
        let throughput_per_ms = 64.0 / (*ends.last().unwrap() as f64 / 1e9);
        assert!((280.0..300.0).contains(&throughput_per_ms), "{throughput_per_ms}");
    }

    #[test]
    fn a_slower_host_clock_stretches_the_software_phases() {
        let fast = Ppr::new(&PprConfig::default()).raise(&fault(1, 0)).unwrap();
        let slow = Ppr::new(&PprConfig { host_ghz: 1.7, ..PprConfig::default() }).raise(&fault(1, 0)).unwrap();
        // 1.3 µs unscaled + 4.0 µs x 3.7/1.7 (each phase rounded to a ps).
        assert!(slow.abs_diff(1_300_000 + (4_000_000.0 * 3.7 / 1.7) as Ps) < 10, "{slow}");
        assert!(slow as f64 / fast as f64 > 1.8);
    }
}
