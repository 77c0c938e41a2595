//! Statistics: counters and latency distributions owned by the components
//! that produce them, exported at the end of a run as one flat map of dotted
//! names to numbers (`summary.json`'s `metrics`; names in docs/metrics.md).

use crate::sim::{Ps, PS_PER_NS};
use hdrhistogram::Histogram;
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

/// A latency distribution in nanoseconds: exact count and mean, percentiles
/// from an HDR histogram (3 significant digits).
#[derive(Debug, Clone)]
pub struct Latency {
    hist: Histogram<u64>,
    sum_ps: u128,
    n: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency { hist: Histogram::new(3).expect("3 significant figures is valid"), sum_ps: 0, n: 0 }
    }
}

impl Latency {
    #[inline]
    pub fn record(&mut self, d: Ps) {
        self.sum_ps += d as u128;
        self.n += 1;
        // Histogram in ns; it auto-resizes so this cannot fail for u64 inputs below 2^63.
        let _ = self.hist.record(d / PS_PER_NS);
    }
    /// Add another distribution into this one.
    pub fn merge(&mut self, o: &Latency) {
        let _ = self.hist.add(&o.hist);
        self.sum_ps += o.sum_ps;
        self.n += o.n;
    }
    pub fn count(&self) -> u64 {
        self.n
    }
    pub fn mean_ns(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum_ps as f64 / self.n as f64 / PS_PER_NS as f64
        }
    }
    /// Export `prefix.mean`, `prefix.p50`, `prefix.p99`.
    pub fn export(&self, m: &mut Metrics, prefix: &str) {
        m.float(format!("{prefix}.mean"), self.mean_ns());
        let q = |p: f64| {
            if self.n == 0 {
                0.0
            } else {
                self.hist.value_at_quantile(p) as f64
            }
        };
        m.float(format!("{prefix}.p50"), q(0.5));
        m.float(format!("{prefix}.p99"), q(0.99));
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
    }
}
