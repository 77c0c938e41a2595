//! Trans-FW (seed multi-gpu Ch. 4, §4.2, Fig. 30-31): short-circuiting page
//! walks in a GMMU multi-GPU system.
//!
//! - **Pending request table (PRT, §4.2.2)**: a cuckoo filter per GMMU of the
//!   pages with a valid PTE in that GPU's page table (under on-touch
//!   migration, the pages resident in its memory). It is searched with the L2
//!   TLB (ASSUMPTION: no extra latency; eight parallel comparators). A miss
//!   means the local walk cannot find the page: the far fault goes to the
//!   host at once, without queueing for or running a GMMU walk. A hit walks
//!   as the baseline does; if the page is not there (a false positive) the
//!   walk finds nothing and the fault goes to the host after it. The filter
//!   is updated when a PTE becomes valid (the fault answer arrives) and when
//!   it is invalidated (the invalidation request arrives).
//!   A full filter refuses an insert (xlat/cuckoo.rs never drops a stored
//!   fingerprint). A refused page would be a false negative, so while any
//!   refused page is mapped the GMMU does not trust a miss and walks
//!   (ASSUMPTION: the seed's sizing assumes the filter never overflows; the
//!   model keeps the refused pages in a set, hardware would need an overflow
//!   counter). Only inserted pages are deleted.
//! - **Forwarding table (FT, §4.2.3)**: a cuckoo filter in the host MMU keyed
//!   by VPN‖owner GPU, updated when a page changes owner (the old key is
//!   deleted, the new one inserted; a deletion can remove an aliasing
//!   fingerprint, as the seed notes). A far fault that misses the host-MMU TLB
//!   while at least `forward_threshold` × host walkers requests are queued and
//!   no host walker is free is still queued at the host, and is also
//!   forwarded to a GPU the FT names (other than the requester; several
//!   matches: one chosen by a hash of the page). That GPU's GMMU walks its
//!   own table (its walkers and PW-cache, competing with its demand walks;
//!   message host → GPU `host_latency_ns`) and notifies the host
//!   (`host_latency_ns`). A successful lookup whose notification reaches the
//!   host before a host walker takes the request removes it from the host
//!   PW-queue (no host walk); otherwise the walk runs and the earlier answer
//!   is used. A false positive (the GPU does not hold the page) is discarded:
//!   the host walk answers.
//!
//! ASSUMPTION: the fault is answered through the host, which then migrates or
//! maps the page as `multi.migration` says: the remote GPU's direct reply to
//! the requester (§4.2.3) saves nothing under on-touch migration (the
//! requester waits for the page); for remote mapping it would save one host
//! message, not modelled. A removed request's queue slot is freed at once.

use super::Multi;
use crate::config::{Config, TranslationMode};
use crate::gpu::Gpu;
use crate::sim::{mix64, Ps};
use crate::stats::Metrics;
use crate::xlat::cuckoo::{CuckooFilter, CuckooParams};
use crate::xlat::Lookup;
use std::collections::HashSet;

section! {
    /// Trans-FW (seed multi-gpu Ch. 4, §4.2, Fig. 30-32): a per-GMMU filter of the locally mapped pages lets a sure-remote L2-TLB miss skip the local walk, and the host forwards walks to the owner GPU when its PW-queue is long. Off by default; needs translation.mode = "gmmu".
    pub struct TransFwConfig {
        /// Pending request table (§4.2.2): an L2-TLB miss for a page the GMMU's cuckoo filter of mapped pages rules out skips the local walk and goes to the host at once.
        pub prt: bool = false,
        /// PRT fingerprints per GPU; seed multi-gpu §4.2.2: 125 buckets x 4 = 500 (Fig. 37 studies 250 and more).
        pub prt_entries: u32 = 500,
        /// PRT fingerprints per bucket; seed multi-gpu §4.2.2: 4.
        pub prt_bucket_size: u32 = 4,
        /// Host forwarding (§4.2.3): a host-MMU TLB miss while the host PW-queue is long is also forwarded to the GPU the forwarding table says owns the page, whose GMMU walks its own table.
        pub forwarding: bool = false,
        /// Forwarding-table fingerprints (key VPN‖owner GPU); seed multi-gpu §4.2.3: 1,000 buckets x 2 = 2000.
        pub ft_entries: u32 = 2000,
        /// Forwarding-table fingerprints per bucket; seed multi-gpu §4.2.3: 2.
        pub ft_bucket_size: u32 = 2,
        /// Bits per PRT and FT fingerprint. ASSUMPTION: the seed gives none, only that false positives are rare ("a low false positive in our configuration", §4.2.2); 8 bits bound them at full load by 2b/255 (3.1% PRT, 1.6% FT).
        pub fingerprint_bits: u32 = 8,
        /// Forward when no host walker is free and at least this many requests per host walker thread are queued; seed multi-gpu §4.2.3: half the walker threads (0.5); Fig. 36 studies 0 (forward whenever no walker is free), 1 and 2.
        pub forward_threshold: f64 = 0.5,
    }
}

/// Check the `multi.transfw` keys.
pub fn validate(c: &TransFwConfig, cfg: &Config) -> Result<(), (String, String)> {
    let r = |k: &str, v: f64, lo: f64, hi: f64| {
        if v.is_finite() && v >= lo && v <= hi {
            Ok(())
        } else {
            Err((format!("multi.transfw.{k}"), format!("must be between {lo} and {hi}, got {v}")))
        }
    };
    r("prt_entries", c.prt_entries as f64, 1.0, 1e8)?;
    r("prt_bucket_size", c.prt_bucket_size as f64, 1.0, 8.0)?;
    r("ft_entries", c.ft_entries as f64, 1.0, 1e8)?;
    r("ft_bucket_size", c.ft_bucket_size as f64, 1.0, 8.0)?;
    r("fingerprint_bits", c.fingerprint_bits as f64, 1.0, 16.0)?;
    r("forward_threshold", c.forward_threshold, 0.0, 1e6)?;
    if (c.prt || c.forwarding) && cfg.translation.mode != TranslationMode::Gmmu {
        let k = if c.prt { "prt" } else { "forwarding" };
        return Err(("translation.mode".into(), format!("must be \"gmmu\" with multi.transfw.{k} = true")));
    }
    Ok(())
}

