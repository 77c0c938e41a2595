//! An SM's issue port: one warp instruction per slot (`issue_cycles` long).
//! Slots are tracked in a 64-slot window of bits, so a warp processed later
//! but ready earlier still finds the free slots before an already-taken one:
//! the port's occupancy does not depend on the order the simulator handles
//! warps in, only on when each warp is ready.

use crate::sim::Ps;

/// Slots kept behind a request that slides the window forward.
const HISTORY_SLOTS: u64 = 32;

/// The length of an issue slot, with a reciprocal so that turning a time into
/// a slot index costs a multiplication, not a division.
#[derive(Debug, Clone, Copy)]
pub struct SlotLen {
    ps: Ps,
    inv: u128,
}

impl SlotLen {
    pub fn new(ps: Ps) -> SlotLen {
        let ps = ps.max(1);
        SlotLen { ps, inv: (1u128 << 64) / ps as u128 + 1 }
    }

    /// ceil(t / ps), exact for t < 2^63.
    #[inline]
    fn slots_ceil(self, t: Ps) -> u64 {
        let q = ((t as u128 * self.inv) >> 64) as u64;
        // q is floor(t / ps) or one more; fix it up to the ceiling.
        let q = if q * self.ps > t { q - 1 } else { q };
        if q * self.ps < t {
            q + 1
        } else {
            q
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct IssuePort {
    /// Slot index of bit 0.
    base: u64,
    /// Bit k: slot base + k is taken.
    bits: u64,
}

impl IssuePort {
    /// Take the first free slot at or after `t`; returns its start time.
    #[inline]
    pub fn issue(&mut self, t: Ps, slot: SlotLen) -> Ps {
        let want = slot.slots_ceil(t);
        if want >= self.base + 64 {
            // Past the window: slide it so that `want` sits at its middle, keeping the
            // HISTORY_SLOTS slots before it, which a warp processed next but ready a little
            // earlier may still take (the greedy run-ahead is bounded to fewer).
            let shift = want - HISTORY_SLOTS - self.base;
            self.bits = self.bits.checked_shr(shift.min(64) as u32).unwrap_or(0);
            self.base += shift;
        }
        // A request earlier than the window is served at its start (the window only
        // moves past slots no pending warp can still want).
        let off = want.saturating_sub(self.base);
        let free = off + (self.bits >> off).trailing_ones() as u64;
        let (slot_off, slot_index) = if free >= 64 {
            // The window is full from `off` on: slide it so the slot fits.
            let shift = free - 63;
            self.bits = self.bits.checked_shr(shift as u32).unwrap_or(0);
            self.base += shift;
            (63, self.base + 63)
        } else {
            (free, self.base + free)
        };
        self.bits |= 1 << slot_off;
        slot_index * slot.ps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_index_is_the_exact_ceiling() {
        for ps in [1u64, 3, 694, 714, 1389, 4000, 1 << 20] {
            let s = SlotLen::new(ps);
            for t in [0u64, 1, ps - 1, ps, ps + 1, 123_456_789, (1 << 62) + 7] {
                assert_eq!(s.slots_ceil(t), t.div_ceil(ps), "t {t} ps {ps}");
            }
        }
    }

    #[test]
    fn one_instruction_per_slot_in_ready_order_regardless_of_processing_order() {
        let mut p = IssuePort::default();
        // A warp ready at slot 0 runs ahead and takes slots 0, 1 and, after a stall, 5.
        assert_eq!(p.issue(0, SlotLen::new(10)), 0);
        assert_eq!(p.issue(10, SlotLen::new(10)), 10);
        assert_eq!(p.issue(50, SlotLen::new(10)), 50);
        // Another warp ready at 5 ps, handled afterwards, still gets slot 2 (20 ps), then 3.
        assert_eq!(p.issue(5, SlotLen::new(10)), 20);
        assert_eq!(p.issue(21, SlotLen::new(10)), 30);
        assert_eq!(p.issue(30, SlotLen::new(10)), 40);
        // Slot 5 is taken: the next at 50 goes to 60.
        assert_eq!(p.issue(50, SlotLen::new(10)), 60);
    }

    #[test]
    fn a_request_past_the_window_keeps_the_slots_just_before_it() {
        let mut p = IssuePort::default();
        let s = SlotLen::new(10);
        assert_eq!(p.issue(0, s), 0);
        // A warp 1000 slots ahead slides the window; one processed next but ready
        // 20 slots earlier still issues when it is ready, not after the first.
        assert_eq!(p.issue(10_000, s), 10_000);
        assert_eq!(p.issue(9_800, s), 9_800);
        assert_eq!(p.issue(9_990, s), 9_990);
        assert_eq!(p.issue(9_990, s), 10_010, "9_990 and 10_000 are taken");
        // Only HISTORY_SLOTS slots are kept: a request from before them is served at the window's start.
        assert_eq!(p.issue(0, s), (10_000 / 10 - HISTORY_SLOTS) * 10);
    }

    #[test]
    fn window_slides_and_saturates_at_one_per_slot() {
        let mut p = IssuePort::default();
        let times: Vec<Ps> = (0..200).map(|_| p.issue(0, SlotLen::new(1))).collect();
        assert_eq!(times, (0..200).collect::<Vec<_>>());
        assert_eq!(p.issue(10_000, SlotLen::new(1)), 10_000);
    }
}
