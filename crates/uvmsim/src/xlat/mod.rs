//! Address translation: per-SM (or per-µTLB) L1 TLBs, a shared L2 TLB, and
//! behind them either the GMMU's walkers (discrete GPU) or the host IOMMU
//! reached over ATS (APU), with ATS translation prefetch.
//!
//! How it works: [`Translator::translate`] is called when a warp's memory
//! instruction issues, once per distinct page, and returns when the
//! translation is ready and the page's physical address. Requests arrive in
//! simulated-time order, so each structure computes its part directly: TLB
//! entries carry their fill time (later lookups before it are MSHR merges),
//! MSHRs and walker queues are [`Outstanding`] sets, walkers are a
//! first-free-thread pool. Control protocol for shootdowns: `invalidate`, `flush`.

pub mod cuckoo;
pub mod irmb;
mod l1filter;
pub mod least;
mod outstanding;
pub mod shootdown;
pub mod space;
mod tlb;
mod walker;

pub use outstanding::Outstanding;
pub use space::{AddressSpace, Region};
pub use tlb::{export_stats as export_tlb_stats, Lookup, Tlb, TlbStats};
pub use walker::{WalkRecord, WalkSampler, Walker, WalkerStats};

use crate::config::{Config, TranslationMode, WalkerConfig};
use crate::mem::{Dram, Timeline};
use crate::sim::{ns_to_ps, Clock, Ps};
use crate::stats::Metrics;
use rustc_hash::FxHashSet;
use space::{leaf_level, Mapped};

/// The outcome of a translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Xlat {
    /// Ready at this time: (time, physical address of the page, page size).
    Ready(Ps, u64, u64),
    /// A far fault, raised at this time.
    Fault(Ps),
    /// Outside every allocation.
    Unmapped,
}

/// The TLB key of the page holding `va` in region `r`: page number plus size class.
#[inline]
fn key(va: u64, r: &Region) -> u64 {
    (va >> r.shift) | ((r.class as u64) << 58)
}

/// The host IOMMU of an APU / ATS system.
#[derive(Debug, Clone)]
pub struct Iommu {
    tlb: Option<Tlb>,
    pub walker: Walker,
    link: Ps,
    /// Serialisation of ATS messages (`iommu.link_msg_ns` > 0): [to the IOMMU, back to the
    /// GPUs], each a channel of 1 byte per ps on which a message reserves `msg` bytes.
    lanes: Option<Box<[Timeline; 2]>>,
    msg: Ps,
    prefetch: u64,
    pub ats_requests: u64,
    pub ats_prefetched: u64,
    /// Least-TLB (multi-GPU ATS, `multi.least_tlb`): victim IOMMU TLB and local TLB tracker.
    pub least: Option<least::LeastTlb>,
    /// Multi-application mode: per requesting GPU, [ATS requests, IOMMU-TLB hits (with merges
    /// into a pending miss), Least-TLB remote hits that answered]. Empty otherwise.
    pub per_gpu: Vec<[u64; 3]>,
}

/// Outstanding misses of the TLB in front of a walker pool (the IOMMU's, the host MMU's): the walks
/// the pool admits, its threads plus its queue. Unbounded with `multi.oracle.infinite_walkers`, whose
/// walks never wait for a thread or a queue slot: before 2026-11-30 these slots stayed bounded under
/// the oracle, and kaveri-apu's misses still waited for them (1,857 `iommu.tlb.mshr_full_waits` of
/// 2,304 misses, where a pool of 4,096 threads had none).
pub fn walk_slots(cfg: &Config, w: &WalkerConfig) -> usize {
    if cfg.multi.oracle.infinite_walkers {
        usize::MAX
    } else {
        w.threads as usize + w.queue_depth as usize
    }
}

impl Iommu {
    /// When an ATS message entering link direction `dir` (0 = to the IOMMU) at `t` is at the other end.
    #[inline]
    fn cross(&mut self, dir: usize, t: Ps, now: Ps) -> Ps {
        match self.lanes.as_mut() {
            None => t + self.link,
            // Behind the messages that hold the direction; an earlier arrival processed later still finds its slot.
            Some(l) => l[dir].reserve(t, self.msg, now.min(t)) + self.link,
        }
    }

    /// Serve an ATS request sent from GPU `g` at `t`; returns when the response is back at the GPU.
    fn serve(&mut self, g: usize, va: u64, r: &Region, t: Ps, now: Ps, dram: &mut Dram) -> Ps {
        self.ats_requests += 1;
        let arrive = self.cross(0, t, now);
        let k = key(va, r);
        if let Some(c) = self.per_gpu.get_mut(g) {
            c[0] += 1;
        }
        if self.least.is_some() {
            let ready = self.serve_least(g, va, k, r, arrive, now, dram);
            return self.cross(1, ready, now);
        }
        let ready = match self.tlb.as_mut().map(|tlb| tlb.lookup(k, arrive, now)) {
            Some(Lookup::Done(d, _)) => {
                if let Some(c) = self.per_gpu.get_mut(g) {
                    c[1] += 1;
                }
                d
            }
            Some(Lookup::Miss(at)) => {
                let end = self.walker.walk(va, leaf_level(r.class), at, now, dram);
                if let Some(tlb) = self.tlb.as_mut() {
                    tlb.fill_miss(k, 0, arrive, end);
                }
                end
            }
            None => self.walker.walk(va, leaf_level(r.class), arrive, now, dram),
        };
        self.cross(1, ready, now)
    }

