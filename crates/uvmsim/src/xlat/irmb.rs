//! IDYLL's Invalidation Request Merging Buffer (seed multi-gpu §5.2.3,
//! Figure 53), one per GPU: PTE invalidations the UVM driver sends are
//! parked here and written to the local page table lazily, in batches.
//!
//! How it works (the seed's design): a VPN splits into a base, the page-table
//! index bits above the leaf level ("a 36-bit base (L5-L2 level of VA)"), and
//! an offset, the leaf-level index ("a 9-bit offset (L1 level of VA)"): base =
//! `vpn >> 9`, offset = `vpn & 511`, so one entry covers the 512 pages (2 MiB)
//! one leaf page-table page maps. The buffer holds `bases` merged entries (32),
//! each with up to `offsets` distinct offsets (16).
//! - **Insert** (an invalidation arrives): a matching base takes the offset;
//!   if that entry's offsets are full, its offsets are all evicted (to be
//!   invalidated in the page table) and the new one stays. No matching base:
//!   a free entry is allocated, else the least recently used entry is evicted
//!   and reused ("we use the LRU replacement policy which evicts the least
//!   recently used merged entry"). Evicted VPNs come back to the caller, in
//!   the order their offsets arrived, to be invalidated sequentially.
//! - **Lookup**: a VPN with a pending invalidation hits; the caller then
//!   skips the local walk and raises the far fault at once.
//! - **Remove**: when a new mapping for a VPN arrives, its offset is dropped
//!   (the PTE is rewritten valid instead).
//! - **Drain**: when the walkers are idle, the LRU entry is written back.
//!
//! ASSUMPTION (the seed does not say): "recently used" means last inserted
//! into; lookups and removals do not refresh an entry, because the seed's
//! reason for LRU is migration locality (a recently migrated page's
//! neighbours are likely to migrate next). Re-inserting a pending VPN counts
//! as a use and stores nothing new.

/// Leaf-level index bits (9: 512 PTEs per page-table page).
pub const OFFSET_BITS: u32 = 9;

#[derive(Debug, Clone)]
struct Entry {
    base: u64,
    /// Pending offsets in arrival order.
    offsets: Vec<u16>,
    /// Insertion clock at the last insert (LRU).
    used: u64,
}

/// What the buffer did (metrics `multi.idyll.irmb.*`).
#[derive(Debug, Clone, Default)]
pub struct IrmbStats {
    pub inserts: u64,
    /// Inserts whose base already had an entry (merged, or already pending).
    pub merges: u64,
    /// VPNs written back because an insert needed room (full offsets or a full buffer).
    pub evicted: u64,
    /// Entries written back by `drain_one`, and their VPNs.
    pub drains: u64,
    pub drained: u64,
    /// L2-TLB misses that found a pending invalidation (counted by the caller).
    pub hits: u64,
    /// Pending invalidations dropped because a new mapping arrived.
    pub removed: u64,
}

#[derive(Debug, Clone)]
pub struct Irmb {
    bases: usize,
    offsets: usize,
    entries: Vec<Entry>,
    clock: u64,
    pub stats: IrmbStats,
}

impl Irmb {
    /// A buffer of `bases` merged entries of `offsets` offsets each (the seed: 32 x 16).
    pub fn new(bases: usize, offsets: usize) -> Irmb {
        assert!(bases >= 1 && (1..=1 << OFFSET_BITS).contains(&offsets), "bases >= 1 and 1..=512 offsets, got {bases} x {offsets}");
        Irmb { bases, offsets, entries: Vec::with_capacity(bases), clock: 0, stats: IrmbStats::default() }
    }

    fn split(vpn: u64) -> (u64, u16) {
        (vpn >> OFFSET_BITS, (vpn & ((1 << OFFSET_BITS) - 1)) as u16)
    }

    fn join(base: u64, off: u16) -> u64 {
        base << OFFSET_BITS | off as u64
    }

