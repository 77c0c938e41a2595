//! The host-GPU link (PCIe, NVLink, NVLink-C2C) and the GPU's copy engines.
//!
//! How it works: each direction (host to device, device to host) has its own
//! bandwidth [`Timeline`]; a transfer takes the earliest-free copy engine of
//! its direction, reserves its bytes on its direction's timeline, and ends no earlier than
//! its size-dependent transfer time allows, plus the link latency. The size
//! dependence is either none (`constant`: every byte at `bandwidth_gbps`) or
//! the arctangent fit UVMSmart uses for PCIe (`atan`): speed(size) =
//! bandwidth · (2/π) · atan(b · size in KiB), slow for small transfers and
//! approaching the bandwidth for large ones.
//!
//! Copy engines are split between the directions (engine `e` serves host to
//! device when `e` is even, device to host when odd; a single engine serves
//! both): NVIDIA's UVM driver binds each channel type to one preferred CE and
//! picks the CPU_TO_GPU and GPU_TO_CPU ones so that they differ when it can
//! (`uvm_channel.c`, `pick_ce_for_channel_type` prefers the less-used CE), so
//! evictions to the host do not queue behind demand fetches.

use crate::config::LinkConfig;
use crate::mem::Timeline;
use crate::sim::{ns_to_ps, Ps, PS_PER_NS};
use crate::stats::Metrics;
use serde::{Deserialize, Serialize};

/// How transfer speed depends on transfer size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum BandwidthModel {
    /// Every transfer moves at `bandwidth_gbps`.
    #[default]
    Constant,
    /// UVMSmart's arctangent fit of measured PCIe speed against size.
    Atan,
}

leaf!(BandwidthModel);

impl LinkConfig {
    /// Device-to-host bandwidth in GB/s (`d2h_bandwidth_gbps`, or `bandwidth_gbps` when 0).
    pub fn d2h_gbps(&self) -> f64 {
        if self.d2h_bandwidth_gbps > 0.0 {
            self.d2h_bandwidth_gbps
        } else {
            self.bandwidth_gbps
        }
    }
}

/// Direction of a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    HostToDevice,
    DeviceToHost,
}

#[derive(Debug, Clone, Default)]
pub struct DirStats {
    pub transfers: u64,
    pub bytes: u64,
    /// Sum of transfer durations (start to end, latency excluded).
    pub busy_ps: Ps,
}

#[derive(Debug, Clone)]
pub struct Link {
    latency: Ps,
    /// Bandwidth per direction (host to device, device to host).
    gbps: [f64; 2],
    model: BandwidthModel,
    atan_b: f64,
    large_bytes: u64,
    large_factor: f64,
    lanes: [Timeline; 2],
    engines: Vec<Ps>,
    /// Per direction, when the last byte reserved so far crosses (latency excluded).
    done: [Ps; 2],
    /// Per direction, the counted transfers not yet over at the latest request time, as
    /// (done, start) -> bytes: those still crossing when the run ends are clipped at its end
    /// in `busy_ns` and `utilization` (a copy started just before the end counted whole made
    /// the utilization exceed 1).
    crossing: [std::collections::BTreeMap<(Ps, Ps), u64>; 2],
    pub stats: [DirStats; 2],
}

impl Link {
    pub fn new(c: &LinkConfig) -> Link {
        Link {
            latency: ns_to_ps(c.latency_ns),
            gbps: [c.bandwidth_gbps, c.d2h_gbps()],
            model: c.bandwidth_model,
            atan_b: c.atan_b_per_kib,
            large_bytes: c.atan_large_transfer_bytes.0,
            large_factor: c.atan_large_transfer_factor,
            lanes: [Timeline::new(c.bandwidth_gbps, 4096), Timeline::new(c.d2h_gbps(), 4096)],
            engines: vec![0; c.copy_engines as usize],
            done: [0; 2],
            crossing: Default::default(),
            stats: Default::default(),
        }
    }

    /// Transfer speed in GB/s for a host-to-device transfer of `bytes`.
    pub fn speed_gbps(&self, bytes: u64) -> f64 {
        self.speed(Dir::HostToDevice, bytes)
    }