    /// Least-TLB (Algorithm 1): an IOMMU-TLB hit moves the entry to the requester's
    /// L2 TLB; a miss walks without filling the IOMMU TLB, racing a
    /// remote L2 lookup the tracker sends. Returns when the answer is ready at the IOMMU.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn serve_least(&mut self, g: usize, va: u64, k: u64, r: &Region, arrive: Ps, now: Ps, dram: &mut Dram) -> Ps {
        let (Some(tlb), Some(lt)) = (self.tlb.as_mut(), self.least.as_mut()) else { unreachable!("validated") };
        match tlb.lookup(k, arrive, now) {
            // A hit moves the entry to the requester's L2 TLB: it leaves this TLB when the L2 takes it (`LeastTlb::l2_filled`).
            Lookup::Done(d, _) => {
                if let Some(c) = self.per_gpu.get_mut(g) {
                    c[1] += 1;
                }
                d
            }
            Lookup::Miss(at) => {
                // A walk of this key in flight answers this request too (the IOMMU's
                // pending-request table, §3.2.1; the baseline merges in its TLB's MSHRs).
                if let Some(end) = lt.in_flight(k, arrive) {
                    tlb.complete_miss(arrive, end);
                    // Answered at the IOMMU as the baseline's merge into its TLB's MSHR is (`Done`): counted alike.
                    if let Some(c) = self.per_gpu.get_mut(g) {
                        c[1] += 1;
                    }
                    return end;
                }
                let remote_before = lt.stats.remote_first;
                // The tracker is searched in parallel with the IOMMU TLB, from the arrival.
                let end = match lt.remote(g, k, arrive) {
                    // The remote hit is back before a walker takes the request: it leaves the queue unwalked.
                    Some(rd) if rd <= self.walker.start_at(at) => {
                        lt.stats.remote_first += 1;
                        lt.stats.walks_avoided += 1;
                        rd
                    }
                    // A walk under way runs to its end; the earlier answer is used.
                    Some(rd) => {
                        let walked = self.walker.walk(va, leaf_level(r.class), at, now, dram);
                        lt.stats.remote_first += (rd < walked) as u64;
                        rd.min(walked)
                    }
                    None => self.walker.walk(va, leaf_level(r.class), at, now, dram),
                };
                lt.walked(k, arrive, end);
                tlb.complete_miss(arrive, end);
                if let Some(c) = self.per_gpu.get_mut(g) {
                    c[2] += (lt.stats.remote_first > remote_before) as u64;
                }
                end
            }
        }
    }

    /// Drop the IOMMU TLB's translation of the 4 KiB page `vpn` (its mapping changed).
    pub fn invalidate_page(&mut self, vpn: u64) -> bool {
        let gone = self.tlb.as_mut().is_some_and(|t| t.invalidate(vpn));
        if let (true, Some(lt)) = (gone, self.least.as_mut()) {
            lt.iommu_dropped(vpn);
        }
        gone
    }

    /// Least-TLB spilling: apply the queued changes to the GPUs' L2 TLBs (`l2s[g]` is GPU `g`'s) at `t`.
    pub fn apply_spills(&mut self, l2s: &mut [&mut Tlb], t: Ps) {
        if let (Some(lt), Some(tlb)) = (self.least.as_mut(), self.tlb.as_mut()) {
            if !lt.ops.is_empty() {
                lt.apply(l2s, t, tlb);
            }
        }
    }
}

/// Translation for one GPU.
#[derive(Debug, Clone)]
pub struct Translator {
    pub l1: Vec<Tlb>,
    sms_per_l1: usize,
    pub l2: Option<Tlb>,
    /// `gpu.l2tlb.fill_return_cycles` in ps: a translation the L2 TLB missed reaches the L1 TLB this much later.
    l2_return: Ps,
    pub gmmu: Walker,
    pub iommu: Option<Box<Iommu>>,
    pub space: AddressSpace,
    /// This GPU's index in a multi-GPU system (Least-TLB's tracker partition).
    pub gpu: usize,
    /// IDYLL's lazy PTE invalidation (`multi.idyll.lazy`): PTE invalidations not yet written to the page table.
    pub irmb: Option<Box<irmb::Irmb>>,
    /// Trans-FW's pending request table (`multi.transfw.prt`): the pages this GPU's table maps.
    pub prt: Option<Box<crate::multi::transfw::Prt>>,
    /// Multi-GPU: pages whose far fault from this GPU awaits the host's answer. A later L2-TLB
    /// miss on one is held with it in the L2 TLB's MSHR, not walked (seed multi-gpu §5.2.3:
    /// "before a new mapping is received, there won't be any subsequent requests to the same page
    /// being sent to GMMU for page table walk ... held at the L2 TLB MSHR"); in ATS mode it sends
    /// no second ATS request either (since 2026-11-29; the seed's MGPUSim L2 TLB holds a page's
    /// requests until the MMU answers, whichever translation path). `Multi::page_ready` clears.
    pub far_pending: Option<FxHashSet<u64>>,
    /// L2-TLB misses held behind an outstanding far fault of their page (no walk).
    pub held_misses: u64,
    /// `translation.managed_large_ptes`: fully resident managed regions map with 64 KiB / 2 MiB PTEs.
    large_ptes: bool,
    /// The keys the L1 TLBs may hold: a page invalidation skips them when none can (`l1filter`).
    l1_filter: l1filter::L1Filter,
}

impl Translator {
    /// The translation of GPU `gpu` of a multi-GPU system.
    pub fn with_gpu(cfg: &Config, gpu: usize) -> Translator {
        Translator { gpu, prt: crate::multi::transfw::Prt::build(cfg, gpu), ..Translator::new(cfg) }
    }