    /// Pending invalidations.
    pub fn len(&self) -> usize {
        self.entries.iter().map(|e| e.offsets.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Merged entries in use.
    pub fn bases_used(&self) -> usize {
        self.entries.len()
    }

    /// Buffer the invalidation of `vpn`; VPNs evicted to make room are
    /// appended to `evicted` (the caller invalidates their PTEs now).
    pub fn insert(&mut self, vpn: u64, evicted: &mut Vec<u64>) {
        let (base, off) = Self::split(vpn);
        self.clock += 1;
        self.stats.inserts += 1;
        if let Some(e) = self.entries.iter_mut().find(|e| e.base == base) {
            e.used = self.clock;
            self.stats.merges += 1;
            if e.offsets.contains(&off) {
                return;
            }
            if e.offsets.len() == self.offsets {
                // Offsets full: write back the whole entry, keep the newcomer.
                self.stats.evicted += e.offsets.len() as u64;
                evicted.extend(e.offsets.drain(..).map(|o| Self::join(base, o)));
            }
            e.offsets.push(off);
            return;
        }
        if self.entries.len() == self.bases {
            let lru = self.lru().expect("a full buffer has entries");
            let e = self.entries.swap_remove(lru);
            self.stats.evicted += e.offsets.len() as u64;
            evicted.extend(e.offsets.iter().map(|&o| Self::join(e.base, o)));
        }
        let mut offsets = Vec::with_capacity(self.offsets);
        offsets.push(off);
        self.entries.push(Entry { base, offsets, used: self.clock });
    }

    fn lru(&self) -> Option<usize> {
        self.entries.iter().enumerate().min_by_key(|(_, e)| e.used).map(|(i, _)| i)
    }

    /// Whether an invalidation of `vpn` is pending.
    pub fn lookup(&self, vpn: u64) -> bool {
        let (base, off) = Self::split(vpn);
        self.entries.iter().any(|e| e.base == base && e.offsets.contains(&off))
    }

    /// Drop the pending invalidation of `vpn` (a new mapping arrived); whether it was there.
    pub fn remove(&mut self, vpn: u64) -> bool {
        let (base, off) = Self::split(vpn);
        let Some(i) = self.entries.iter().position(|e| e.base == base) else { return false };
        let e = &mut self.entries[i];
        let Some(j) = e.offsets.iter().position(|&o| o == off) else { return false };
        e.offsets.remove(j);
        self.stats.removed += 1;
        if e.offsets.is_empty() {
            self.entries.swap_remove(i);
        }
        true
    }

    /// Write back the LRU entry (walkers idle): its VPNs are appended to
    /// `out`; returns how many, 0 when the buffer is empty.
    pub fn drain_one(&mut self, out: &mut Vec<u64>) -> usize {
        let Some(i) = self.lru() else { return 0 };
        let e = self.entries.swap_remove(i);
        out.extend(e.offsets.iter().map(|&o| Self::join(e.base, o)));
        self.stats.drains += 1;
        self.stats.drained += e.offsets.len() as u64;
        e.offsets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: u64 = 512; // pages per base

    #[test]
    fn nearby_vpns_merge_into_one_entry() {
        let mut m = Irmb::new(32, 16);
        let mut ev = vec![];
        for v in [7 * B + 3, 7 * B + 500, 7 * B + 3, 7 * B + 9] {
            m.insert(v, &mut ev);
        }
        assert!(ev.is_empty());
        assert_eq!((m.bases_used(), m.len()), (1, 3), "duplicate 7B+3 stored once");
        // A VPN 512 pages on is another base.
        m.insert(8 * B + 3, &mut ev);
        assert_eq!((m.bases_used(), m.len()), (2, 4));
    }

    #[test]
    fn full_offsets_write_back_the_entry_and_keep_the_newcomer() {
        let mut m = Irmb::new(2, 4);
        let mut ev = vec![];
        for o in 0..4 {
            m.insert(B + o, &mut ev);
        }
        m.insert(B + 10, &mut ev);
        assert_eq!(ev, [B, B + 1, B + 2, B + 3]);
        assert_eq!((m.stats.inserts, m.stats.merges, m.stats.evicted), (5, 4, 4));
        assert!(m.lookup(B + 10) && !m.lookup(B));
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn a_new_base_in_a_full_buffer_evicts_the_least_recently_inserted_entry() {
        let mut m = Irmb::new(3, 16);
        let mut ev = vec![];
        m.insert(B, &mut ev); // base 1
        m.insert(2 * B, &mut ev); // base 2
        m.insert(3 * B + 1, &mut ev); // base 3
        m.insert(B + 5, &mut ev); // base 1 used again: base 2 is now LRU
        assert!(m.lookup(2 * B)); // a lookup does not refresh base 2
        m.insert(4 * B, &mut ev);
        assert_eq!(ev, [2 * B]);
        ev.clear();
        m.insert(5 * B, &mut ev);
        assert_eq!(ev, [3 * B + 1]);
        ev.clear();
        m.insert(6 * B, &mut ev);
        assert_eq!(ev, [B, B + 5], "offsets in arrival order");
    }

    #[test]
    fn lookup_hits_only_pending_vpns_and_remove_clears_them() {
        let mut m = Irmb::new(32, 16);
        let mut ev = vec![];
        m.insert(1000, &mut ev);
        assert!(m.lookup(1000));
        assert!(!m.lookup(1001) && !m.lookup(1000 + B));
        assert!(m.remove(1000));
        assert!(!m.lookup(1000) && !m.remove(1000));
        assert!(m.is_empty(), "an entry with no offsets is freed");
    }

    #[test]
    fn drain_writes_back_lru_entries_one_at_a_time() {
        let mut m = Irmb::new(32, 16);
        let mut ev = vec![];
        m.insert(5 * B + 1, &mut ev);
        m.insert(9 * B + 2, &mut ev);
        m.insert(5 * B + 3, &mut ev); // base 5 refreshed: base 9 is LRU
        let mut out = vec![];
        assert_eq!(m.drain_one(&mut out), 1);
        assert_eq!(out, [9 * B + 2]);
        assert_eq!(m.drain_one(&mut out), 2);
        assert_eq!(out, [9 * B + 2, 5 * B + 1, 5 * B + 3]);
        assert_eq!(m.drain_one(&mut out), 0);
        assert!(m.is_empty());
        assert_eq!((m.stats.drains, m.stats.drained, m.stats.merges), (2, 3, 1));
    }

    #[test]
    fn nothing_is_lost_every_insert_is_pending_or_evicted() {
        // Conservation over a pseudo-random stream with locality.
        let mut m = Irmb::new(4, 8);
        let mut ev = vec![];
        let mut inserted = std::collections::BTreeSet::new();
        for i in 0..5000u64 {
            let v = crate::sim::mix64(i) % (16 * B);
            m.insert(v, &mut ev);
            inserted.insert(v);
        }
        let mut out = ev.clone();
        while m.drain_one(&mut out) > 0 {}
        let got: std::collections::BTreeSet<u64> = out.iter().copied().collect();
        assert_eq!(got, inserted);
    }
}