    /// Transfer speed in GB/s for a transfer of `bytes` in direction `dir`.
    fn speed(&self, dir: Dir, bytes: u64) -> f64 {
        let gbps = self.gbps[dir as usize];
        match self.model {
            BandwidthModel::Constant => gbps,
            BandwidthModel::Atan => {
                let kib = bytes as f64 / 1024.0;
                let s = gbps * std::f64::consts::FRAC_2_PI * (self.atan_b * kib).atan();
                if bytes >= self.large_bytes {
                    s * self.large_factor
                } else {
                    s
                }
            }
        }
    }

    /// Move `bytes` in direction `dir`, requested at `t` (no earlier than `now`);
    /// returns (start, end): when a copy engine took it and when its last byte arrived.
    pub fn transfer(&mut self, dir: Dir, bytes: u64, t: Ps, now: Ps) -> (Ps, Ps) {
        let (start, end, _) = self.transfer_on(dir, bytes, t, now);
        (start, end)
    }

    /// [`Link::transfer`], also returning the copy engine that carried it.
    pub fn transfer_on(&mut self, dir: Dir, bytes: u64, t: Ps, now: Ps) -> (Ps, Ps, u32) {
        let shared = self.engines.len() < 2;
        let (e, free) = (self.engines.iter().copied().enumerate())
            .filter(|&(e, _)| shared || e % 2 == dir as usize)
            .min_by_key(|&(_, f)| f)
            .unwrap_or((0, t));
        let start = t.max(free);
        let d = dir as usize;
        let by_size = start + (bytes as f64 * 1000.0 / self.speed(dir, bytes).max(1e-9)) as Ps;
        let done = self.lanes[d].reserve(start, bytes, now.min(start)).max(by_size);
        if let Some(slot) = self.engines.get_mut(e) {
            *slot = done;
        }
        self.done[d] = self.done[d].max(done);
        let crossing = &mut self.crossing[d];
        while crossing.first_key_value().is_some_and(|(&(end, _), _)| end <= now) {
            crossing.pop_first();
        }
        *crossing.entry((done, start)).or_default() += bytes;
        let s = &mut self.stats[d];
        s.transfers += 1;
        s.bytes += bytes;
        s.busy_ps += done - start;
        (start, done + self.latency, e as u32)
    }

    /// Take a transfer's counts back out (`start` and `end` as [`Link::transfer`] returned them): one
    /// planned beyond the end of the run, which the run never reached. Its reservation stays.
    pub fn retract(&mut self, dir: Dir, (start, end): (Ps, Ps), bytes: u64) {
        let s = &mut self.stats[dir as usize];
        s.transfers -= 1;
        s.bytes -= bytes;
        s.busy_ps -= end - self.latency - start;
        let key = (end - self.latency, start);
        if let Some(b) = self.crossing[dir as usize].get_mut(&key) {
            *b -= bytes.min(*b);
            if *b == 0 {
                self.crossing[dir as usize].remove(&key);
            }
        }
    }

    /// Bytes the link has yet to carry at `now`: the work reserved beyond `now` in its busier
    /// direction, in host-to-device bytes (the last copy's end, latency excluded; gaps count as work).
    pub fn backlog_bytes(&self, now: Ps) -> u64 {
        let until = self.done[0].max(self.done[1]);
        (until.saturating_sub(now) as f64 * self.gbps[0] / 1000.0) as u64
    }