    pub fn new(cfg: &Config) -> Translator {
        let g = &cfg.gpu;
        let clock = Clock::from_mhz(g.core_mhz);
        let n_l1 = g.sms.div_ceil(g.sms_per_l1tlb) as usize;
        let levels = cfg.translation.levels;
        // Boxed: in the multi-GPU model the one IOMMU is lent to each GPU as it runs a warp, a move per
        // warp event (inline, the move copied the whole struct: 10% of a multi-GPU ATS run).
        let iommu = (cfg.translation.mode == TranslationMode::Iommu).then(|| {
            let c = &cfg.iommu;
            Box::new(Iommu {
                tlb: (c.tlb_entries > 0).then(|| {
                    Tlb::with(c.tlb_entries as usize, c.tlb_ways as usize, ns_to_ps(c.tlb_latency_ns), walk_slots(cfg, &c.walker))
                }),
                walker: Walker::new(&c.walker, levels),
                link: ns_to_ps(c.link_latency_ns),
                lanes: (ns_to_ps(c.link_msg_ns) > 0).then(|| {
                    let msg = ns_to_ps(c.link_msg_ns);
                    Box::new([Timeline::new(1000.0, msg), Timeline::new(1000.0, msg)])
                }),
                msg: ns_to_ps(c.link_msg_ns),
                prefetch: c.ats_prefetch_pages as u64,
                ats_requests: 0,
                ats_prefetched: 0,
                least: (cfg.multi.least_tlb.enabled && cfg.multi.active()).then(|| {
                    let l = &cfg.multi.least_tlb;
                    let tracker = l.tracker.then_some((
                        l.tracker_entries as usize,
                        l.tracker_bucket_size as usize,
                        l.tracker_fingerprint_bits,
                        crate::sim::mix64(cfg.sim.seed ^ 0x1ea5_7f1b),
                    ));
                    let lt = least::LeastTlb::new(
                        cfg.multi.gpus as usize,
                        tracker,
                        l.remote_latency_ns,
                        clock.cycles(g.l2tlb.latency_cycles as u64),
                    );
                    if l.spill {
                        lt.with_spill(l.spill_chances)
                    } else {
                        lt
                    }
                }),
                per_gpu: if cfg.multi.apps.is_empty() { vec![] } else { vec![[0; 3]; cfg.multi.gpus as usize] },
            })
        });
        let mut x = Translator {
            l1: (0..n_l1).map(|_| Tlb::new(&g.l1tlb, clock).expect("L1 TLB entries validated > 0")).collect(),
            sms_per_l1: g.sms_per_l1tlb as usize,
            l2_return: if g.l2tlb.entries > 0 { clock.cycles(g.l2tlb.fill_return_cycles as u64) } else { 0 },
            l2: Tlb::new(&g.l2tlb, clock),
            gmmu: Walker::new(&cfg.gmmu.walker, levels),
            iommu,
            space: AddressSpace::default(),
            gpu: 0,
            irmb: (cfg.multi.idyll.lazy && cfg.multi.active())
                .then(|| Box::new(irmb::Irmb::new(cfg.multi.idyll.irmb_bases as usize, cfg.multi.idyll.irmb_offsets as usize))),
            prt: crate::multi::transfw::Prt::build(cfg, 0),
            far_pending: cfg.multi.active().then(FxHashSet::default),
            held_misses: 0,
            large_ptes: cfg.translation.managed_large_ptes,
            l1_filter: l1filter::L1Filter::new(n_l1 * g.l1tlb.entries as usize),
        };
        let t = &cfg.translation;
        if t.walk_records_every > 0 {
            let sampler = || Some(Box::new(WalkSampler::new(t.walk_records_every, t.walk_records_max)));
            x.gmmu.records = sampler();
            if let Some(io) = x.iommu.as_mut() {
                io.walker.records = sampler();
            }
        }
        x
    }

    /// The sampled walk records of this GPU's walkers (`translation.walk_records_every`), labelled.
    pub fn take_walk_records(&mut self, gpu: u32) -> Vec<WalkRecord> {
        let mut rows = vec![];
        let walkers = [("gmmu", Some(&mut self.gmmu)), ("iommu", self.iommu.as_mut().map(|io| &mut io.walker))];
        for (name, w) in walkers {
            if let Some(r) = w.and_then(|w| w.records.as_mut()) {
                rows.extend(std::mem::take(&mut r.rows).into_iter().map(|row| WalkRecord { walker: name, gpu, ..row }));
            }
        }
        rows
    }

    /// Hits so far in SM `sm`'s L1 TLB (a change across [`Self::translate`] tells a hit).
    #[inline]
    pub fn l1_hits(&self, sm: usize) -> u64 {
        self.l1[sm / self.sms_per_l1].stats.hits
    }

    /// Translate `va` for SM `sm`, requested at `t`: when it is ready, the
    /// page's physical address and size; a far fault when the walk finds a
    /// managed page not resident on the GPU (nothing is filled); `Unmapped`
    /// outside every allocation.
    #[inline(always)]
    pub fn translate(&mut self, sm: usize, va: u64, t: Ps, now: Ps, dram: &mut Dram) -> Xlat {
        let Some(&r) = self.space.lookup(va) else { return Xlat::Unmapped };
        let r = if self.large_ptes && r.managed { self.space.residency.large_pte_region(&r, va) } else { r };
        let page = 1u64 << r.shift;
        let pa = r.pa + ((va - r.va) & !(page - 1));
        let k = key(va, &r);
        let l1 = &mut self.l1[sm / self.sms_per_l1];
        // A hit keeps the entry's remote tag (a managed page mapped in host memory).
        let at = match l1.lookup(k, t, now) {
            Lookup::Done(d, epa) => {
                if r.managed && self.space.residency.stamp_hits {
                    self.space.residency.hit(va >> 12);
                }
                return Xlat::Ready(d, pa | (epa & space::REMOTE_PA), page);
            }
            Lookup::Miss(at) => at,
        };
        let (at2, from_l2) = match self.l2.as_mut().map(|l2| l2.lookup(k, at, now)) {
            Some(Lookup::Done(d, epa)) => {
                if r.managed && self.space.residency.stamp_hits {
                    self.space.residency.hit(va >> 12);
                }
                let pa = pa | (epa & space::REMOTE_PA);
                self.l1_filter.note(k, sm / self.sms_per_l1, &self.l1);
                let l1 = &mut self.l1[sm / self.sms_per_l1];
                let d = l1.fill_time(d, t);
                l1.fill_miss(k, pa, t, d);
                return Xlat::Ready(d, pa, page);
            }
            Some(Lookup::Miss(at2)) => (at2, true),
            None => (at, false),
        };
        let mut done = self.miss(sm, va, &r, at2, now, dram);
        let mut pa = pa;
        if r.managed {
            match self.space.residency.access_mapped(va >> 12) {
                Mapped::No => {
                    // Already pending: this miss was held in the MSHR (`miss`), with no walk.
                    let held = self.far_pending.as_mut().is_some_and(|p| !p.insert(va >> 12));
                    // Least-TLB: the L2 TLB does not take a translation that faults, so the IOMMU
                    // TLB keeps it (as the mostly-inclusive baseline's walk fill does). With
                    // `link_msg_ns` the time is the response's end of serialisation, not of the walk.
                    if let (false, Some(Iommu { least: Some(lt), tlb: Some(tlb), link, .. })) = (held, self.iommu.as_deref_mut()) {
                        lt.fault_fill(self.gpu, k, done - *link, tlb);
                    }
                    // The misses held their MSHRs until the walk's answer (the fault), like any miss.
                    if let (true, Some(l2)) = (from_l2, self.l2.as_mut()) {
                        l2.fault_miss(done);
                    }
                    self.l1[sm / self.sms_per_l1].fault_miss(done + self.l2_return);
                    return Xlat::Fault(done);
                }
                Mapped::Local => {}
                // Host memory over the link: the TLB entry carries the tag, so hits see it too.
                Mapped::Remote => pa |= space::REMOTE_PA,
            }
        }
        if from_l2 {
            if let Some(l2) = self.l2.as_mut() {
                done = l2.fill_time(done, at);
                let evicted = l2.fill_miss(k, pa, at, done);
                if let Some(Iommu { least: Some(lt), tlb: Some(tlb), .. }) = self.iommu.as_deref_mut() {
                    lt.l2_filled(self.gpu, k, evicted, at, tlb);
                }
            }
        }
        self.l1_filter.note(k, sm / self.sms_per_l1, &self.l1);
        let l1 = &mut self.l1[sm / self.sms_per_l1];
        let done = l1.fill_time(done + self.l2_return, t);
        l1.fill_miss(k, pa, t, done);
        Xlat::Ready(done, pa, page)
    }