fn filter(entries: u32, bucket_size: u32, bits: u32, seed: u64) -> CuckooFilter {
    let mut p = CuckooParams::with_entries(entries as usize, bucket_size as usize, seed);
    p.fingerprint_bits = bits;
    CuckooFilter::new(p)
}

#[derive(Debug, Clone, Default)]
pub struct PrtStats {
    /// L2-TLB misses that searched the PRT.
    pub lookups: u64,
    /// Misses the PRT ruled out: no local walk, the fault went to the host at once.
    pub skipped: u64,
    /// PRT hits for a page without a valid PTE: a local walk that found nothing.
    pub false_positives: u64,
    /// Lookups while a refused page was mapped (a miss not trusted: walked).
    pub untrusted: u64,
    /// Inserts the full filter refused.
    pub insert_failures: u64,
}

/// The pending request table of one GMMU.
#[derive(Debug, Clone)]
pub struct Prt {
    filter: CuckooFilter,
    /// Mapped pages the full filter refused.
    refused: HashSet<u64>,
    pub stats: PrtStats,
}

impl Prt {
    /// GPU `gpu`'s PRT, when `multi.transfw.prt` is on in a multi-GPU run.
    pub fn build(cfg: &Config, gpu: usize) -> Option<Box<Prt>> {
        let c = &cfg.multi.transfw;
        (c.prt && cfg.multi.active()).then(|| {
            let seed = mix64(cfg.sim.seed ^ 0x7e4f_0000 ^ gpu as u64);
            Box::new(Prt {
                filter: filter(c.prt_entries, c.prt_bucket_size, c.fingerprint_bits, seed),
                refused: HashSet::new(),
                stats: PrtStats::default(),
            })
        })
    }

    /// An L2-TLB miss on page `vpn` (`mapped`: whether its PTE is valid, which
    /// decides what the walk would find): true = skip the local walk.
    pub fn skip(&mut self, vpn: u64, mapped: bool) -> bool {
        self.stats.lookups += 1;
        if !self.refused.is_empty() {
            self.stats.untrusted += 1;
            return false;
        }
        if self.filter.contains(vpn) {
            self.stats.false_positives += !mapped as u64;
            return false;
        }
        debug_assert!(!mapped, "a cuckoo filter has no false negatives for inserted pages");
        self.stats.skipped += 1;
        true
    }

    /// Page `vpn`'s PTE became valid.
    pub fn mapped(&mut self, vpn: u64) {
        if !self.filter.insert(vpn) {
            self.stats.insert_failures += 1;
            self.refused.insert(vpn);
        }
    }

