//! Statistics: counters and latency distributions owned by the components
//! that produce them, exported at the end of a run as one flat map of dotted
//! names to numbers (`summary.json`'s `metrics`; names in docs/metrics.md).

use crate::sim::{Ps, PS_PER_NS};
use serde::Serialize;
use std::collections::BTreeMap;

/// A metric value: counts stay integers in JSON, rates and times are floats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Int(u64),
    Float(f64),
}

impl Value {
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Int(i) => i as f64,
            Value::Float(f) => f,
        }
    }
}

/// The metrics that measure the host machine rather than the simulated system: they
/// differ between otherwise identical runs (every other metric is a pure function of the
/// config and seed). Determinism checks compare everything else.
pub const WALL_CLOCK_METRICS: [&str; 4] = ["sim.wall_s", "sim.total_wall_s", "sim.events_per_s", "sim.warp_mem_insts_per_s"];

/// The flat, sorted metric map of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Metrics(pub BTreeMap<String, Value>);

impl Metrics {
    pub fn int(&mut self, name: impl Into<String>, v: u64) {
        self.0.insert(name.into(), Value::Int(v));
    }
    pub fn float(&mut self, name: impl Into<String>, v: f64) {
        self.0.insert(name.into(), Value::Float(if v.is_finite() { v } else { 0.0 }));
    }
    /// `num / den`, 0 when `den` is 0.
    pub fn ratio(&mut self, name: impl Into<String>, num: u64, den: u64) {
        self.float(name, if den == 0 { 0.0 } else { num as f64 / den as f64 });
    }
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.get(name).map(|v| v.as_f64())
    }
}

/// Sub-buckets per power of two: values keep 6 significant bits (< 1.6% error).
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;

/// Bucket of a value: exact below 64, then log-linear (the HDR-histogram layout).
#[inline]
fn bucket(v: u64) -> usize {
    if v < SUB {
        v as usize
    } else {
        let e = 63 - v.leading_zeros(); // >= SUB_BITS
        let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
        (SUB + (e - SUB_BITS) as u64 * SUB + sub) as usize
    }
}

/// Smallest value of a bucket.
fn bucket_floor(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        i
    } else {
        let e = (i - SUB) / SUB + SUB_BITS as u64;
        let sub = (i - SUB) % SUB;
        (1 << e) | (sub << (e - SUB_BITS as u64))
    }
}

/// A latency distribution in nanoseconds: exact count and mean, percentiles
/// from a log-linear histogram with 6 significant bits. Recording is an
/// increment: it runs for every TLB miss and walk.
#[derive(Debug, Clone, Default)]
pub struct Latency {
    counts: Vec<u64>,
    sum_ps: u128,
    n: u64,
}

impl Latency {
    #[inline]
    pub fn record(&mut self, d: Ps) {
        self.sum_ps += d as u128;
        self.n += 1;
        let b = bucket(d / PS_PER_NS);
        if b >= self.counts.len() {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
    }

    /// Add another distribution into this one.
    pub fn merge(&mut self, o: &Latency) {
        if o.counts.len() > self.counts.len() {
            self.counts.resize(o.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.sum_ps += o.sum_ps;
        self.n += o.n;
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    /// Sum of all samples in picoseconds.
    pub fn sum_ps(&self) -> u128 {
        self.sum_ps
    }

    pub fn mean_ns(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum_ps as f64 / self.n as f64 / PS_PER_NS as f64
        }
    }

    /// The smallest recorded bucket value at or below which a fraction `q` of the samples lie.
    pub fn quantile_ns(&self, q: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_floor(i) as f64;
            }
        }
        0.0
    }

    /// Export `prefix.mean`, `prefix.p50`, `prefix.p99`.
    pub fn export(&self, m: &mut Metrics, prefix: &str) {
        m.float(format!("{prefix}.mean"), self.mean_ns());
        m.float(format!("{prefix}.p50"), self.quantile_ns(0.5));
        m.float(format!("{prefix}.p99"), self.quantile_ns(0.99));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn latency_summary() {
        let mut l = Latency::default();
        for ns in 1..=100u64 {
            l.record(ns * PS_PER_NS);
        }
        let mut m = Metrics::default();
        l.export(&mut m, "x");
        assert_eq!(m.get("x.mean"), Some(50.5));
        assert_eq!(m.get("x.p50"), Some(50.0));
        assert_eq!(m.get("x.p99"), Some(99.0));
        m.ratio("r", 1, 0);
        assert_eq!(m.get("r"), Some(0.0));
        // A non-finite float (a 0/0 rate) is exported as 0: JSON has no NaN or infinity.
        m.float("nan", f64::NAN);
        m.float("inf", f64::INFINITY);
        assert_eq!((m.get("nan"), m.get("inf")), (Some(0.0), Some(0.0)));
    }

    #[test]
    fn quantiles_take_the_rank_rounded_up_and_a_merge_keeps_every_sample() {
        let mut a = Latency::default();
        for ns in [1, 2, 3] {
            a.record(ns * PS_PER_NS);
        }
        // Median of 3: rank ceil(0.5 * 3) = 2 -> 2 ns (rounded down, rank 1 -> 1 ns).
        assert_eq!(a.quantile_ns(0.5), 2.0);
        // q = 0: rank 0 clamped up to 1 -> the smallest sample, 1 ns (not bucket 0's floor, 0).
        assert_eq!(a.quantile_ns(0.0), 1.0);
        let mut b = Latency::default();
        b.record(100 * PS_PER_NS); // bucket 64 + 36 = 100 (e = 6, sub = 36): beyond a's 4 buckets
        a.merge(&b);
        // (1 + 2 + 3 + 100) / 4 = 26.5 ns; the maximum (rank 4) keeps its bucket, floor 100 ns.
        assert_eq!((a.count(), a.mean_ns(), a.quantile_ns(1.0)), (4, 26.5, 100.0));
    }

    #[test]
    fn buckets_keep_six_significant_bits() {
        for v in [0u64, 1, 63, 64, 65, 127, 128, 1000, 123_456, 1 << 40, u64::MAX] {
            let f = bucket_floor(bucket(v));
            assert!(f <= v && (v - f) as f64 <= v as f64 / 64.0, "{v} -> {f}");
        }
        let mut l = Latency::default();
        for ns in 0..10_000u64 {
            l.record(ns * PS_PER_NS);
        }
        let p99 = l.quantile_ns(0.99);
        assert!((p99 - 9900.0).abs() <= 9900.0 / 64.0, "{p99}");
        let mut a = Latency::default();
        a.record(5 * PS_PER_NS);
        a.merge(&l);
        assert_eq!(a.count(), 10_001);
    }
}