    /// A µTLB retries a held far-faulted access to `va` at `t` (after the driver's replay): the
    /// L2 TLB misses again and the page table is walked (competing with demand walks); returns
    /// when the walk is done. The caller knows the page is still unmapped.
    pub fn retry_walk(&mut self, sm: usize, va: u64, t: Ps, now: Ps, dram: &mut Dram) -> Ps {
        let Some(&r) = self.space.lookup(va) else { return t };
        let r = if self.large_ptes && r.managed { self.space.residency.large_pte_region(&r, va) } else { r };
        let k = key(va, &r);
        let (at, from_l2) = match self.l2.as_mut().map(|l2| l2.lookup(k, t, now)) {
            Some(Lookup::Done(d, _)) => return d,
            Some(Lookup::Miss(at)) => (at, true),
            None => (t, false),
        };
        let done = self.miss(sm, va, &r, at, now, dram);
        // The miss holds its MSHR until the walk's answer (a fault again), as a demand miss does.
        if let (true, Some(l2)) = (from_l2, self.l2.as_mut()) {
            l2.fault_miss(done);
        }
        done
    }

    /// Shoot down the GPU's translations of the 4 KiB pages of VA blocks
    /// `blocks` (2 MiB, evicted): every L1 and L2 TLB entry of those pages
    /// goes (the page-walk caches hold upper levels, which stay valid).
    pub fn shootdown(&mut self, blocks: &[u64]) {
        if blocks.is_empty() {
            return;
        }
        // A key is a page number with its size class above bit 58 (see `key`): a block's 4 KiB
        // (class 0), 64 KiB (class 1, `managed_large_ptes`) and 2 MiB (class 2) entries go.
        // (Device allocations' large pages lie in other VA blocks: never matched.)
        let hit = |k: u64| {
            let n = k & ((1 << 58) - 1);
            match k >> 58 {
                0 => blocks.contains(&(n / space::BLOCK_PAGES)),
                1 => blocks.contains(&(n / 32)),
                2 => blocks.contains(&n),
                _ => false,
            }
        };
        for t in self.l1.iter_mut().chain(self.l2.as_mut()) {
            t.invalidate_where(hit);
        }
    }

    /// A host shootdown of the translation of `va` (one entry: every GPU TLB and
    /// the IOMMU TLB drop it); returns the GPU TLB entries removed.
    pub fn shootdown_page(&mut self, va: u64) -> usize {
        let Some(&r) = self.space.lookup(va) else { return 0 };
        let k = key(va, &r);
        if let Some(t) = self.iommu.as_mut().and_then(|io| io.tlb.as_mut()) {
            t.invalidate(k);
        }
        self.invalidate_l1s(k) + self.l2.as_mut().map_or(0, |t| t.invalidate(k) as usize)
    }

    /// A host shootdown of every translation (flush all); returns the GPU TLB entries removed.
    pub fn flush_all(&mut self) -> usize {
        if let Some(t) = self.iommu.as_mut().and_then(|io| io.tlb.as_mut()) {
            t.flush();
        }
        self.l1.iter_mut().chain(self.l2.as_mut()).map(|t| t.flush()).sum()
    }

    /// Shoot down this GPU's translations of the 4 KiB page `vpn` (every L1 and
    /// the L2 TLB; a 4 KiB page's key is its page number, see `key`). True if any TLB held it.
    pub fn invalidate_page(&mut self, vpn: u64) -> bool {
        // A large PTE holding the page is split: its entry goes.
        let keys = [vpn, (vpn >> 4) | 1 << 58, (vpn >> 9) | 2 << 58];
        let keys = &keys[..if self.large_ptes { 3 } else { 1 }];
        let mut had = false;
        for &k in keys {
            had |= self.invalidate_l1s(k) > 0;
            if let Some(l2) = self.l2.as_mut() {
                had |= l2.invalidate(k);
            }
        }
        had
    }

    /// Drop `k` from every L1 TLB (its pending fills too); how many held it. Only the L1 TLBs the
    /// filter says may hold it are searched.
    #[inline]
    fn invalidate_l1s(&mut self, k: u64) -> usize {
        let mask = self.l1_filter.holders(k);
        if mask == 0 {
            debug_assert!(self.l1.iter().all(|t| t.keys().all(|x| x != k)), "the L1 filter lost key {k:#x}");
            return 0;
        }
        let n = self.l1.len();
        let mut dropped = 0;
        for i in l1filter::L1Filter::members(mask, n) {
            dropped += self.l1[i].invalidate(k) as usize;
        }
        debug_assert!(
            self.l1.iter().enumerate().all(|(i, t)| l1filter::L1Filter::covers(mask, i) || t.keys().all(|x| x != k)),
            "the L1 filter lost key {k:#x} in an L1 TLB outside its holders"
        );
        dropped
    }

    /// The µTLB (L1 TLB) an SM uses.
    pub fn utlb_of(&self, sm: usize) -> usize {
        sm / self.sms_per_l1
    }