    /// Page `vpn`'s PTE was invalidated.
    pub fn unmapped(&mut self, vpn: u64) {
        if !self.refused.remove(&vpn) {
            self.filter.delete(vpn);
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct FwStats {
    /// Far faults that missed the host-MMU TLB (and the sum and maximum of the requests queued at the host walkers then).
    pub host_misses: u64,
    pub queued_sum: u64,
    pub queued_max: u64,
    /// Of those, the ones that found the host walkers busy past the threshold (FT searched).
    pub over_threshold: u64,
    /// Forwarded to a GPU the FT named.
    pub forwarded: u64,
    /// Forwarded to the GPU that held the page (its walk found the PTE).
    pub remote_hits: u64,
    /// Forwarded to a GPU that did not own the page (FT false positive): discarded.
    pub false_positives: u64,
    /// Forwarded to the owner before its PTE was valid (the page still on its way there): discarded.
    pub owner_not_ready: u64,
    /// Remote hits whose notification removed the request from the host PW-queue (no host walk).
    pub walks_removed: u64,
    /// Remote hits that answered before a host walk that had already started.
    pub remote_first: u64,
    /// FT inserts the full filter refused.
    pub insert_failures: u64,
}

/// The host MMU's forwarding table and its policy.
#[derive(Debug, Clone)]
pub struct Forwarding {
    ft: CuckooFilter,
    /// Owner changes whose FT insert was refused (not deleted later).
    refused: HashSet<u64>,
    /// Queued requests at or above which a request is forwarded.
    threshold: f64,
    seed: u64,
    pub stats: FwStats,
}

/// FT key: the page number and the owner GPU (5 bits).
fn ft_key(vpn: u64, gpu: usize) -> u64 {
    vpn << 5 | gpu as u64
}

impl Forwarding {
    pub fn build(cfg: &Config) -> Option<Box<Forwarding>> {
        let c = &cfg.multi.transfw;
        (c.forwarding && cfg.multi.active()).then(|| {
            let seed = mix64(cfg.sim.seed ^ 0x7e4f_f000);
            Box::new(Forwarding {
                ft: filter(c.ft_entries, c.ft_bucket_size, c.fingerprint_bits, seed),
                refused: HashSet::new(),
                threshold: c.forward_threshold * cfg.multi.host_mmu.walker.threads as f64,
                seed,
                stats: FwStats::default(),
            })
        })
    }

    /// Page `vpn` moved from `old` (a GPU, or the host) to GPU `new`.
    pub fn owner_changed(&mut self, vpn: u64, old: u8, new: usize) {
        if old != super::HOST {
            let k = ft_key(vpn, old as usize);
            if !self.refused.remove(&k) {
                self.ft.delete(k);
            }
        }
        let k = ft_key(vpn, new);
        if !self.ft.insert(k) {
            self.stats.insert_failures += 1;
            self.refused.insert(k);
        }
    }

    /// The GPU other than `g` (of `n`) the FT says owns `vpn`; one chosen by a hash of the page if several match.
    fn target(&self, vpn: u64, g: usize, n: usize) -> Option<usize> {
        let hits: Vec<usize> = (0..n).filter(|&x| x != g && self.ft.contains(ft_key(vpn, x))).collect();
        (!hits.is_empty()).then(|| hits[(mix64(self.seed ^ vpn) % hits.len() as u64) as usize])
    }
}

impl Multi {
    /// The host translates `vpn` for GPU `g`'s far fault arriving at `t`, with
    /// Trans-FW's forwarding when it is on (else as [`Multi::host_translate`]).
    pub(super) fn host_translate_fw(&mut self, g: usize, vpn: u64, t: Ps, now: Ps, gpus: &mut [Gpu]) -> Ps {
        if self.forwarding.is_none() || !self.gmmu_mode {
            return self.host_translate(vpn, t, now);
        }
        let at = match self.host_tlb.as_mut().map(|tlb| tlb.lookup(vpn, t, now)) {
            Some(Lookup::Done(d, _)) => return d,
            Some(Lookup::Miss(at)) => at,
            None => t,
        };
        let queued = self.host_walker.queued_at(at);
        let must_wait = self.host_walker.start_at(at) > at;
        let fw = self.forwarding.as_mut().expect("checked");
        fw.stats.host_misses += 1;
        fw.stats.queued_sum += queued as u64;
        fw.stats.queued_max = fw.stats.queued_max.max(queued as u64);
        let over = must_wait && queued as f64 >= fw.threshold;
        fw.stats.over_threshold += over as u64;
        let Some(x) = over.then(|| fw.target(vpn, g, self.n)).flatten() else {
            return self.host_walk(vpn, t, at, now);
        };
        fw.stats.forwarded += 1;
        // The owner's GMMU walks its own table (its walkers and PW-cache), then notifies the host.
        let gx = &mut gpus[x];
        let walked = gx.xlat.gmmu.walk(vpn << 12, 1, at + self.host_lat, now, &mut gx.mem.dram);
        let owner = self.dir.page(vpn).owner as usize == x;
        let notified = walked + self.host_lat;
        if !owner || !gx.xlat.space.residency.is_resident(vpn) {
            fw.stats.false_positives += !owner as u64;
            fw.stats.owner_not_ready += owner as u64;
            return self.host_walk(vpn, t, at, now);
        }
        fw.stats.remote_hits += 1;
        if notified <= self.host_walker.start_at(at) {
            // Still queued at the host: removed, never walked there.
            fw.stats.walks_removed += 1;
            if let Some(tlb) = self.host_tlb.as_mut() {
                tlb.fill_miss(vpn, 0, t, notified);
            }
            return notified;
        }
        let host = self.host_walk(vpn, t, at, now);
        let fw = self.forwarding.as_mut().expect("checked");
        fw.stats.remote_first += (notified < host) as u64;
        host.min(notified)
    }

    /// Trans-FW's FT follows an owner change of `vpn` from `old` to GPU `new`.
    pub(super) fn owner_changed(&mut self, vpn: u64, old: u8, new: usize) {
        if let Some(fw) = self.forwarding.as_mut() {
            if old != new as u8 {
                fw.owner_changed(vpn, old, new);
            }
        }
    }
}

/// Export the `multi.transfw.*` metrics (PRT counts summed over the GPUs).
pub fn export(fw: Option<&Forwarding>, m: &mut Metrics, gpus: &[Gpu]) {
    let prts: Vec<&Prt> = gpus.iter().filter_map(|g| g.xlat.prt.as_deref()).collect();
    if !prts.is_empty() {
        let sum = |f: fn(&PrtStats) -> u64| prts.iter().map(|p| f(&p.stats)).sum::<u64>();
        let p = "multi.transfw.prt";
        m.int(format!("{p}.lookups"), sum(|s| s.lookups));
        m.int(format!("{p}.skipped_walks"), sum(|s| s.skipped));
        m.int(format!("{p}.false_positives"), sum(|s| s.false_positives));
        m.int(format!("{p}.untrusted"), sum(|s| s.untrusted));
        m.int(format!("{p}.insert_failures"), sum(|s| s.insert_failures));
    }
    if let Some(fw) = fw {
        let s = &fw.stats;
        let p = "multi.transfw.fw";
        m.int(format!("{p}.host_misses"), s.host_misses);
        m.float(format!("{p}.host_queue_mean"), if s.host_misses == 0 { 0.0 } else { s.queued_sum as f64 / s.host_misses as f64 });
        m.int(format!("{p}.host_queue_max"), s.queued_max);
        m.int(format!("{p}.over_threshold"), s.over_threshold);
        m.int(format!("{p}.forwarded"), s.forwarded);
        m.int(format!("{p}.remote_hits"), s.remote_hits);
        m.int(format!("{p}.false_positives"), s.false_positives);
        m.int(format!("{p}.owner_not_ready"), s.owner_not_ready);
        m.int(format!("{p}.host_walks_removed"), s.walks_removed);
        m.int(format!("{p}.remote_first"), s.remote_first);
        m.int(format!("{p}.insert_failures"), s.insert_failures);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multi::MigrationPolicy;
    use crate::sim::ns_to_ps;
    use crate::workload::Buffer;
    use crate::xlat::Xlat;

    const BASE: u64 = 1 << 30;

    /// `n` GPUs with a 1 MiB buffer mapped, on-touch migration, flat 100 ns walks
    /// of 4 levels and no page-walk caches (so a walk is exactly 400 ns).
    fn system(n: u32, f: impl FnOnce(&mut Config)) -> (Multi, Vec<Gpu>, Config) {
        let mut cfg = Config::default();
        cfg.gpu.sms = 2;
        cfg.multi.gpus = n;
        cfg.multi.migration = MigrationPolicy::OnTouch;
        cfg.translation.levels = 4;
        for w in [&mut cfg.gmmu.walker, &mut cfg.multi.host_mmu.walker] {
            (w.level_latency_ns, w.pte_from_dram, w.pwc_entries) = (100.0, false, 0);
        }
        cfg.multi.host_mmu.tlb_entries = 0;
        cfg.multi.host_latency_ns = 150.0;
        f(&mut cfg);
        let mut gpus: Vec<Gpu> = (0..n as usize).map(|i| Gpu::with_id(&cfg, i)).collect();
        for g in gpus.iter_mut() {
            g.xlat.space.map(&Buffer { base: BASE, bytes: 1 << 20, page_bytes: 4096, managed: true });
        }
        (Multi::new(&cfg, None), gpus, cfg)
    }

    /// `n` dummy walks taking the host MMU's walkers at `at` (addresses no test uses).
    fn occupy_host_walkers(m: &mut Multi, n: u64, at: Ps) {
        for i in 0..n {
            m.host_walker.walk((1000 + i) << 30, 1, at, at, &mut m.host_dram);
        }
    }

    /// Forwarding with 2 host walkers and a 64-entry host TLB: GPU 1 has faulted the buffer's first
    /// page in, and the host TLB has lost the entry that fault left (as an eviction would).
    fn forwarding_with_the_host_tlb_entry_lost() -> (Multi, Vec<Gpu>, u64) {
        let (mut m, mut gpus, _) = system(2, |c| {
            c.multi.transfw.forwarding = true;
            c.multi.host_mmu.walker.threads = 2;
            (c.multi.host_mmu.tlb_entries, c.multi.host_mmu.tlb_ways) = (64, 64);
        });
        let vpn = BASE >> 12;
        fault(&mut m, &mut gpus, 1, vpn, 0);
        m.host_tlb.as_mut().unwrap().invalidate(vpn);
        (m, gpus, vpn)
    }

    /// GPU `g` faults on `vpn` at `t` and gets its answer (no other GPU maps the page).
    fn fault(m: &mut Multi, gpus: &mut [Gpu], g: usize, vpn: u64, t: Ps) -> Ps {
        let ready = m.fault(g, vpn, false, t, t, gpus).expect("not a duplicate");
        for (at, x) in std::mem::take(&mut m.arrivals) {
            m.invalidation_arrives((x & 31) as usize, x >> 5, at, &mut gpus[(x & 31) as usize]);
        }
        m.page_ready(g, vpn, &mut gpus[g]);
        ready
    }

    fn lookups(cfg: &Config) -> Ps {
        let clock = crate::sim::Clock::from_mhz(cfg.gpu.core_mhz);
        clock.cycles((cfg.gpu.l1tlb.latency_cycles + cfg.gpu.l2tlb.latency_cycles) as u64)
    }

    #[test]
    fn a_sure_remote_miss_skips_the_local_walk() {
        let (mut m, mut gpus, cfg) = system(2, |c| c.multi.transfw.prt = true);
        let vpn = BASE >> 12;
        fault(&mut m, &mut gpus, 0, vpn, 0); // GPU 0 maps the page: in its PRT
        let t = ns_to_ps(100_000.0);
        let g = &mut gpus[0];
        let walks = g.xlat.gmmu.stats.walks;
        // A page GPU 0 never mapped: the far fault is raised right after the L1 and L2 lookups.
        match g.xlat.translate(0, BASE + 4096, t, t, &mut g.mem.dram) {
            Xlat::Fault(d) => assert_eq!(d, t + lookups(&cfg)),
            x => panic!("expected a far fault, got {x:?}"),
        }
        assert_eq!(g.xlat.gmmu.stats.walks, walks, "no local walk");
        // The mapped page walks and is found (400 ns).
        match g.xlat.translate(0, BASE, t, t, &mut g.mem.dram) {
            Xlat::Ready(d, _, _) => assert_eq!(d, t + lookups(&cfg) + ns_to_ps(400.0)),
            x => panic!("expected a translation, got {x:?}"),
        }
        let s = &g.xlat.prt.as_ref().unwrap().stats;
        assert_eq!((s.lookups, s.skipped, s.false_positives), (2, 1, 0));
        // Without the PRT the same miss waits for a 400 ns walk before faulting.
        let (mut b, mut bg, _) = system(2, |_| {});
        fault(&mut b, &mut bg, 0, vpn, 0);
        let g = &mut bg[0];
        match g.xlat.translate(0, BASE + 4096, t, t, &mut g.mem.dram) {
            Xlat::Fault(d) => assert_eq!(d, t + lookups(&cfg) + ns_to_ps(400.0)),
            x => panic!("expected a far fault, got {x:?}"),
        }
    }

    #[test]
    fn a_false_positive_walks_locally_and_the_prt_follows_migrations() {
        // One bucket of one 1-bit fingerprint: once a page is in, the filter matches every page.
        let (mut m, mut gpus, cfg) = system(2, |c| {
            c.multi.transfw.prt = true;
            (c.multi.transfw.prt_entries, c.multi.transfw.prt_bucket_size, c.multi.transfw.fingerprint_bits) = (1, 1, 1);
        });
        let vpn = BASE >> 12;
        fault(&mut m, &mut gpus, 0, vpn, 0);
        let t = ns_to_ps(100_000.0);
        let g = &mut gpus[0];
        match g.xlat.translate(0, BASE + 4096, t, t, &mut g.mem.dram) {
            Xlat::Fault(d) => assert_eq!(d, t + lookups(&cfg) + ns_to_ps(400.0), "walked, found nothing"),
            x => panic!("expected a far fault, got {x:?}"),
        }
        assert_eq!(g.xlat.prt.as_ref().unwrap().stats.false_positives, 1);
        // A second page cannot be inserted (full): while it is mapped a miss is not trusted.
        fault(&mut m, &mut gpus, 0, vpn + 2, t);
        assert_eq!(gpus[0].xlat.prt.as_ref().unwrap().stats.insert_failures, 1);
        // GPU 1 takes both pages (on-touch): GPU 0's PRT is empty again, and its misses skip.
        let t2 = ns_to_ps(200_000.0);
        fault(&mut m, &mut gpus, 1, vpn, t2);
        fault(&mut m, &mut gpus, 1, vpn + 2, t2 + ns_to_ps(100_000.0));
        let g = &mut gpus[0];
        assert!(g.xlat.prt.as_ref().unwrap().filter.is_empty());
        let t3 = ns_to_ps(400_000.0);
        match g.xlat.translate(0, BASE, t3, t3, &mut g.mem.dram) {
            Xlat::Fault(d) => assert_eq!(d, t3 + lookups(&cfg)),
            x => panic!("expected a far fault, got {x:?}"),
        }
        let s = &g.xlat.prt.as_ref().unwrap().stats;
        assert_eq!((s.skipped, s.untrusted), (1, 0));
    }

    #[test]
    fn a_refused_page_makes_misses_walk_until_it_leaves() {
        let mut p = Prt { filter: filter(1, 1, 8, 7), refused: HashSet::new(), stats: PrtStats::default() };
        p.mapped(10);
        p.mapped(11); // refused: the filter is full
        assert!(!p.skip(11, true) && !p.skip(12, false), "untrusted while a refused page is mapped");
        p.unmapped(11);
        assert!(!p.skip(10, true));
        assert!(p.skip(12, false) || p.filter.contains(12));
        assert_eq!((p.stats.insert_failures, p.stats.untrusted), (1, 2));
        // A refused page's fingerprint is not deleted when it leaves: with one-bit fingerprints in
        // one bucket every page's fingerprint is page 10's, and deleting page 11's would drop page 10.
        let mut p = Prt { filter: filter(1, 1, 1, 7), refused: HashSet::new(), stats: PrtStats::default() };
        p.mapped(10);
        p.mapped(11);
        p.unmapped(11);
        assert!(p.filter.contains(10) && p.filter.len() == 1);
    }

    #[test]
    fn a_walk_forwarded_before_the_owner_has_the_page_is_discarded() {
        let (mut m, mut gpus, _) = system(2, |c| {
            c.multi.transfw.forwarding = true;
            c.multi.host_mmu.walker.threads = 2;
        });
        let vpn = BASE >> 12;
        // GPU 1's fault moves the page there, but its answer has not arrived (no `page_ready`).
        m.fault(1, vpn, false, 0, 0, &mut gpus).unwrap();
        let arrive = ns_to_ps(1_000.0);
        occupy_host_walkers(&mut m, 5, arrive);
        let walked = m.host_translate_fw(0, vpn, arrive, arrive, &mut gpus);
        assert_eq!(walked - arrive, ns_to_ps(1200.0), "the host walk answers");
        let s = &m.forwarding.as_ref().unwrap().stats;
        assert_eq!((s.forwarded, s.false_positives, s.owner_not_ready), (1, 0, 1));
    }

    /// GPU 1 owns page `vpn`; `busy` dummy walks occupy the host walkers (2 threads) when
    /// GPU 0's fault on it arrives. Returns (answer time - arrival, the system).
    fn forwarded_fault(busy: u64, threshold: f64) -> (Ps, Multi, Vec<Gpu>) {
        forwarded_fault_with(busy, threshold, |_| {})
    }

    /// [`forwarded_fault`] with more settings.
    fn forwarded_fault_with(busy: u64, threshold: f64, f: impl FnOnce(&mut Config)) -> (Ps, Multi, Vec<Gpu>) {
        let (mut m, mut gpus, _) = system(2, |c| {
            c.multi.transfw.forwarding = true;
            c.multi.transfw.forward_threshold = threshold;
            c.multi.host_mmu.walker.threads = 2;
            f(c);
        });
        let vpn = BASE >> 12;
        fault(&mut m, &mut gpus, 1, vpn, 0);
        let t = ns_to_ps(100_000.0);
        let arrive = t + ns_to_ps(150.0);
        occupy_host_walkers(&mut m, busy, arrive);
        let walked = m.host_translate_fw(0, vpn, arrive, arrive, &mut gpus);
        (walked - arrive, m, gpus)
    }

    #[test]
    fn forwarding_happens_only_above_the_threshold() {
        // 2 walkers, threshold 0.5 x 2 = 1 queued request ahead, and no walker free.
        for busy in 0..6u64 {
            let (_, m, _) = forwarded_fault(busy, 0.5);
            let s = &m.forwarding.as_ref().unwrap().stats;
            assert_eq!((s.over_threshold, s.forwarded), ((busy >= 3) as u64, (busy >= 3) as u64), "{busy} busy walks");
            // Two host-TLB misses: GPU 1's own first touch (nothing queued) and this one.
            assert_eq!((s.host_misses, s.queued_sum, s.queued_max), (2, busy.saturating_sub(2), busy.saturating_sub(2)));
        }
        // Threshold 0: whenever no walker is free (not with 0 or 1 busy walks: one of the two
        // walkers takes the request at once, nothing queued ahead is not enough); threshold 1: two queued ahead.
        for busy in 0..2 {
            let (_, m, _) = forwarded_fault(busy, 0.0);
            let s = &m.forwarding.as_ref().unwrap().stats;
            assert_eq!((s.over_threshold, s.forwarded), (0, 0), "{busy} busy walks");
        }
        assert_eq!(forwarded_fault(2, 0.0).1.forwarding.as_ref().unwrap().stats.forwarded, 1);
        assert_eq!(forwarded_fault(3, 1.0).1.forwarding.as_ref().unwrap().stats.forwarded, 0);
        assert_eq!(forwarded_fault(4, 1.0).1.forwarding.as_ref().unwrap().stats.forwarded, 1);
    }

    #[test]
    fn a_remote_hit_removes_the_queued_host_walk() {
        // 5 walks of 400 ns on 2 threads: free at +800 ns; this request would walk 800-1200 ns.
        let (lat, m, gpus) = forwarded_fault(5, 0.5);
        // Host -> GPU 1 (150 ns), its 400 ns walk, notification (150 ns): 700 ns, before +800.
        assert_eq!(lat, ns_to_ps(700.0));
        let s = &m.forwarding.as_ref().unwrap().stats;
        assert_eq!((s.remote_hits, s.walks_removed, s.false_positives), (1, 1, 0));
        assert_eq!(m.host_walker.stats.walks, 5 + 1, "no host walk for it (1 = GPU 1's own first-touch fault)");
        assert_eq!(gpus[1].xlat.gmmu.stats.walks, 1, "GPU 1 walked for GPU 0");
        // 3 walks: a walker frees at +400 ns, before the notification: the host walk runs
        // (400-800 ns) and the remote answer (700 ns) is used.
        let (lat, m, _) = forwarded_fault(3, 0.5);
        assert_eq!(lat, ns_to_ps(700.0));
        let s = &m.forwarding.as_ref().unwrap().stats;
        assert_eq!((s.walks_removed, s.remote_first), (0, 1));
    }

    #[test]
    fn a_notification_arriving_as_a_host_walker_frees_still_removes_the_walk() {
        // 200 ns messages: the remote answer is back at +200 + 400 + 200 = +800 ns, the moment the
        // second host walker frees (5 walks of 400 ns on 2 threads: 0-400-800-1200, 0-400-800).
        // The request has not started its walk then: it is removed.
        let (lat, m, _) = forwarded_fault_with(5, 0.5, |c| c.multi.host_latency_ns = 200.0);
        assert_eq!(lat, ns_to_ps(800.0));
        let s = &m.forwarding.as_ref().unwrap().stats;
        assert_eq!((s.remote_hits, s.walks_removed, s.remote_first), (1, 1, 0));
        assert_eq!(m.host_walker.stats.walks, 5 + 1, "5 dummy walks and GPU 1's own fault's");
    }

    #[test]
    fn a_removed_host_walk_fills_the_host_tlb_with_the_remote_answer() {
        let (mut m, mut gpus, vpn) = forwarding_with_the_host_tlb_entry_lost();
        let arrive = ns_to_ps(100_000.0);
        occupy_host_walkers(&mut m, 5, arrive);
        // 10 ns host-TLB miss, then GPU 1 answers in 150 + 400 + 150 ns, before a walker frees (+800 ns).
        let walked = m.host_translate_fw(0, vpn, arrive, arrive, &mut gpus);
        assert_eq!(walked - arrive, ns_to_ps(710.0));
        assert_eq!(m.forwarding.as_ref().unwrap().stats.walks_removed, 1);
        // The remote answer filled the host TLB: a later request hits it (10 ns), no walk.
        let walks = m.host_walker.stats.walks;
        let later = arrive + ns_to_ps(10_000.0);
        assert_eq!(m.host_translate(vpn, later, later), later + ns_to_ps(10.0));
        assert_eq!(m.host_walker.stats.walks, walks);
    }

    #[test]
    fn the_forwarding_table_follows_the_owner_and_never_names_the_requester() {
        let mut cfg = Config::default();
        (cfg.multi.gpus, cfg.multi.transfw.forwarding) = (3, true);
        let mut fw = Forwarding::build(&cfg).expect("forwarding on");
        let vpn = BASE >> 12;
        fw.owner_changed(vpn, crate::multi::HOST, 1);
        assert_eq!(fw.target(vpn, 0, 3), Some(1));
        assert_eq!(fw.target(vpn, 1, 3), None, "the owner's own fault is not forwarded to it");
        // The page moves to GPU 2: GPU 1's key goes, GPU 2's comes (one fingerprint in all).
        fw.owner_changed(vpn, 1, 2);
        assert!(!fw.ft.contains(ft_key(vpn, 1)));
        assert_eq!((fw.target(vpn, 0, 3), fw.ft.len()), (Some(2), 1));
    }

    #[test]
    fn an_access_counter_migration_updates_the_forwarding_table() {
        let (mut m, mut gpus, _) = system(3, |c| {
            c.multi.transfw.forwarding = true;
            c.multi.migration = MigrationPolicy::AccessCounter;
        });
        let vpn = BASE >> 12;
        fault(&mut m, &mut gpus, 0, vpn, 0);
        let t = ns_to_ps(100_000.0);
        m.migrate(vpn, 1, t, t, &mut gpus);
        let fw = m.forwarding.as_ref().unwrap();
        assert_eq!((fw.target(vpn, 2, 3), fw.ft.len()), (Some(1), 1), "GPU 1 named, GPU 0's key gone");
    }

    #[test]
    fn an_invalidation_without_a_pte_leaves_the_prt_alone() {
        // One bucket of one 1-bit fingerprint: every page's fingerprint is page `vpn`'s, so deleting
        // the fingerprint of a page GPU 0 never mapped would drop `vpn` (a false negative).
        let (mut m, mut gpus, _) = system(2, |c| {
            c.multi.transfw.prt = true;
            (c.multi.transfw.prt_entries, c.multi.transfw.prt_bucket_size, c.multi.transfw.fingerprint_bits) = (1, 1, 1);
        });
        let vpn = BASE >> 12;
        fault(&mut m, &mut gpus, 0, vpn, 0);
        let t = ns_to_ps(100_000.0);
        m.invalidation_arrives(0, vpn + 1, t, &mut gpus[0]);
        let prt = gpus[0].xlat.prt.as_ref().unwrap();
        assert!(prt.filter.contains(vpn) && prt.filter.len() == 1);
    }

    #[test]
    fn a_forwarding_table_false_positive_falls_back_to_the_host_walk() {
        let (mut m, mut gpus, _) = system(2, |c| {
            c.multi.transfw.forwarding = true;
            c.multi.host_mmu.walker.threads = 2;
            (c.multi.transfw.ft_entries, c.multi.transfw.ft_bucket_size, c.multi.transfw.fingerprint_bits) = (1, 1, 1);
        });
        let vpn = BASE >> 12;
        fault(&mut m, &mut gpus, 1, vpn, 0); // the FT's one fingerprint now matches every key
        let arrive = ns_to_ps(100_000.0);
        occupy_host_walkers(&mut m, 5, arrive);
        // A page still in host memory: forwarded to GPU 1, which does not hold it.
        let walked = m.host_translate_fw(0, vpn + 1, arrive, arrive, &mut gpus);
        assert_eq!(walked - arrive, ns_to_ps(1200.0), "the host walk answers (800-1200 ns)");
        let s = &m.forwarding.as_ref().unwrap().stats;
        assert_eq!((s.forwarded, s.false_positives, s.owner_not_ready, s.remote_hits), (1, 1, 0, 0));
    }

    fn run(extra: &[&str]) -> Metrics {
        let sets = [&["multi.gpus=4", "multi.migration=on-touch"][..], extra].concat();
        crate::world::simulate(&crate::multi::tests::resolve(&sets)).unwrap()
    }

    fn sans_wall(m: &Metrics) -> Vec<(String, f64)> {
        m.0.iter().filter(|(k, _)| !k.starts_with("sim.") || k.as_str() == "sim.events").map(|(k, v)| (k.clone(), v.as_f64())).collect()
    }

    #[test]
    fn transfw_runs_deterministically_and_is_off_by_default() {
        let base = run(&[]);
        assert!(base.get("multi.transfw.prt.lookups").is_none() && base.get("multi.transfw.fw.forwarded").is_none());
        let on = ["multi.transfw.prt=true", "multi.transfw.forwarding=true", "multi.transfw.forward_threshold=0"];
        let a = run(&on);
        assert!(a.get("multi.transfw.prt.skipped_walks").unwrap() > 0.0);
        assert!(a.get("multi.transfw.fw.host_misses").unwrap() > 0.0);
        assert_eq!(sans_wall(&a), sans_wall(&run(&on)));
        // Off-by-default settings change nothing.
        assert_eq!(sans_wall(&base), sans_wall(&run(&["multi.transfw.prt_entries=100", "multi.transfw.forward_threshold=2"])));
    }

    #[test]
    fn transfw_needs_gmmu_mode() {
        let e = crate::config::resolve(&[], &["multi.gpus=2".into(), "translation.mode=iommu".into(), "multi.transfw.prt=true".into()]);
        assert!(format!("{:?}", e.unwrap_err()).contains("translation.mode"));
    }

    /// A tie between the remote answer and a host walk already under way is not "remote first":
    /// 200 ns messages, 3 busy walks (a walker frees at +400 ns): the host walk runs 400-800 ns and
    /// GPU 1's answer is back at 200 + 400 + 200 = 800 ns too.
    #[test]
    fn a_remote_answer_tying_with_the_host_walk_is_not_remote_first() {
        let (lat, m, _) = forwarded_fault_with(3, 0.5, |c| c.multi.host_latency_ns = 200.0);
        assert_eq!(lat, ns_to_ps(800.0));
        let s = &m.forwarding.as_ref().unwrap().stats;
        assert_eq!((s.remote_hits, s.walks_removed, s.remote_first), (1, 0, 0));
    }

    /// The forwarding decision reads the host walkers' queue when the host TLB has missed (10 ns after
    /// the arrival), not at the arrival: 2 threads, 4 walks of 400 ns issued 395 ns before the arrival,
    /// so two run until +5 ns and two wait for them, then run from +5 ns. At the arrival 2 are queued;
    /// at the miss none: not over the threshold (1), although no walker is free.
    #[test]
    fn the_forwarding_threshold_is_checked_at_the_host_tlb_miss() {
        let (mut m, mut gpus, vpn) = forwarding_with_the_host_tlb_entry_lost();
        let arrive = ns_to_ps(100_000.0);
        let early = arrive - ns_to_ps(395.0);
        occupy_host_walkers(&mut m, 4, early);
        // The host walk takes a walker when the first two end, at +405 ns: answered at +805 ns.
        assert_eq!(m.host_translate_fw(0, vpn, arrive, arrive, &mut gpus) - arrive, ns_to_ps(805.0));
        // Two host-TLB misses: GPU 1's first touch (nothing queued) and this one.
        let s = &m.forwarding.as_ref().unwrap().stats;
        assert_eq!((s.host_misses, s.queued_max, s.over_threshold, s.forwarded), (2, 0, 0, 0));
    }

    /// An FT false positive can name a GPU that maps the page remotely (first-touch): its walk finds a
    /// valid PTE, but that GPU does not own the page, so the answer is discarded and the host walk
    /// answers (5 busy walks on 2 threads: 800-1200 ns).
    #[test]
    fn a_forwarded_walk_at_a_gpu_mapping_the_page_remotely_is_discarded() {
        let (mut m, mut gpus, _) = system(3, |c| {
            c.multi.migration = MigrationPolicy::FirstTouch;
            c.multi.transfw.forwarding = true;
            c.multi.host_mmu.walker.threads = 2;
            (c.multi.transfw.ft_entries, c.multi.transfw.ft_bucket_size, c.multi.transfw.fingerprint_bits) = (1, 1, 1);
        });
        let first = BASE >> 12;
        fault(&mut m, &mut gpus, 0, first, 0); // the FT's one fingerprint now matches every key
                                               // A page for which GPU 2's fault picks GPU 1 of the two GPUs the FT names (0 and 1).
        let fw = m.forwarding.as_ref().unwrap();
        let vpn = (first + 1..first + 256).find(|&v| fw.target(v, 2, 3) == Some(1)).expect("a page hashed to GPU 1");
        fault(&mut m, &mut gpus, 0, vpn, 1_000_000); // placed on GPU 0
        fault(&mut m, &mut gpus, 1, vpn, 2_000_000); // GPU 1 maps it remotely
        assert!(gpus[1].xlat.space.residency.is_resident(vpn));
        let arrive = ns_to_ps(10_000_000.0);
        occupy_host_walkers(&mut m, 5, arrive);
        let walked = m.host_translate_fw(2, vpn, arrive, arrive, &mut gpus);
        assert_eq!(walked - arrive, ns_to_ps(1200.0));
        let s = &m.forwarding.as_ref().unwrap().stats;
        assert_eq!((s.forwarded, s.false_positives, s.remote_hits), (1, 1, 0));
    }

    /// A full FT (one 1-bit fingerprint, which matches every key) deletes only keys it took: page 1's
    /// key fills it; page 2's is refused (1). A store of GPU 0 to its own replicated page 2 changes
    /// no owner: the FT is not touched (still 1). GPU 1's store moves page 2 there: GPU 0's refused
    /// key is not deleted (deleting it would delete page 1's fingerprint), so GPU 1's is refused too (2).
    #[test]
    fn a_full_forwarding_table_deletes_only_the_keys_it_took() {
        let (mut m, mut gpus, _) = system(2, |c| {
            c.multi.migration = MigrationPolicy::ReadReplication;
            c.multi.transfw.forwarding = true;
            (c.multi.transfw.ft_entries, c.multi.transfw.ft_bucket_size, c.multi.transfw.fingerprint_bits) = (1, 1, 1);
        });
        let store = |m: &mut Multi, gpus: &mut [Gpu], g: usize, vpn: u64, t: Ps| {
            m.fault(g, vpn, true, t, t, gpus).expect("not a duplicate");
            for (at, x) in std::mem::take(&mut m.arrivals) {
                m.invalidation_arrives((x & 31) as usize, x >> 5, at, &mut gpus[(x & 31) as usize]);
            }
            m.page_ready(g, vpn, &mut gpus[g]);
        };
        let vpn = BASE >> 12;
        let failures = |m: &Multi| (m.forwarding.as_ref().unwrap().stats.insert_failures, m.forwarding.as_ref().unwrap().ft.len());
        fault(&mut m, &mut gpus, 0, vpn, 0);
        fault(&mut m, &mut gpus, 0, vpn + 1, 1_000_000);
        assert_eq!(failures(&m), (1, 1));
        fault(&mut m, &mut gpus, 1, vpn + 1, 2_000_000); // a replica on GPU 1
        store(&mut m, &mut gpus, 0, vpn + 1, 3_000_000);
        assert_eq!((m.dir.page(vpn + 1).owner, m.stats.write_invalidations), (0, 1));
        assert_eq!(failures(&m), (1, 1), "no owner change, no FT update");
        store(&mut m, &mut gpus, 1, vpn + 1, 4_000_000);
        assert_eq!(m.dir.page(vpn + 1).owner, 1);
        assert_eq!(failures(&m), (2, 1));
    }

    /// Several GPUs the FT names for a page: one chosen by a hash of the page, so over 64 pages
    /// each GPU 1 and 2 both hold (as the FT says) both are chosen, and never the requester.
    #[test]
    fn several_forwarding_table_matches_are_spread_over_the_pages() {
        let mut cfg = Config::default();
        (cfg.multi.gpus, cfg.multi.transfw.forwarding) = (3, true);
        let mut fw = Forwarding::build(&cfg).expect("forwarding on");
        let pages = (BASE >> 12)..(BASE >> 12) + 64;
        for v in pages.clone() {
            fw.owner_changed(v, crate::multi::HOST, 1);
            fw.owner_changed(v, crate::multi::HOST, 2);
        }
        let picks: Vec<usize> = pages.map(|v| fw.target(v, 0, 3).expect("named")).collect();
        assert!(picks.contains(&1) && picks.contains(&2), "{picks:?}");
    }

    /// `multi.transfw.*` by hand: the host queue's mean over host-TLB misses (10 requests queued over
    /// 4 misses: 2.5), and each PRT count summed over the GPUs (lookups 5 + 7, untrusted 2 + 1).
    #[test]
    fn the_export_averages_the_host_queue_and_sums_the_prts() {
        let (m, mut gpus, _) = system(2, |c| {
            c.multi.transfw.prt = true;
            c.multi.transfw.forwarding = true;
        });
        let mut fw = m.forwarding.clone().expect("forwarding on");
        (fw.stats.host_misses, fw.stats.queued_sum) = (4, 10);
        for (g, (lookups, untrusted)) in gpus.iter_mut().zip([(5, 2), (7, 1)]) {
            let s = &mut g.xlat.prt.as_mut().expect("a PRT").stats;
            (s.lookups, s.untrusted) = (lookups, untrusted);
        }
        let mut x = Metrics::default();
        export(Some(&fw), &mut x, &gpus);
        assert_eq!(x.get("multi.transfw.fw.host_queue_mean"), Some(2.5));
        assert_eq!((x.get("multi.transfw.prt.lookups"), x.get("multi.transfw.prt.untrusted")), (Some(12.0), Some(3.0)));
    }
}