    /// Export `link.{h2d,d2h}.{transfers,bytes,busy_ns}` and utilisation over `span` ps. Transfers
    /// count whole in `transfers` and `bytes`; in `busy_ns` and `utilization` a transfer still
    /// crossing at `span` counts up to `span` (its bytes in proportion to its time).
    pub fn export(&self, m: &mut Metrics, span: Ps) {
        for (d, name) in ["h2d", "d2h"].into_iter().enumerate() {
            let s = &self.stats[d];
            let (mut tail_ps, mut tail_bytes) = (0, 0.0);
            for (&(done, start), &bytes) in self.crossing[d].range((span, 0)..) {
                let tail = done - start.max(span);
                tail_ps += tail;
                if done > start {
                    tail_bytes += bytes as f64 * tail as f64 / (done - start) as f64;
                }
            }
            m.int(format!("link.{name}.transfers"), s.transfers);
            m.int(format!("link.{name}.bytes"), s.bytes);
            m.float(format!("link.{name}.busy_ns"), s.busy_ps.saturating_sub(tail_ps) as f64 / PS_PER_NS as f64);
            let capacity = self.gbps[d] * span as f64 / 1000.0; // bytes the direction could carry
            let carried = (s.bytes as f64 - tail_bytes).max(0.0);
            m.float(format!("link.{name}.utilization"), if capacity > 0.0 { carried / capacity } else { 0.0 });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ByteSize;

    fn cfg(model: BandwidthModel, engines: u32) -> LinkConfig {
        LinkConfig {
            latency_ns: 1000.0,
            bandwidth_gbps: 12.0,
            d2h_bandwidth_gbps: 0.0,
            copy_engines: engines,
            bandwidth_model: model,
            atan_b_per_kib: 0.07292,
            atan_large_transfer_bytes: ByteSize(2 << 20),
            atan_large_transfer_factor: 0.5,
        }
    }

    #[test]
    fn atan_curve_matches_the_uvmsmart_anchors() {
        let l = Link::new(&cfg(BandwidthModel::Atan, 1));
        // spec/uvm-driver.md: about 1.9 µs for 4 KiB and 6 µs for 64 KiB at a = 12.
        let t4 = 4096.0 / l.speed_gbps(4096);
        let t64 = 65536.0 / l.speed_gbps(65536);
        assert!((1850.0..1950.0).contains(&t4), "{t4} ns");
        assert!((6000.0..6500.0).contains(&t64), "{t64} ns");
        // Large transfers approach the bandwidth, then are halved at 2 MiB and up.
        assert!(l.speed_gbps(1 << 20) > 11.5);
        assert!((l.speed_gbps(2 << 20) - 6.0).abs() < 0.1);
    }

    #[test]
    fn one_transfer_costs_size_over_bandwidth_plus_latency() {
        let mut l = Link::new(&cfg(BandwidthModel::Constant, 1));
        let (s, e) = l.transfer(Dir::HostToDevice, 12_000, 0, 0);
        assert_eq!(s, 0);
        assert!((2_000_000..2_000_100).contains(&e), "{e}"); // 1 µs + 1 µs
    }

    #[test]
    fn copy_engines_serialise_and_directions_are_independent() {
        let mut one = Link::new(&cfg(BandwidthModel::Constant, 1));
        let (_, a) = one.transfer(Dir::HostToDevice, 12_000, 0, 0);
        let (s2, b) = one.transfer(Dir::DeviceToHost, 12_000, 0, 0);
        assert!(s2 >= a - 1_000_000 && b > a, "one engine: the second waits");
        let mut two = Link::new(&cfg(BandwidthModel::Constant, 2));
        let (_, a) = two.transfer(Dir::HostToDevice, 12_000, 0, 0);
        let (_, b) = two.transfer(Dir::DeviceToHost, 12_000, 0, 0);
        assert_eq!(a, b, "two engines, two directions: in parallel at full speed");
        let (_, c) = two.transfer(Dir::HostToDevice, 12_000, 0, 0);
        assert!(c > a + 900_000, "a third waits for an engine");
        assert_eq!(two.stats[0].bytes, 24_000);
    }

    #[test]
    fn engines_serve_one_direction_each() {
        // Two engines: a queue of fetches to the device never delays a copy to the host.
        let mut l = Link::new(&cfg(BandwidthModel::Constant, 2));
        let (s1, _, e1) = l.transfer_on(Dir::HostToDevice, 120_000, 0, 0);
        let (s2, _, e2) = l.transfer_on(Dir::HostToDevice, 120_000, 0, 0);
        assert_eq!((e1, e2, s1), (0, 0, 0));
        assert!(s2 >= 10_000_000, "the second fetch waits for the one host-to-device engine: {s2}");
        let (s3, end3, e3) = l.transfer_on(Dir::DeviceToHost, 12_000, 0, 0);
        assert_eq!((e3, s3), (1, 0), "the copy to the host takes the other engine at once");
        assert!((2_000_000..2_000_100).contains(&end3), "{end3}");
        // Four engines: two a direction, the device-to-host pair untouched by fetches.
        let mut four = Link::new(&cfg(BandwidthModel::Constant, 4));
        let used: Vec<u32> = (0..3).map(|_| four.transfer_on(Dir::HostToDevice, 12_000, 0, 0).2).collect();
        assert!(used.iter().all(|e| e % 2 == 0), "{used:?}");
        assert_eq!(four.transfer_on(Dir::DeviceToHost, 12_000, 0, 0).0, 0);
    }

    #[test]
    fn backlog_is_the_busier_direction_s_work_beyond_now() {
        let mut l = Link::new(&cfg(BandwidthModel::Constant, 2));
        assert_eq!(l.backlog_bytes(0), 0);
        // 12 kB each way at 12 GB/s: 1 µs; then 24 kB more host-to-device: 3 µs in all (latency not counted).
        l.transfer(Dir::HostToDevice, 12_000, 0, 0);
        l.transfer(Dir::DeviceToHost, 12_000, 0, 0);
        let near = |got: u64, want: u64| got.abs_diff(want) <= 100; // the timeline rounds to a few ns
        assert!(near(l.backlog_bytes(0), 12_000) && near(l.backlog_bytes(500_000), 6_000));
        l.transfer(Dir::HostToDevice, 24_000, 0, 0);
        assert!(near(l.backlog_bytes(1_000_000), 24_000), "{}", l.backlog_bytes(1_000_000));
        assert_eq!(l.backlog_bytes(3_100_000), 0);
        // 48 kB to the host from 3.1 µs (its engine is free): 4 µs at 12 GB/s, the busier direction
        // now. (Every earlier check had host-to-device the busier, or both even.)
        l.transfer(Dir::DeviceToHost, 48_000, 3_100_000, 3_100_000);
        assert!(near(l.backlog_bytes(3_100_000), 48_000), "{}", l.backlog_bytes(3_100_000));
    }

    #[test]
    fn each_direction_moves_at_its_own_bandwidth() {
        // 12 GB/s to the device, 6 back: 12 kB takes 1 µs one way and 2 µs the other (+1 µs latency).
        let mut l = Link::new(&LinkConfig { d2h_bandwidth_gbps: 6.0, ..cfg(BandwidthModel::Constant, 2) });
        let (_, to) = l.transfer(Dir::HostToDevice, 12_000, 0, 0);
        let (_, back) = l.transfer(Dir::DeviceToHost, 12_000, 0, 0);
        assert!((2_000_000..2_000_100).contains(&to) && (3_000_000..3_000_100).contains(&back), "{to} {back}");
        let mut m = Metrics::default();
        l.export(&mut m, 4_000_000);
        // Over 4 µs each direction carried 12 kB: a quarter of 48 kB, half of 24 kB.
        assert!((m.get("link.h2d.utilization").unwrap() - 0.25).abs() < 1e-9);
        assert!((m.get("link.d2h.utilization").unwrap() - 0.5).abs() < 1e-9);
        // 0 (the default) means the same as host to device.
        assert_eq!(LinkConfig { d2h_bandwidth_gbps: 0.0, ..cfg(BandwidthModel::Constant, 2) }.d2h_gbps(), 12.0);
    }

    /// A copy still crossing when the run ends counts up to the end in busy_ns and utilization (whole
    /// in bytes); one that ended before is whole in all three. Before, 12 kB started 0.5 µs before a
    /// 1 µs run's end counted whole: utilization 1.5 with one engine.
    #[test]
    fn a_copy_crossing_the_end_of_the_run_counts_up_to_the_end() {
        let mut l = Link::new(&cfg(BandwidthModel::Constant, 1));
        l.transfer(Dir::HostToDevice, 6_000, 0, 0); // 0 .. 0.5 µs
        l.transfer(Dir::HostToDevice, 12_000, 500_000, 500_000); // 0.5 .. 1.5 µs
        let mut m = Metrics::default();
        l.export(&mut m, 1_000_000);
        let near = |k: &str, want: f64| (m.get(k).unwrap() - want).abs() < 1e-2 * want.max(1.0);
        assert_eq!(m.get("link.h2d.bytes"), Some(18_000.0));
        assert!(near("link.h2d.busy_ns", 1_000.0), "{:?}", m.get("link.h2d.busy_ns"));
        // 6 kB + half of 12 kB in 1 µs of 12 GB/s: all of it.
        assert!(near("link.h2d.utilization", 1.0), "{:?}", m.get("link.h2d.utilization"));
        // Over 2 µs both copies are whole: 18 of 24 kB.
        let mut m2 = Metrics::default();
        l.export(&mut m2, 2_000_000);
        assert!((m2.get("link.h2d.utilization").unwrap() - 0.75).abs() < 1e-2);
        // A transfer retracted (planned past the end) leaves no count and no tail behind: every
        // h2d metric is as before it. (Utilization alone matched with a retract that did nothing:
        // its bytes counted whole and its tail took them back out.)
        let t = l.transfer(Dir::HostToDevice, 12_000, 3_000_000, 3_000_000);
        l.retract(Dir::HostToDevice, t, 12_000);
        let mut m3 = Metrics::default();
        l.export(&mut m3, 2_000_000);
        for k in ["transfers", "bytes", "busy_ns", "utilization"].map(|k| format!("link.h2d.{k}")) {
            assert_eq!(m3.get(&k), m2.get(&k), "{k}");
        }
        assert_eq!(m3.get("link.h2d.transfers"), Some(2.0));
    }

    #[test]
    fn concurrent_transfers_share_a_direction() {
        let mut l = Link::new(&cfg(BandwidthModel::Constant, 4));
        let ends: Vec<Ps> = (0..4).map(|_| l.transfer(Dir::HostToDevice, 120_000, 0, 0).1).collect();
        // 480 kB at 12 GB/s take 40 µs; the last finishes then (plus 1 µs latency).
        let last = *ends.iter().max().unwrap();
        assert!((40_500_000..42_000_000).contains(&last), "{last}");
    }

    /// Under the atan fit a 4 KiB copy moves at about 2.2 GB/s, not the link's 12: it ends when
    /// its size allows (about 1.9 µs), well after its bytes' share of the lane (0.34 µs), plus the
    /// 1 µs latency.
    #[test]
    fn a_small_atan_transfer_ends_when_its_speed_allows() {
        let mut l = Link::new(&cfg(BandwidthModel::Atan, 1));
        let (s, e) = l.transfer(Dir::HostToDevice, 4096, 0, 0);
        let want = 1_000_000 + (4096.0 * 1000.0 / l.speed_gbps(4096)) as Ps;
        assert_eq!((s, e), (0, want));
        assert!((2_850_000..2_950_000).contains(&e), "{e}");
    }

    /// A transfer's busy time runs from when an engine takes it: with one engine, two 12 kB copies
    /// requested at 0 take 1 µs each (the second from 1 µs), 2 µs in all.
    #[test]
    fn busy_time_runs_from_the_engines_start() {
        let mut l = Link::new(&cfg(BandwidthModel::Constant, 1));
        l.transfer(Dir::HostToDevice, 12_000, 0, 0);
        let (s, _) = l.transfer(Dir::HostToDevice, 12_000, 0, 0);
        assert!((1_000_000..1_000_100).contains(&s), "{s}");
        assert!((2_000_000..2_000_200).contains(&l.stats[0].busy_ps), "{}", l.stats[0].busy_ps);
    }

    /// The backlog is in host-to-device bytes: 12 kB to the host at 6 GB/s take 2 µs, which the
    /// 12 GB/s host-to-device direction would fill with 24 kB.
    #[test]
    fn the_backlog_counts_host_to_device_bytes() {
        let mut l = Link::new(&LinkConfig { d2h_bandwidth_gbps: 6.0, ..cfg(BandwidthModel::Constant, 2) });
        l.transfer(Dir::DeviceToHost, 12_000, 0, 0);
        assert!(l.backlog_bytes(0).abs_diff(24_000) <= 100, "{}", l.backlog_bytes(0));
    }
}