    /// A miss in every GPU TLB: walk locally or ask the IOMMU.
    fn miss(&mut self, sm: usize, va: u64, r: &Region, t: Ps, now: Ps, dram: &mut Dram) -> Ps {
        // A page whose far fault is outstanding: the miss waits with it in the L2 TLB's MSHR
        // (the answer wakes it); raised here as a duplicate fault, with no walk or ATS request.
        if self.far_pending.as_ref().is_some_and(|p| p.contains(&(va >> 12))) {
            self.held_misses += 1;
            return t;
        }
        let Some(io) = self.iommu.as_mut() else {
            // IDYLL: a pending invalidation in the IRMB (looked up with the L2 TLB) means the PTE
            // is stale: no walk, the far fault is raised at once (the page is not resident).
            if let Some(b) = self.irmb.as_mut() {
                if b.lookup(va >> 12) {
                    b.stats.hits += 1;
                    return t;
                }
            }
            // Trans-FW: a page the PRT rules out is not in the local table: the fault goes to the host at once.
            if let (Some(p), true) = (self.prt.as_mut(), r.managed) {
                if p.skip(va >> 12, self.space.residency.is_resident(va >> 12)) {
                    return t;
                }
            }
            return self.gmmu.walk(va, leaf_level(r.class), t, now, dram);
        };
        let done = io.serve(self.gpu, va, r, t, now, dram);
        if io.prefetch > 1 {
            // ATS returns the aligned group of contiguous translations holding the demanded
            // page (its PTEs share a cache line); they fill the GPU's last-level TLB.
            let n = io.prefetch;
            let vpn = va >> r.shift;
            let first = vpn & !(n - 1);
            for p in first..first + n {
                let pva = p << r.shift;
                // Only pages with a valid mapping come back (a managed page must be GPU-resident).
                if p == vpn || pva < r.va || pva >= r.end || (r.managed && !self.space.residency.is_resident(pva >> 12)) {
                    continue;
                }
                let ppa = r.pa + (pva - r.va);
                let last = match self.l2.as_mut() {
                    Some(l2) => l2,
                    None => {
                        self.l1_filter.note(key(pva, r), sm / self.sms_per_l1, &self.l1);
                        &mut self.l1[sm / self.sms_per_l1]
                    }
                };
                if last.fill_prefetch(key(pva, r), ppa, done) {
                    io.ats_prefetched += 1;
                }
            }
        }
        done
    }

