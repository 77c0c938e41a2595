//! Time is an integer number of picoseconds; clock domains convert cycles.

/// Simulated time or duration in picoseconds.
pub type Ps = u64;

pub const PS_PER_NS: Ps = 1_000;
pub const PS_PER_US: Ps = 1_000_000;

/// Nanoseconds (from config, possibly fractional) to picoseconds, rounded.
pub fn ns_to_ps(ns: f64) -> Ps {
    (ns * PS_PER_NS as f64).round() as Ps
}

pub fn ps_to_ns(ps: Ps) -> f64 {
    ps as f64 / PS_PER_NS as f64
}

/// A clock domain: converts a number of cycles of this clock to time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clock {
    /// Period in picoseconds, rounded to an integer: the error is at most 0.5 ps per cycle (0.05% at 1 GHz).
    period_ps: Ps,
}

impl Clock {
    pub fn from_mhz(mhz: f64) -> Clock {
        Clock { period_ps: (1e6 / mhz).round().max(1.0) as Ps }
    }
    pub fn period_ps(self) -> Ps {
        self.period_ps
    }
    pub fn cycles(self, n: u64) -> Ps {
        n * self.period_ps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn clock_periods() {
        assert_eq!(Clock::from_mhz(1000.0).cycles(100), 100_000);
        assert_eq!(Clock::from_mhz(720.0).period_ps(), 1389);
        assert_eq!(ns_to_ps(0.5), 500);
        // Rounded to the nearest ps, not truncated: 2.9996 ns = 2999.6 ps -> 3000.
        assert_eq!(ns_to_ps(2.9996), 3000);
    }
}
