//! Zero-copy (remote) accesses: a GPU access to a managed page that is mapped
//! remotely, resident in host memory (preferred location host, accessed-by,
//! or pinned on the host by thrashing mitigation; spec/uvm-driver.md
//! "Residency, hints").
//!
//! How it works: each access of a warp instruction to such a page moves its
//! lines over the host link, uncached (ASSUMPTION: the GPU caches do not keep
//! host memory). A load pays the link latency twice (request out, data back)
//! plus its bytes at the link bandwidth on the host-to-device direction; a
//! store pays it once on the device-to-host direction. The bandwidth is the
//! link's (`link.bandwidth_gbps`, `link.latency_ns`) on timelines of its own:
//! remote accesses do not compete with the copy engines' migrations (a
//! simplification).

use crate::config::LinkConfig;
use crate::mem::Timeline;
use crate::sim::{ns_to_ps, Ps};
use crate::stats::Metrics;
use crate::workload::MemKind;

#[derive(Debug, Clone)]
pub struct RemoteAccess {
    latency: Ps,
    /// Host-to-device (load data) and device-to-host (store data) bandwidth.
    lanes: [Timeline; 2],
    pub loads: u64,
    pub stores: u64,
    pub bytes: u64,
    /// Access counters, when access-counter migration is on.
    pub counters: Option<super::counters::AccessCounters>,
}

impl RemoteAccess {
    pub fn new(c: &LinkConfig) -> RemoteAccess {
        RemoteAccess {
            latency: ns_to_ps(c.latency_ns),
            lanes: [Timeline::new(c.bandwidth_gbps, 64), Timeline::new(c.d2h_gbps(), 64)],
            loads: 0,
            stores: 0,
            bytes: 0,
            counters: None,
        }
    }

    /// `bytes` (`lines` line requests) of page `vpn` accessed remotely from `t` (no request arrives before `now`); returns when done.
    pub fn access(&mut self, kind: MemKind, vpn: u64, lines: u32, bytes: u64, t: Ps, now: Ps) -> Ps {
        self.bytes += bytes;
        if let Some(c) = self.counters.as_mut() {
            c.count(vpn, lines);
        }
        match kind {
            MemKind::Store => {
                self.stores += 1;
                self.lanes[1].reserve(t, bytes, now.min(t)) + self.latency
            }
            // A prefetch instruction brings the data like a load (nothing waits for it).
            MemKind::Load | MemKind::Prefetch => {
                self.loads += 1;
                self.lanes[0].reserve(t + self.latency, bytes, now.min(t)) + self.latency
            }
        }
    }

    pub fn export(&self, m: &mut Metrics) {
        m.int("uvm.remote.loads", self.loads);
        m.int("uvm.remote.stores", self.stores);
        m.int("uvm.remote.bytes", self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn a_remote_load_pays_the_round_trip_and_the_bytes() {
        let mut c = Config::default().link;
        (c.latency_ns, c.bandwidth_gbps) = (1000.0, 16.0);
        let mut r = RemoteAccess::new(&c);
        // 128 B at 16 GB/s = 8 ns; 2 x 1 µs of latency.
        let done = r.access(MemKind::Load, 0, 1, 128, 0, 0);
        assert!((2_008_000..2_020_000).contains(&done), "{done}");
        // A store is posted: one latency.
        let done = r.access(MemKind::Store, 0, 1, 128, 0, 0);
        assert!((1_008_000..1_020_000).contains(&done), "{done}");
        // Bandwidth is shared: 64 KiB of loads at once take 4 µs more than one line.
        let mut r2 = RemoteAccess::new(&c);
        let last = (0..512).map(|_| r2.access(MemKind::Load, 0, 1, 128, 0, 0)).max().unwrap();
        assert!((6_000_000..6_200_000).contains(&last), "{last}");
        assert_eq!((r.loads, r.stores, r.bytes), (1, 1, 256));
    }

    #[test]
    fn each_line_request_counts_toward_the_pages_region() {
        let mut r = RemoteAccess::new(&Config::default().link);
        let cfg = super::super::counters::AccessCounterConfig { threshold: 4, ..Default::default() };
        r.counters = Some(super::super::counters::AccessCounters::new(&cfg));
        // 3 line requests to page 600 (region 1, sub-region (600 - 512) / 16 = 5): below the threshold of 4.
        r.access(MemKind::Load, 600, 3, 384, 0, 0);
        assert!(r.counters.as_ref().unwrap().notifications.is_empty());
        // One more request (a store) makes 4: region 1 notifies with sub-region 5 marked.
        r.access(MemKind::Store, 600, 1, 128, 0, 0);
        assert_eq!(r.counters.as_ref().unwrap().notifications, vec![(1, 1 << 5)]);
    }
}