    /// Export `{gpu}.l1tlb`, `{gpu}.l2tlb` and the walkers' metrics; `span` (ps) is the run's length.
    pub fn export(&self, m: &mut Metrics, gpu: &str, span: Ps) {
        let (l1, waits) = tlb::sum(&self.l1);
        tlb::export_stats(&l1, waits, m, &format!("{gpu}.l1tlb"));
        match &self.l2 {
            Some(l2) => l2.export(m, &format!("{gpu}.l2tlb")),
            None => tlb::export_stats(&TlbStats::default(), 0, m, &format!("{gpu}.l2tlb")),
        }
        match &self.iommu {
            None => self.gmmu.export(m, &format!("{gpu}.walker"), span),
            Some(io) => {
                m.int("iommu.ats_requests", io.ats_requests);
                m.int("iommu.ats_prefetched", io.ats_prefetched);
                match &io.tlb {
                    Some(t) => t.export(m, "iommu.tlb"),
                    None => tlb::export_stats(&TlbStats::default(), 0, m, "iommu.tlb"),
                }
                io.walker.export(m, "iommu.walker", span);
                if let Some(lt) = &io.least {
                    lt.export(m);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Translator, Xlat};
    use crate::config::{Config, TranslationMode};
    use crate::mem::Dram;
    use crate::sim::PS_PER_NS;
    use crate::workload::Buffer;

    const BASE: u64 = 1 << 30;
    const N: u64 = 24;

    /// 24 SMs with their own L1 TLB (1 ns) miss 24 pages in the shared L2 TLB (10 ns) at
    /// t = 0: the ATS requests leave at 11 ns, cross a 100 ns link, walk 100 ns (4 x 25,
    /// 64 walkers, no IOMMU TLB) and come back over the link; `iommu.link_msg_ns` = `msg`.
    fn ready_ns(msg: f64) -> Vec<u64> {
        let mut c = Config::default();
        c.translation.mode = TranslationMode::Iommu;
        (c.gpu.sms, c.gpu.sms_per_l1tlb, c.gpu.core_mhz) = (N as u32, 1, 1000.0);
        (c.gpu.l1tlb.entries, c.gpu.l1tlb.ways, c.gpu.l1tlb.latency_cycles) = (4, 4, 1);
        (c.gpu.l2tlb.entries, c.gpu.l2tlb.ways, c.gpu.l2tlb.latency_cycles, c.gpu.l2tlb.mshrs) = (64, 64, 10, 64);
        (c.iommu.link_latency_ns, c.iommu.link_msg_ns, c.iommu.tlb_entries) = (100.0, msg, 0);
        let w = &mut c.iommu.walker;
        (w.threads, w.level_latency_ns, w.pte_from_dram, w.pwc_entries) = (64, 25.0, false, 0);
        let mut x = Translator::new(&c);
        x.space.map(&Buffer { base: BASE, bytes: 1 << 20, page_bytes: 4096, managed: false });
        let mut dram = Dram::new(&c.gpu.dram, c.gpu.line_bytes);
        (0..N)
            .map(|p| match x.translate(p as usize, BASE + p * 4096, 0, 0, &mut dram) {
                Xlat::Ready(d, _, _) => d,
                r => panic!("{r:?}"),
            })
            .collect()
    }

    /// A miss whose walk finds a managed page not resident (a far fault) holds its L1 and L2 TLB MSHRs
    /// until the walk's answer, as a miss that fills does: with one MSHR per level, a second SM's miss to
    /// another page behind it waits for the first walk. Before, a faulting miss freed its MSHR at once
    /// (titan-v managed stream: 0 L2 MSHR waits, 158,428 after).
    #[test]
    fn a_faulting_miss_holds_its_mshrs_until_the_walk_answers() {
        let mut c = Config::default();
        (c.gpu.sms, c.gpu.sms_per_l1tlb) = (2, 2);
        (c.gpu.l1tlb.mshrs, c.gpu.l2tlb.mshrs) = (1, 1);
        let mut x = Translator::new(&c);
        x.space.map(&Buffer { base: BASE, bytes: 1 << 20, page_bytes: 4096, managed: true });
        let mut dram = Dram::new(&c.gpu.dram, c.gpu.line_bytes);
        let Xlat::Fault(first) = x.translate(0, BASE, 0, 0, &mut dram) else { panic!("not a fault") };
        let walk_ns = first / PS_PER_NS;
        assert!(walk_ns > 50, "{walk_ns} ns");
        // The second miss is admitted when the first walk answers, so it walks after it (its upper levels
        // then hit the page-walk cache: a shorter walk).
        let Xlat::Fault(second) = x.translate(1, BASE + 4096, 0, 0, &mut dram) else { panic!("not a fault") };
        assert!(second > first, "{first} then {second}");
        let mut m = crate::stats::Metrics::default();
        x.l1[0].export(&mut m, "l1");
        assert_eq!(m.get("l1.mshr_full_waits"), Some(1.0));
        // Two MSHRs per level: both walk at once.
        (c.gpu.l1tlb.mshrs, c.gpu.l2tlb.mshrs) = (2, 2);
        let mut x = Translator::new(&c);
        x.space.map(&Buffer { base: BASE, bytes: 1 << 20, page_bytes: 4096, managed: true });
        let mut dram = Dram::new(&c.gpu.dram, c.gpu.line_bytes);
        let Xlat::Fault(a) = x.translate(0, BASE, 0, 0, &mut dram) else { panic!("not a fault") };
        let Xlat::Fault(b) = x.translate(1, BASE + 4096, 0, 0, &mut dram) else { panic!("not a fault") };
        assert!(b <= a && b < second, "{a} then {b}");
    }

    /// `translation.managed_large_ptes`: once a managed block is fully resident its pages share one
    /// 2 MiB TLB entry (one walk, ending a level up, then hits for every page), and evicting one of
    /// its pages shoots that entry down, by block or by page; without the option each page walks.
    #[test]
    fn large_ptes_map_a_resident_block_with_one_entry_until_a_page_leaves() {
        // Translate page `page` of the block at `*t`; the clock moves past the answer.
        fn go(x: &mut Translator, dram: &mut Dram, t: &mut u64, page: u64) -> Xlat {
            let r = x.translate(0, BASE + (page << 12), *t, *t, dram);
            if let Xlat::Ready(d, ..) | Xlat::Fault(d) = r {
                *t = d + 1;
            }
            r
        }
        let size = |r: Xlat| match r {
            Xlat::Ready(_, _, size) => size,
            r => panic!("{r:?}"),
        };
        for (large, by_block) in [(true, true), (true, false), (false, false)] {
            let mut c = Config::default();
            (c.gpu.sms, c.gpu.sms_per_l1tlb) = (1, 1);
            c.translation.managed_large_ptes = large;
            let mut x = Translator::new(&c);
            x.space.map(&Buffer { base: BASE, bytes: 4 << 20, page_bytes: 4096, managed: true });
            let first = BASE >> 12;
            for p in 0..512 {
                x.space.residency.make_resident(first + p);
            }
            let (mut dram, mut t) = (Dram::new(&c.gpu.dram, c.gpu.line_bytes), 0);
            let big = if large { 2 << 20 } else { 4096 };
            for p in [0, 7, 100, 511] {
                assert_eq!(size(go(&mut x, &mut dram, &mut t, p)), big, "page {p}");
            }
            assert_eq!(x.gmmu.stats.walks, if large { 1 } else { 4 });
            assert_eq!(x.l1_hits(0), if large { 3 } else { 0 });
            // Page 7 leaves GPU memory: page 100 walks again, now to a 64 KiB PTE (its region,
            // pages 96-111, is still whole). Without the option its own entry survives: a hit.
            x.space.residency.unmake_resident(first + 7);
            if by_block {
                x.shootdown(&[first / 512]);
            } else {
                x.invalidate_page(first + 7);
            }
            let walks = x.gmmu.stats.walks;
            assert_eq!(size(go(&mut x, &mut dram, &mut t, 100)), if large { 64 << 10 } else { 4096 });
            assert_eq!(x.gmmu.stats.walks, walks + large as u64);
            assert!(matches!(go(&mut x, &mut dram, &mut t, 7), Xlat::Fault(_)));
            // Page 7 comes back: the block is whole again and maps anew, its old 2 MiB entry
            // shot down with page 7 (not found again without a walk).
            x.space.residency.make_resident(first + 7);
            let walks = x.gmmu.stats.walks;
            assert_eq!(size(go(&mut x, &mut dram, &mut t, 0)), big);
            assert_eq!(x.gmmu.stats.walks, walks + large as u64);
        }
    }

    #[test]
    fn true_lru_stamps_tlb_hits_walk_recency_only_walks() {
        for stamp_hits in [true, false] {
            let mut c = Config::default();
            (c.gpu.sms, c.gpu.sms_per_l1tlb) = (1, 1);
            let mut x = Translator::new(&c);
            x.space.map(&Buffer { base: BASE, bytes: 1 << 20, page_bytes: 4096, managed: true });
            let (a, b) = (BASE >> 12, (BASE >> 12) + 1);
            let res = &mut x.space.residency;
            res.keep_recency();
            res.stamp_hits = stamp_hits;
            res.make_resident(a);
            res.make_resident(b);
            let mut dram = Dram::new(&c.gpu.dram, c.gpu.line_bytes);
            let mut ready = |page: u64, t: u64| match x.translate(0, page << 12, t, t, &mut dram) {
                Xlat::Ready(d, _, _) => d,
                r => panic!("{r:?}"),
            };
            // Walks to a, then b; then a hits in the L1 TLB.
            let t = ready(a, 0);
            let t = ready(b, t);
            let hits = x.l1_hits(0);
            let mut ready = |page: u64, t: u64| match x.translate(0, page << 12, t, t, &mut dram) {
                Xlat::Ready(d, _, _) => d,
                r => panic!("{r:?}"),
            };
            ready(a, t + 1);
            assert_eq!(x.l1_hits(0), hits + 1, "a hit");
            let res = &x.space.residency;
            // True LRU: a is now the most recent page; walk recency still has b as the more recent one.
            assert_eq!(res.last_touch(a) > res.last_touch(b), stamp_hits, "stamp_hits = {stamp_hits}");
        }
    }

    #[test]
    fn ats_messages_without_serialisation_all_take_the_link_latency() {
        // 1 + 10 + 100 + 100 + 100 = 311 ns each.
        assert!(ready_ns(0.0).iter().all(|&d| d == 311 * PS_PER_NS));
    }

    #[test]
    fn a_burst_of_ats_requests_passes_the_link_one_per_message_time() {
        // The link is a Timeline of 8.192 ns buckets (8192 ps of capacity, 1000 per message)
        // from t = 0: the k-th request (from 1) leaves at max(11 + 1, 8.192 + k) ns, i.e. one
        // per ns once the bucket holding 11 ns is used up (k >= 4), reaches the IOMMU 100 ns
        // later, walks 100 ns, and its response, one per ns already, holds the way back 1 ns.
        let d = ready_ns(1.0);
        for (k, &d) in (1..=N).zip(&d) {
            let leave = (12 * PS_PER_NS).max(8192 + 1000 * k);
            assert_eq!(d, leave + 100_000 + 100_000 + 1000 + 100_000, "request {k}");
        }
    }

    /// IOMMU mode at 1 GHz, one L1 TLB per SM, a 100 ns link, no IOMMU TLB and a
    /// 4 x 25 ns walk without page-walk cache: every L2 miss takes 300 ns past the L2 TLB.
    fn iommu_timing(sms: u32) -> Config {
        let mut c = Config::default();
        c.translation.mode = TranslationMode::Iommu;
        (c.gpu.sms, c.gpu.sms_per_l1tlb, c.gpu.core_mhz) = (sms, 1, 1000.0);
        (c.iommu.link_latency_ns, c.iommu.tlb_entries) = (100.0, 0);
        let w = &mut c.iommu.walker;
        (w.level_latency_ns, w.pte_from_dram, w.pwc_entries) = (25.0, false, 0);
        c
    }

    #[test]
    fn an_l2_miss_reaches_the_l1_tlb_fill_return_cycles_after_the_l2_tlb() {
        let mut c = iommu_timing(3);
        (c.gpu.l1tlb.entries, c.gpu.l1tlb.ways, c.gpu.l1tlb.latency_cycles) = (4, 4, 1);
        (c.gpu.l2tlb.entries, c.gpu.l2tlb.ways, c.gpu.l2tlb.latency_cycles, c.gpu.l2tlb.fill_return_cycles) = (16, 16, 10, 2);
        let mut x = Translator::new(&c);
        x.space.map(&Buffer { base: BASE, bytes: 1 << 20, page_bytes: 4096, managed: false });
        let mut dram = Dram::new(&c.gpu.dram, c.gpu.line_bytes);
        let mut at = |sm: usize, t_ns: u64| match x.translate(sm, BASE, t_ns * PS_PER_NS, t_ns * PS_PER_NS, &mut dram) {
            Xlat::Ready(d, _, _) => d / PS_PER_NS,
            r => panic!("{r:?}"),
        };
        // 1 + 10 + 100 + 100 + 100 = 311 ns at the L2 TLB, 313 at the L1 TLB.
        assert_eq!(at(0, 0), 313);
        // SM 0's L1 TLB holds it from 313: a lookup at 300 waits for it, one at 400 hits.
        assert_eq!(at(0, 300), 313);
        assert_eq!(at(0, 400), 401);
        // SM 1 hits in the L2 TLB: 1 + 10, no extra way back (a hit's is in its latency).
        assert_eq!(at(1, 400), 411);
        // SM 2's miss reaches the L2 TLB at 51 and merges into the pending miss: it is
        // answered with that miss's own request, 2 cycles after the L2 TLB's fill at 311.
        assert_eq!(at(2, 50), 313);
    }

    #[test]
    fn l1_fills_arriving_together_are_installed_one_per_cycle() {
        let mut c = iommu_timing(2);
        (c.gpu.l1tlb.entries, c.gpu.l1tlb.ways, c.gpu.l1tlb.latency_cycles, c.gpu.l1tlb.fills_per_cycle) = (4, 4, 1, 1);
        (c.gpu.l2tlb.entries, c.gpu.l2tlb.ways, c.gpu.l2tlb.latency_cycles) = (16, 16, 10);
        let mut x = Translator::new(&c);
        x.space.map(&Buffer { base: BASE, bytes: 1 << 20, page_bytes: 4096, managed: false });
        let mut dram = Dram::new(&c.gpu.dram, c.gpu.line_bytes);
        let mut at =
            |sm: usize, page: u64, t_ns: u64| match x.translate(sm, BASE + page * 4096, t_ns * PS_PER_NS, t_ns * PS_PER_NS, &mut dram) {
                Xlat::Ready(d, _, _) => d / PS_PER_NS,
                r => panic!("{r:?}"),
            };
        // Two walks answered together at 311: SM 1's L1 TLB installs the second a cycle later.
        assert_eq!((at(1, 0, 0), at(1, 1, 0)), (311, 312));
        // SM 0 hits both in the L2 TLB at 400: answers at 411, installed at 411 and 412.
        assert_eq!((at(0, 0, 400), at(0, 1, 400)), (411, 412));
        // The slot of 412 is taken, so a lookup at 412 of the second page waits for it...
        assert_eq!(at(0, 1, 411), 412);
        // ...and other TLBs are not held: SM 1 hits its own entries.
        assert_eq!(at(1, 1, 400), 401);
    }

    #[test]
    fn ats_responses_ready_together_leave_one_per_message_time() {
        let mut c = Config::default();
        c.translation.mode = TranslationMode::Iommu;
        (c.iommu.link_latency_ns, c.iommu.link_msg_ns) = (100.0, 1.0);
        let mut io = Translator::new(&c).iommu.unwrap();
        // From t = 0 the 1000-ps messages fill the 8192-ps buckets back to back: the k-th ends at k ns.
        for k in 1..=20 {
            assert_eq!(io.cross(1, 0, 0), (k + 100) * PS_PER_NS);
        }
        // The other direction is free.
        assert_eq!(io.cross(0, 0, 0), 101 * PS_PER_NS);
    }

    /// A far fault holds the L1 TLB's MSHR until the answer reaches it, `fill_return_cycles` after
    /// the L2 TLB. Two SMs share one L1 TLB of one MSHR (1 ns); L2 10 ns, return 2 cycles (2 ns).
    /// SM 0's page faults at 311 ns (1 + 10 + 100 + 100 + 100), its MSHR freed at 313. SM 1's
    /// miss of another page is admitted then: L2 at 323, link, walk, link: a fault at 623.
    #[test]
    fn a_far_fault_holds_the_l1_mshr_until_the_answer_reaches_the_l1() {
        let mut c = iommu_timing(2);
        c.gpu.sms_per_l1tlb = 2;
        (c.gpu.l1tlb.entries, c.gpu.l1tlb.ways, c.gpu.l1tlb.latency_cycles, c.gpu.l1tlb.mshrs) = (4, 4, 1, 1);
        (c.gpu.l2tlb.entries, c.gpu.l2tlb.ways, c.gpu.l2tlb.latency_cycles, c.gpu.l2tlb.fill_return_cycles) = (16, 16, 10, 2);
        let mut x = Translator::new(&c);
        x.space.map(&Buffer { base: BASE, bytes: 1 << 20, page_bytes: 4096, managed: true });
        let mut dram = Dram::new(&c.gpu.dram, c.gpu.line_bytes);
        assert_eq!(x.translate(0, BASE, 0, 0, &mut dram), Xlat::Fault(311 * PS_PER_NS));
        assert_eq!(x.translate(1, BASE + 4096, 0, 0, &mut dram), Xlat::Fault(623 * PS_PER_NS));
    }

    /// `translation.managed_large_ptes`: a page leaving a 64 KiB region mapped by one entry drops
    /// that entry (its key is the page's 64 KiB number); when the region is whole again it is
    /// walked anew, not hit from the old entry.
    #[test]
    fn a_page_invalidation_drops_the_64_kib_entry_holding_it() {
        let mut c = Config::default();
        (c.gpu.sms, c.gpu.sms_per_l1tlb) = (1, 1);
        c.translation.managed_large_ptes = true;
        let mut x = Translator::new(&c);
        x.space.map(&Buffer { base: BASE, bytes: 4 << 20, page_bytes: 4096, managed: true });
        let first = BASE >> 12;
        // Pages 96-111: one whole 64 KiB region (the rest of the block is not resident).
        for p in 96..112 {
            x.space.residency.make_resident(first + p);
        }
        let mut dram = Dram::new(&c.gpu.dram, c.gpu.line_bytes);
        let Xlat::Ready(d, _, 65536) = x.translate(0, BASE + (100 << 12), 0, 0, &mut dram) else { panic!("a 64 KiB mapping expected") };
        assert_eq!(x.gmmu.stats.walks, 1);
        x.space.residency.unmake_resident(first + 100);
        assert!(x.invalidate_page(first + 100), "the 64 KiB entry held page 100");
        x.space.residency.make_resident(first + 100);
        let t = d + 1;
        assert!(matches!(x.translate(0, BASE + (100 << 12), t, t, &mut dram), Xlat::Ready(_, _, 65536)));
        assert_eq!(x.gmmu.stats.walks, 2, "walked again");
    }

    /// ATS prefetch (4 pages): the answer brings the aligned group of 4 holding the demanded page,
    /// only pages of its allocation and, managed, only resident ones, into the L2 TLB.
    #[test]
    fn ats_prefetch_fills_the_aligned_group_within_the_allocation() {
        let mut c = iommu_timing(1);
        c.iommu.ats_prefetch_pages = 4;
        let mut x = Translator::new(&c);
        let v = BASE >> 12;
        // Device pages v+2 .. v+7; managed pages v+512 .. v+520, all resident but v+513.
        x.space.map(&Buffer { base: BASE + (2 << 12), bytes: 5 << 12, page_bytes: 4096, managed: false });
        x.space.map(&Buffer { base: BASE + (512 << 12), bytes: 8 << 12, page_bytes: 4096, managed: true });
        for p in (512..520).filter(|&p| p != 513) {
            x.space.residency.make_resident(v + p);
        }
        let mut dram = Dram::new(&c.gpu.dram, c.gpu.line_bytes);
        let mut go = |x: &mut Translator, p: u64| {
            assert!(matches!(x.translate(0, (v + p) << 12, 0, 0, &mut dram), Xlat::Ready(..)));
            let l2 = x.l2.as_ref().unwrap();
            let held: Vec<u64> = (0..524).filter(|&q| q != p && l2.holds(v + q)).collect();
            (x.iommu.as_ref().unwrap().ats_prefetched, held)
        };
        // Page 3's group is 0-3: 0 and 1 lie before the allocation, 2 comes along.
        assert_eq!(go(&mut x, 3), (1, vec![2]));
        // Page 6's group is 4-7: 4 and 5 come along, 7 lies past the allocation's end.
        assert_eq!(go(&mut x, 6), (3, vec![2, 3, 4, 5]));
        // Managed page 514's group is 512-515: 513 is not resident.
        assert_eq!(go(&mut x, 514), (5, vec![2, 3, 4, 5, 6, 512, 515]));
    }

    /// The IOMMU TLB's MSHRs cover the walker pool's threads and its queue: with one thread and a
    /// queue of one, a second miss queues at the walker (waiting 100 ns for the thread), not at an
    /// MSHR.
    #[test]
    fn the_iommu_tlb_has_an_mshr_per_walker_thread_and_queue_slot() {
        let mut c = iommu_timing(2);
        (c.iommu.tlb_entries, c.iommu.tlb_ways, c.iommu.tlb_latency_ns) = (16, 16, 0.0);
        (c.iommu.walker.threads, c.iommu.walker.queue_depth) = (1, 1);
        let mut x = Translator::new(&c);
        x.space.map(&Buffer { base: BASE, bytes: 1 << 20, page_bytes: 4096, managed: false });
        let mut dram = Dram::new(&c.gpu.dram, c.gpu.line_bytes);
        for sm in 0..2 {
            assert!(matches!(x.translate(sm, BASE + sm as u64 * 4096, 0, 0, &mut dram), Xlat::Ready(..)));
        }
        let mut m = crate::stats::Metrics::default();
        x.export(&mut m, "g", 1);
        assert_eq!(m.get("iommu.tlb.mshr_full_waits"), Some(0.0));
        assert_eq!(m.get("iommu.walker.queue_wait_ns.mean"), Some(50.0));
    }
}
