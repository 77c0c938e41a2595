//! An SM's issue port: one warp instruction per slot (`issue_cycles` long).
//! Slots are tracked in a 64-slot window of bits, so a warp processed later
//! but ready earlier still finds the free slots before an already-taken one:
//! the port's occupancy does not depend on the order the simulator handles
//! warps in, only on when each warp is ready.

use crate::sim::Ps;

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
    pub fn issue(&mut self, t: Ps, slot_ps: Ps) -> Ps {
        let want = t.div_ceil(slot_ps);
        if want >= self.base + 64 {
            // Far ahead of the window: everything in it is past.
            self.base = want;
            self.bits = 0;
        }
        // A request earlier than the window is served at its start (the window only
        // moves past slots no pending warp can still want).
        let off = want.saturating_sub(self.base);
        let free = off + (self.bits >> off).trailing_ones() as u64;
        let (slot_off, slot) = if free >= 64 {
            // The window is full from `off` on: slide it so the slot fits.
            let shift = free - 63;
            self.bits = self.bits.checked_shr(shift as u32).unwrap_or(0);
            self.base += shift;
            (63, self.base + 63)
        } else {
            (free, self.base + free)
        };
        self.bits |= 1 << slot_off;
        slot * slot_ps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_instruction_per_slot_in_ready_order_regardless_of_processing_order() {
        let mut p = IssuePort::default();
        // A warp ready at slot 0 runs ahead and takes slots 0, 1 and, after a stall, 5.
        assert_eq!(p.issue(0, 10), 0);
        assert_eq!(p.issue(10, 10), 10);
        assert_eq!(p.issue(50, 10), 50);
        // Another warp ready at 5 ps, handled afterwards, still gets slot 2 (20 ps), then 3.
        assert_eq!(p.issue(5, 10), 20);
        assert_eq!(p.issue(21, 10), 30);
        assert_eq!(p.issue(30, 10), 40);
        // Slot 5 is taken: the next at 50 goes to 60.
        assert_eq!(p.issue(50, 10), 60);
    }

    #[test]
    fn window_slides_and_saturates_at_one_per_slot() {
        let mut p = IssuePort::default();
        let times: Vec<Ps> = (0..200).map(|_| p.issue(0, 1)).collect();
        assert_eq!(times, (0..200).collect::<Vec<_>>());
        assert_eq!(p.issue(10_000, 1), 10_000);
    }
}
