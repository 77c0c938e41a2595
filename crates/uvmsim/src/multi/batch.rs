//! The UVM driver's far-fault batches in the multi-GPU model (`multi.fault_batch_size`),
//! and, with the same queues, its access-counter notification batches
//! (`multi.counter_batch_size`: each GPU's notification buffer, fetched 256 at a time by
//! the driver, `uvm_gpu_access_counters.c`; a notification is a "fault" below and its
//! page's migration its service).
//!
//! Seed multi-gpu §2.2 (Fig. 2): a failed GMMU walk is held in the GPU's fault
//! buffer, the GMMU interrupts the host, and "the UVM driver ... fetches the fault
//! information, groups faults into batches ... (the batch size is 256), and later
//! resolves the fault using the centralized page table". In the real driver each
//! GPU's hardware writes its own fault buffer, and the bottom half fetches from it
//! at most `uvm_perf_fault_batch_count` = 256 entries, services them and replays
//! before it fetches again (spec/uvm-driver.md, "Replayable faults"; that the GPUs'
//! buffers are serviced independently of each other is our reading of the driver,
//! not a fact the spec states). So in GMMU mode each GPU is a queue. In ATS
//! mode (§2.2) "the IOMMU records PRI requests from different GPUs in a queue" and
//! batches them: one queue for every GPU.
//!
//! The model keeps the answer-in-issue-order style of [`super::Multi::fault`]: a fault
//! that reaches the host at `arrive` joins the batch of its queue being fetched if it
//! arrived by that batch's fetch and the batch has room; otherwise it opens the next
//! batch, fetched at `arrive` or when the previous batch's last fault is done
//! (its page mapped or moved), whichever is later. The host starts to translate a
//! fault at its batch's fetch. A fault computed after a later one (a warp's step
//! computes its issues a little ahead of the event time) joins the batch being
//! fetched, not an earlier one. Each fault's answer still leaves when its own page is
//! ready: the driver's replay is per fault, not per batch (the seed says only that
//! "the GPU re-performs the address translation after the far fault is resolved").

use crate::sim::Ps;

/// One queue's batch being fetched or serviced.
#[derive(Debug, Clone, Copy, Default)]
struct Open {
    /// When the driver fetches it.
    fetch: Ps,
    /// Faults in it.
    count: u32,
    /// The latest time one of its faults was done (the next fetch waits for it).
    end: Ps,
    /// Whether this queue has had a batch.
    started: bool,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct BatchStats {
    pub batches: u64,
    /// Faults' time from reaching the host to their batch's fetch, summed.
    pub wait_ps: u128,
    pub largest: u32,
}

#[derive(Debug, Clone)]
pub struct FaultBatches {
    size: u32,
    open: Vec<Open>,
    pub stats: BatchStats,
}

impl FaultBatches {
    /// Batches of at most `size` faults for each of `queues` queues; `size` ≥ 1.
    pub fn new(size: u32, queues: usize) -> FaultBatches {
        assert!(size >= 1, "a batch holds at least one fault");
        FaultBatches { size, open: vec![Open::default(); queues], stats: BatchStats::default() }
    }

    /// A far fault of queue `q` reached the host at `arrive`: when the driver fetches it.
    pub fn fetch(&mut self, q: usize, arrive: Ps) -> Ps {
        let b = &mut self.open[q];
        if b.started && arrive <= b.fetch && b.count < self.size {
            b.count += 1;
        } else {
            let at = if b.started { arrive.max(b.end) } else { arrive };
            *b = Open { fetch: at, count: 1, end: at, started: true };
            self.stats.batches += 1;
        }
        self.stats.largest = self.stats.largest.max(b.count);
        self.stats.wait_ps += b.fetch.saturating_sub(arrive) as u128;
        b.fetch
    }

    /// The driver finished a fault of queue `q`'s current batch at `done`.
    pub fn done(&mut self, q: usize, done: Ps) {
        let b = &mut self.open[q];
        b.end = b.end.max(done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_arriving_while_a_batch_is_serviced_waits_for_its_end() {
        let mut b = FaultBatches::new(256, 2);
        // Idle driver: fetched on arrival.
        assert_eq!(b.fetch(0, 100), 100);
        b.done(0, 5_000);
        // Same arrival time: same batch.
        assert_eq!(b.fetch(0, 100), 100);
        b.done(0, 7_000);
        // Arrives during the service: the next batch, fetched when the first one's last fault is done.
        assert_eq!(b.fetch(0, 200), 7_000);
        b.done(0, 9_000);
        // Arrives before that fetch: it joins it.
        assert_eq!(b.fetch(0, 6_000), 7_000);
        // GPU 1's driver is idle.
        assert_eq!(b.fetch(1, 300), 300);
        // After the second batch, an idle driver again fetches at the arrival.
        assert_eq!(b.fetch(0, 20_000), 20_000);
        assert_eq!(b.stats.batches, 4);
        assert_eq!(b.stats.largest, 2);
        assert_eq!(b.stats.wait_ps, (7_000 - 200) + (7_000 - 6_000));
    }

    #[test]
    fn a_full_batch_sends_the_next_fault_to_the_next_batch() {
        let mut b = FaultBatches::new(2, 1);
        assert_eq!(b.fetch(0, 10), 10);
        b.done(0, 50);
        assert_eq!(b.fetch(0, 10), 10);
        b.done(0, 40);
        // A third fault that reached the host by the fetch finds the batch full.
        assert_eq!(b.fetch(0, 10), 50);
        assert_eq!(b.stats.batches, 2);
        assert_eq!(b.stats.largest, 2);
    }

    #[test]
    fn batches_of_one_serialize_the_faults() {
        let mut b = FaultBatches::new(1, 1);
        let mut t = 0;
        for i in 0..5 {
            t = b.fetch(0, i * 10);
            b.done(0, t + 100);
        }
        assert_eq!(t, 400);
        assert_eq!(b.stats.batches, 5);
    }
}
