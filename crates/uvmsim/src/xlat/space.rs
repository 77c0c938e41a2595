//! The address space: allocations (virtual ranges with a page size) and the
//! physical backing they were given, plus the radix page-table geometry.

use crate::workload::Buffer;

/// Page-size classes a TLB entry can hold.
pub const CLASS_SHIFT: [u32; 4] = [12, 16, 21, 30];

/// Class index of a page size in bytes (sizes are validated before this).
pub fn class_of(page_bytes: u64) -> u8 {
    CLASS_SHIFT.iter().position(|&s| 1u64 << s == page_bytes).unwrap_or(0) as u8
}

/// The radix level that holds the leaf entry for a page class, counting the
/// last level (4 KiB PTEs) as 1. 64 KiB pages sit at level 1 like 4 KiB pages
/// (one PTE covers 16 small slots, as NVIDIA's big-page tables and x86 PTE
/// coalescing do), 2 MiB at level 2, 1 GiB at level 3.
pub fn leaf_level(class: u8) -> u32 {
    match class {
        0 | 1 => 1,
        2 => 2,
        _ => 3,
    }
}

/// The virtual-address bits below the entry read at `level` (9 index bits per level, 4 KiB base).
#[inline]
pub fn level_shift(level: u32) -> u32 {
    12 + 9 * (level - 1)
}

/// Physical address of the page-table entry read at `level` for `va`.
/// Page tables live in their own physical region; entries of neighbouring
/// pages are neighbours, as in a real radix table.
pub fn pte_addr(level: u32, va: u64) -> u64 {
    const PT_BASE: u64 = 1 << 47;
    PT_BASE + ((level as u64) << 42) + (va >> level_shift(level)) * 8
}

/// One mapped allocation.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    pub va: u64,
    pub end: u64,
    pub pa: u64,
    pub shift: u32,
    pub class: u8,
    /// Managed (unified) memory: a page is GPU-mapped only once it is GPU-resident.
    pub managed: bool,
}

/// Tag of a physical address in host memory, mapped remotely by the GPU
/// (zero-copy): its accesses go over the link, not to GPU memory.
pub const REMOTE_PA: u64 = 1 << 62;

/// 4 KiB pages per 2 MiB VA block (the UVM driver's unit of work).
pub const BLOCK_PAGES: u64 = 512;

/// GPU residency of managed memory: one 512-bit map per 2 MiB VA block, as
/// the driver keeps it, created on first use, plus a map of the pages a
/// prefetch brought that the GPU has not touched yet, of the pages the GPU
/// maps remotely (host-resident, accessed over the link: preferred location
/// host, accessed-by, or pinned by thrashing mitigation) and of the resident
/// pages that are read-only duplicates (read-mostly: the host keeps its copy;
/// a GPU store faults), and of the resident pages the GPU has written (kept only
/// with `uvm.eviction.write_back = "dirty"`). Memory grows with the touched
/// footprint: 328 bytes per 2 MiB.
#[derive(Debug, Clone, Default)]
pub struct Residency {
    /// Fx hashing: SipHash (the std default) was a tenth of a fault-heavy run.
    blocks: rustc_hash::FxHashMap<u64, BlockBits>,
    resident_pages: u64,
    /// Prefetched pages the GPU walked to (touched) before they were evicted.
    pub prefetch_used: u64,
    /// The same count per managed allocation (the `allocations` table's `prefetch_used`).
    pub used_by_alloc: UsedByAlloc,
    /// Bumped whenever a page whose fault was serviced may be missing again
    /// (evicted, or its block deferred): warps waiting for a replay then
    /// re-execute and fault again on what is missing.
    pub refault_epoch: u64,
    /// Page-granular LRU eviction: a clock ticked by every walk to a resident
    /// page, and each such page's last tick (None: not kept, the default).
    clock: u64,
    recency: Option<rustc_hash::FxHashMap<u64, u64>>,
    /// TLB hits stamp pages too (`uvm.eviction.lru_recency = "access"`).
    pub stamp_hits: bool,
    /// The pages mapped since the GPU's last replay scan (a Bloom filter): a sleeping warp
    /// whose page is not in it is still missing that page, without a residency lookup.
    mapped_since: MappedSince,
}

/// The managed allocations' page ranges in address order, each with its index (the order they were
/// added): which allocation holds a page, by binary search. The UVM driver (its allocations, their
/// per-allocation counters), the APU's page-request path and the residency's count of used prefetches
/// each keep one.
#[derive(Debug, Clone, Default)]
pub struct PageRanges {
    /// (first page, end page), sorted by first page.
    spans: Vec<(u64, u64)>,
    /// The index of each span, in the same order.
    index: Vec<usize>,
}

impl PageRanges {
    /// Pages `first..end` as the next index, which it returns.
    pub fn add(&mut self, first: u64, end: u64) -> usize {
        let index = self.spans.len();
        let at = self.spans.partition_point(|&s| s <= (first, end));
        self.spans.insert(at, (first, end));
        self.index.insert(at, index);
        index
    }

    /// The range holding `page` and its index, if any.
    #[inline]
    pub fn find(&self, page: u64) -> Option<(u64, u64, usize)> {
        let i = self.spans.partition_point(|s| s.0 <= page).checked_sub(1)?;
        let (first, end) = self.spans[i];
        (page < end).then_some((first, end, self.index[i]))
    }

    /// The ranges in address order.
    #[inline]
    pub fn spans(&self) -> &[(u64, u64)] {
        &self.spans
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

impl FromIterator<(u64, u64)> for PageRanges {
    /// The ranges indexed in the order given.
    fn from_iter<I: IntoIterator<Item = (u64, u64)>>(iter: I) -> Self {
        let mut r = PageRanges::default();
        for (first, end) in iter {
            r.add(first, end);
        }
        r
    }
}

/// Prefetched pages used, counted per managed allocation: a lookup at a prefetched page's first
/// touch (once per prefetched page, off the hit path).
#[derive(Debug, Clone, Default)]
pub struct UsedByAlloc {
    ranges: PageRanges,
    /// Used pages per allocation, by index (the order allocations were added).
    pub counts: Vec<u64>,
}

impl UsedByAlloc {
    /// A managed allocation of pages `first..end`, the next index.
    pub fn add(&mut self, first: u64, end: u64) {
        self.ranges.add(first, end);
        self.counts.push(0);
    }

    #[inline]
    fn count(&mut self, vpn: u64) {
        if let Some((_, _, index)) = self.ranges.find(vpn) {
            self.counts[index] += 1;
        }
    }
}

/// A Bloom filter of page numbers, one bit per page (8,192 bits): `may_hold` is true for
/// every page marked since the last `clear`, and for few others (a batch maps hundreds).
#[derive(Debug, Clone)]
pub struct MappedSince {
    bits: Box<[u64; 128]>,
    marked: bool,
    /// Tests: hold every page, whatever the bits say (the scans then look every page up).
    #[cfg(test)]
    all: bool,
}

impl Default for MappedSince {
    fn default() -> Self {
        MappedSince {
            bits: Box::new([0; 128]),
            marked: false,
            #[cfg(test)]
            all: false,
        }
    }
}

impl MappedSince {
    #[inline]
    fn index(vpn: u64) -> (usize, u64) {
        // Fibonacci hashing: neighbouring pages (a batch maps runs of them) spread over the bits.
        let h = (vpn.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 51) as usize;
        (h / 64, 1 << (h % 64))
    }

    #[inline]
    fn mark(&mut self, vpn: u64) {
        let (w, b) = Self::index(vpn);
        self.bits[w] |= b;
        self.marked = true;
    }

    /// Was `vpn` perhaps mapped since the last `clear`? (false: certainly not.)
    #[inline]
    pub fn may_hold(&self, vpn: u64) -> bool {
        #[cfg(test)]
        if self.all {
            return true;
        }
        let (w, b) = Self::index(vpn);
        self.marked && self.bits[w] & b != 0
    }

    fn clear(&mut self) {
        if self.marked {
            self.bits.fill(0);
            self.marked = false;
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct BlockBits {
    resident: [u64; 8],
    /// Resident because of a prefetch, not touched by the GPU since.
    untouched: [u64; 8],
    /// Mapped by the GPU but resident on the host (zero-copy access over the link).
    remote: [u64; 8],
    /// Resident read-only duplicates (read-mostly): the host keeps its copy.
    dup: [u64; 8],
    /// Resident pages the GPU has stored to since they arrived (write-back of dirty pages only).
    dirty: [u64; 8],
}

/// How a walk finds a managed page on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapped {
    /// Not mapped: a far fault.
    No,
    /// Resident in GPU memory.
    Local,
    /// Mapped remotely: host memory over the link.
    Remote,
}

#[inline]
fn bit(vpn: u64) -> (u64, usize, u64) {
    let i = vpn % BLOCK_PAGES;
    (vpn / BLOCK_PAGES, (i / 64) as usize, 1u64 << (i % 64))
}

impl Residency {
    /// Is the 4 KiB page `vpn` (va >> 12) GPU-resident?
    #[inline]
    pub fn is_resident(&self, vpn: u64) -> bool {
        let (b, i) = (vpn / BLOCK_PAGES, vpn % BLOCK_PAGES);
        self.blocks.get(&b).is_some_and(|m| m.resident[(i / 64) as usize] >> (i % 64) & 1 == 1)
    }

    /// A walk reached `vpn` on the GPU: is it resident? A prefetched page
    /// touched for the first time counts as used.
    #[inline]
    pub fn access(&mut self, vpn: u64) -> bool {
        let (b, i) = (vpn / BLOCK_PAGES, vpn % BLOCK_PAGES);
        let Some(m) = self.blocks.get_mut(&b) else { return false };
        let (w, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        if m.untouched[w] & bit != 0 {
            m.untouched[w] &= !bit;
            self.prefetch_used += 1;
            self.used_by_alloc.count(vpn);
        }
        let resident = m.resident[w] & bit != 0;
        if let (true, Some(r)) = (resident, self.recency.as_mut()) {
            self.clock += 1;
            r.insert(vpn, self.clock);
        }
        resident
    }

    /// The GPU touched the resident page `vpn` through a larger mapping (no walk): a
    /// prefetched page counts as used, as a walk to it would count it.
    #[inline]
    pub fn mark_touched(&mut self, vpn: u64) {
        let (b, w, bit) = bit(vpn);
        if let Some(m) = self.blocks.get_mut(&b) {
            if m.untouched[w] & bit != 0 {
                m.untouched[w] &= !bit;
                self.prefetch_used += 1;
                self.used_by_alloc.count(vpn);
            }
        }
    }

    /// Keep the recency of resident pages (page-granular LRU eviction).
    pub fn keep_recency(&mut self) {
        self.recency.get_or_insert_with(Default::default);
    }

    /// A TLB hit reached `vpn` (true LRU): stamp it if it is resident on the GPU.
    #[inline]
    pub fn hit(&mut self, vpn: u64) {
        let (b, i) = (vpn / BLOCK_PAGES, vpn % BLOCK_PAGES);
        let resident = self.blocks.get(&b).is_some_and(|m| m.resident[(i / 64) as usize] >> (i % 64) & 1 == 1);
        if let (true, Some(r)) = (resident, self.recency.as_mut()) {
            self.clock += 1;
            r.insert(vpn, self.clock);
        }
    }

    /// Tick the clock and stamp `vpn` with it (a page migrated in); returns the stamp.
    pub fn touch(&mut self, vpn: u64) -> u64 {
        self.clock += 1;
        if let Some(r) = self.recency.as_mut() {
            r.insert(vpn, self.clock);
        }
        self.clock
    }

    /// The last stamp of `vpn` (0 if none is kept).
    pub fn last_touch(&self, vpn: u64) -> u64 {
        self.recency.as_ref().and_then(|r| r.get(&vpn)).copied().unwrap_or(0)
    }

    /// Forget the stamp of `vpn` (it left GPU memory).
    pub fn forget(&mut self, vpn: u64) {
        if let Some(r) = self.recency.as_mut() {
            r.remove(&vpn);
        }
    }

    /// The mapping of managed `va` in region `r` (4 KiB pages) when fully resident regions
    /// take larger PTEs: the whole 2 MiB VA block, else its aligned 64 KiB region, when every
    /// page of it is resident with identical attributes (all read-only duplicates or none; a
    /// remote mapping is host memory, not the block's chunk); else `r` itself.
    #[inline]
    pub fn large_pte_region(&self, r: &Region, va: u64) -> Region {
        let (b, w, _) = bit(va >> 12);
        let Some(m) = self.blocks.get(&b) else { return *r };
        // The pages of `mask` in word `w`: all resident, none remote, duplicates all or none.
        let whole = |w: usize, mask: u64| {
            let dup = m.dup[w] & mask;
            m.resident[w] & mask == mask && m.remote[w] & mask == 0 && (dup == 0 || dup == mask)
        };
        let all_dup = m.dup.iter().all(|&x| x == u64::MAX);
        if (0..8).all(|w| whole(w, u64::MAX) && (all_dup || m.dup[w] == 0)) {
            return Region { shift: 21, class: 2, ..*r };
        }
        if whole(w, 0xFFFFu64 << ((va >> 12) % 64 / 16 * 16)) {
            return Region { shift: 16, class: 1, ..*r };
        }
        *r
    }

    /// A walk reached `vpn` on the GPU: how is it mapped? (A prefetched page
    /// touched for the first time counts as used, as in [`Residency::access`].)
    #[inline]
    pub fn access_mapped(&mut self, vpn: u64) -> Mapped {
        if self.access(vpn) {
            return Mapped::Local;
        }
        if self.is_remote(vpn) {
            Mapped::Remote
        } else {
            Mapped::No
        }
    }

    /// Is `vpn` mapped on the GPU (resident, or remotely)?
    #[inline]
    pub fn is_mapped(&self, vpn: u64) -> bool {
        let (b, w, bit) = bit(vpn);
        self.blocks.get(&b).is_some_and(|m| (m.resident[w] | m.remote[w]) & bit != 0)
    }

    /// The pages mapped (resident or remotely) since the last `clear_mapped_since`, as a
    /// filter: a page it does not hold was not mapped in that time.
    #[inline]
    pub fn mapped_since(&self) -> &MappedSince {
        &self.mapped_since
    }

    /// Start a new `mapped_since` interval (the GPU's replay scan looked at every sleeper).
    pub fn clear_mapped_since(&mut self) {
        self.mapped_since.clear();
    }

    /// Tests: from now on a filter that holds every page (each sleeper's page is looked up,
    /// as before the filter).
    #[cfg(test)]
    pub fn disable_mapped_since(&mut self) {
        self.mapped_since.all = true;
    }

    /// Is `vpn` mapped remotely (host-resident, accessed over the link)?
    #[inline]
    pub fn is_remote(&self, vpn: u64) -> bool {
        let (b, w, bit) = bit(vpn);
        self.blocks.get(&b).is_some_and(|m| m.remote[w] & bit != 0)
    }

    /// Map `vpn` remotely (it must not be resident).
    pub fn map_remote(&mut self, vpn: u64) {
        let (b, w, bit) = bit(vpn);
        let m = self.blocks.entry(b).or_default();
        debug_assert!(m.resident[w] & bit == 0, "page {vpn:#x} resident and mapped remotely");
        m.remote[w] |= bit;
        self.mapped_since.mark(vpn);
    }

    /// Drop the remote mapping of `vpn`; false if it had none.
    pub fn unmap_remote(&mut self, vpn: u64) -> bool {
        let (b, w, bit) = bit(vpn);
        let Some(m) = self.blocks.get_mut(&b) else { return false };
        let had = m.remote[w] & bit != 0;
        m.remote[w] &= !bit;
        had
    }

    /// Is `vpn` a resident read-only duplicate (read-mostly)?
    #[inline]
    pub fn is_dup(&self, vpn: u64) -> bool {
        let (b, w, bit) = bit(vpn);
        self.blocks.get(&b).is_some_and(|m| m.dup[w] & bit != 0)
    }

    /// Mark the resident page `vpn` a read-only duplicate, or (false) the only copy.
    pub fn set_dup(&mut self, vpn: u64, dup: bool) {
        let (b, w, bit) = bit(vpn);
        if let Some(m) = self.blocks.get_mut(&b) {
            if dup {
                m.dup[w] |= bit;
            } else {
                m.dup[w] &= !bit;
            }
        }
    }

    /// The GPU loses `vpn` (migrated to the host, or a duplicate invalidated):
    /// no longer resident. Returns whether it was. Waiting warps re-execute
    /// (the refault epoch), so that they fault again on it.
    pub fn unmake_resident(&mut self, vpn: u64) -> bool {
        let (b, w, bit) = bit(vpn);
        let Some(m) = self.blocks.get_mut(&b) else { return false };
        let was = m.resident[w] & bit != 0;
        m.resident[w] &= !bit;
        m.untouched[w] &= !bit;
        m.dup[w] &= !bit;
        m.dirty[w] &= !bit;
        if was {
            self.resident_pages -= 1;
            self.refault_epoch += 1;
        }
        was
    }

    /// Mark the 4 KiB page `vpn` resident; false if it already was.
    pub fn make_resident(&mut self, vpn: u64) -> bool {
        let (b, i) = (vpn / BLOCK_PAGES, vpn % BLOCK_PAGES);
        let m = self.blocks.entry(b).or_default();
        let (w, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        let new = m.resident[w] & bit == 0;
        m.resident[w] |= bit;
        // Migrated in: a remote mapping it had is replaced by the local one.
        m.remote[w] &= !bit;
        self.resident_pages += new as u64;
        self.mapped_since.mark(vpn);
        new
    }

    /// The page `vpn` loses its GPU mapping (a multi-GPU invalidation); false if it had none.
    pub fn make_nonresident(&mut self, vpn: u64) -> bool {
        let (b, i) = (vpn / BLOCK_PAGES, vpn % BLOCK_PAGES);
        let Some(m) = self.blocks.get_mut(&b) else { return false };
        let (w, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        let had = m.resident[w] & bit != 0;
        m.resident[w] &= !bit;
        m.untouched[w] &= !bit;
        self.resident_pages -= had as u64;
        had
    }

    /// Mark `vpn` resident by a prefetch (untouched until the GPU walks to it).
    pub fn make_prefetched(&mut self, vpn: u64) -> bool {
        let new = self.make_resident(vpn);
        let i = vpn % BLOCK_PAGES;
        if let Some(m) = self.blocks.get_mut(&(vpn / BLOCK_PAGES)) {
            m.untouched[(i / 64) as usize] |= 1 << (i % 64);
        }
        new
    }

    /// The resident pages of VA block `block` (bit i = page i of the block).
    pub fn block_mask(&self, block: u64) -> [u64; 8] {
        self.blocks.get(&block).map_or([0; 8], |m| m.resident)
    }

    /// Evict VA block `block`: none of its pages stays resident. Returns the
    /// pages that were resident and how many of them were prefetched and never touched.
    /// Its remote mappings stay: they point at host memory, which the eviction leaves alone
    /// (the driver unmaps only the evicted chunk's pages, `uvm_va_block_evict_chunks`).
    pub fn evict_block(&mut self, block: u64) -> Evicted {
        let m = match self.blocks.get_mut(&block) {
            None => return Evicted::default(),
            Some(m) if m.remote.iter().any(|&w| w != 0) => {
                let kept = BlockBits { remote: m.remote, ..BlockBits::default() };
                std::mem::replace(m, kept)
            }
            Some(_) => self.blocks.remove(&block).expect("present"),
        };
        let n: u64 = m.resident.iter().map(|w| w.count_ones() as u64).sum();
        self.resident_pages -= n;
        self.refault_epoch += 1;
        let mut dirty = m.dirty;
        for (d, r) in dirty.iter_mut().zip(m.resident) {
            *d &= r;
        }
        Evicted { resident: m.resident, untouched: m.untouched.iter().map(|w| w.count_ones() as u64).sum(), dirty, dup: m.dup }
    }

    /// A GPU store reached the resident page `vpn`: it is dirty until it leaves GPU memory.
    #[inline]
    pub fn mark_dirty(&mut self, vpn: u64) {
        let (b, w, bit) = bit(vpn);
        if let Some(m) = self.blocks.get_mut(&b) {
            m.dirty[w] |= m.resident[w] & bit;
        }
    }

    /// Has the GPU stored to the resident page `vpn` since it arrived?
    pub fn is_dirty(&self, vpn: u64) -> bool {
        let (b, w, bit) = bit(vpn);
        self.blocks.get(&b).is_some_and(|m| m.dirty[w] & m.resident[w] & bit != 0)
    }

    /// Is `vpn` a prefetched page the GPU has not touched yet?
    pub fn is_untouched(&self, vpn: u64) -> bool {
        let (b, w, bit) = bit(vpn);
        self.blocks.get(&b).is_some_and(|m| m.untouched[w] & bit != 0)
    }

    /// Prefetched pages resident now that the GPU has not touched.
    pub fn untouched_pages(&self) -> u64 {
        self.blocks.values().flat_map(|m| m.untouched.iter()).map(|w| w.count_ones() as u64).sum()
    }

    pub fn resident_pages(&self) -> u64 {
        self.resident_pages
    }

    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }
}

/// What [`Residency::evict_block`] took out of GPU memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evicted {
    /// The block's resident pages.
    pub resident: [u64; 8],
    /// How many of them a prefetch brought and the GPU never touched.
    pub untouched: u64,
    /// Those the GPU stored to (tracked only with dirty write-back).
    pub dirty: [u64; 8],
    /// Those that were read-only duplicates (read-mostly): the host holds them too.
    pub dup: [u64; 8],
}

/// All mapped allocations, sorted by address.
#[derive(Debug, Clone, Default)]
pub struct AddressSpace {
    regions: Vec<Region>,
    /// GPU residency of the managed regions' pages.
    pub residency: Residency,
}

impl AddressSpace {
    /// Map `b`. Physical addresses equal virtual ones: allocations are disjoint
    /// and page-aligned, and a replayed trace of this run then sees the same
    /// physical lines (data caches are physically tagged).
    pub fn map(&mut self, b: &Buffer) {
        let page = b.page_bytes;
        let len = b.bytes.div_ceil(page) * page;
        let r =
            Region { va: b.base, end: b.base + len, pa: b.base, shift: page.trailing_zeros(), class: class_of(page), managed: b.managed };
        let at = self.regions.partition_point(|x| x.va < r.va);
        self.regions.insert(at, r);
    }

    /// Map the whole 57-bit address space one-to-one onto physical memory (trace
    /// replay: a trace carries virtual addresses but no allocations). `managed`:
    /// pages are placed by a multi-GPU policy, and fault until placed.
    pub fn map_identity(&mut self, page_bytes: u64, managed: bool) {
        self.regions =
            vec![Region { va: 0, end: 1 << 57, pa: 0, shift: page_bytes.trailing_zeros(), class: class_of(page_bytes), managed }];
    }

    #[inline]
    pub fn lookup(&self, va: u64) -> Option<&Region> {
        if let [r] = self.regions.as_slice() {
            return (r.va <= va && va < r.end).then_some(r);
        }
        let i = self.regions.partition_point(|r| r.va <= va);
        let r = self.regions.get(i.checked_sub(1)?)?;
        (va < r.end).then_some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranges added out of address order keep their indexes, are listed in address order, and a
    /// page between or past them belongs to none.
    #[test]
    fn page_ranges_find_the_range_and_index_of_a_page() {
        let r: PageRanges = [(1000, 1512), (0, 100), (512, 600)].into_iter().collect();
        assert_eq!(r.spans(), &[(0, 100), (512, 600), (1000, 1512)]);
        assert_eq!((r.find(0), r.find(99), r.find(100)), (Some((0, 100, 1)), Some((0, 100, 1)), None));
        assert_eq!((r.find(511), r.find(512), r.find(599), r.find(600)), (None, Some((512, 600, 2)), Some((512, 600, 2)), None));
        assert_eq!(
            (r.find(1000), r.find(1511), r.find(1512), r.find(u64::MAX)),
            (Some((1000, 1512, 0)), Some((1000, 1512, 0)), None, None)
        );
        assert_eq!((r.len(), PageRanges::default().is_empty()), (3, true));
    }

    /// Hand cases of the mapping a managed page takes with large PTEs: a block's aligned 64 KiB
    /// region when its 16 pages are resident, the 2 MiB block when all 512 are, never across a
    /// remote mapping or a read-only duplicate, and 4 KiB otherwise.
    #[test]
    fn large_ptes_cover_only_fully_resident_uniform_regions() {
        let base = 1u64 << 30; // block 512 (VA 1 GiB), 4 KiB pages
        let r = Region { va: base, end: base + (4 << 20), pa: base, shift: 12, class: 0, managed: true };
        let first = base >> 12;
        let mut res = Residency::default();
        let of = |res: &Residency, page: u64| {
            let m = res.large_pte_region(&r, (first + page) << 12);
            (m.shift, m.class)
        };
        assert_eq!(of(&res, 0), (12, 0), "nothing resident");
        for p in 16..31 {
            res.make_resident(first + p);
        }
        assert_eq!(of(&res, 20), (12, 0), "15 of the 16 pages of region 1");
        res.make_resident(first + 31);
        assert_eq!(of(&res, 20), (16, 1), "region 1 (pages 16-31) complete");
        assert_eq!(of(&res, 16), (16, 1));
        assert_eq!(of(&res, 32), (12, 0), "region 2 has nothing");
        assert_eq!(of(&res, 15), (12, 0), "region 0 has nothing");
        // A read-only duplicate in the region: its pages' attributes differ.
        res.set_dup(first + 17, true);
        assert_eq!(of(&res, 20), (12, 0));
        // All 16 duplicates (read-mostly data): uniform again.
        for p in 16..32 {
            res.set_dup(first + p, true);
        }
        assert_eq!(of(&res, 20), (16, 1));
        for p in 0..512 {
            res.make_resident(first + p);
        }
        assert_eq!(of(&res, 0), (16, 1), "regions 0 and 1 differ: no 2 MiB PTE");
        for p in 16..32 {
            res.set_dup(first + p, false);
        }
        assert_eq!(of(&res, 0), (21, 2), "the whole block");
        assert_eq!(of(&res, 511), (21, 2));
        assert_eq!(of(&res, 512), (12, 0), "the next block has nothing");
        // One page taken back and mapped remotely: the block splits, the other regions stay 64 KiB.
        res.unmake_resident(first + 300);
        res.map_remote(first + 300);
        assert_eq!(of(&res, 300), (12, 0));
        assert_eq!(of(&res, 290), (12, 0), "same 64 KiB region (pages 288-303)");
        assert_eq!(of(&res, 310), (16, 1));
        assert_eq!(of(&res, 0), (16, 1));
    }

    #[test]
    fn dirty_pages_are_resident_pages_stored_to_until_they_leave() {
        let mut r = Residency::default();
        r.make_resident(512 + 3);
        r.make_resident(512 + 70);
        r.mark_dirty(512 + 3);
        r.mark_dirty(512 + 9); // not resident: stays clean
        assert!(r.is_dirty(512 + 3) && !r.is_dirty(512 + 9) && !r.is_dirty(512 + 70));
        r.make_resident(512 + 9);
        assert!(!r.is_dirty(512 + 9), "a page arrives clean");
        r.unmake_resident(512 + 3);
        r.make_resident(512 + 3);
        assert!(!r.is_dirty(512 + 3), "leaving GPU memory forgets the store");
        r.mark_dirty(512 + 70);
        let e = r.evict_block(1);
        assert_eq!((e.resident[0], e.resident[1], e.dirty[0], e.dirty[1]), (1 << 3 | 1 << 9, 1 << 6, 0, 1 << 6));
        assert!(!r.is_dirty(512 + 70) && r.resident_pages() == 0);
    }

    #[test]
    fn lookup_and_backing() {
        let mut s = AddressSpace::default();
        s.map(&Buffer { base: 1 << 30, bytes: 10_000, page_bytes: 4096, managed: false });
        s.map(&Buffer { base: 1 << 40, bytes: 1, page_bytes: 2 << 20, managed: true });
        let r = s.lookup((1 << 30) + 12_287).unwrap();
        assert_eq!((r.shift, r.class, r.pa, r.managed), (12, 0, 1 << 30, false));
        assert!(s.lookup((1 << 30) + 12_288).is_none());
        assert!(s.lookup((1 << 30) - 1).is_none());
        let r2 = s.lookup((1 << 40) + 5).unwrap();
        assert_eq!((r2.shift, r2.class, r2.pa, r2.managed), (21, 2, 1 << 40, true));
    }

    #[test]
    fn residency_bitmaps() {
        let mut r = Residency::default();
        assert!(!r.is_resident(1000));
        assert!(r.make_resident(1000));
        assert!(!r.make_resident(1000));
        assert!(r.is_resident(1000) && !r.is_resident(1001) && !r.is_resident(1000 + 512));
        r.make_resident(5);
        assert_eq!((r.resident_pages(), r.blocks()), (2, 2));
        // A prefetched page counts as used at its first walk only.
        assert!(r.make_prefetched(1001));
        assert_eq!(r.untouched_pages(), 1);
        assert!(r.access(1001) && r.access(1001) && !r.access(1002));
        assert_eq!((r.prefetch_used, r.untouched_pages()), (1, 0));
        r.make_prefetched(1003);
        let Evicted { resident: mask, untouched, .. } = r.evict_block(1000 / 512);
        assert_eq!((mask[7] >> (1000 % 512 - 448), untouched), (0b1011, 1));
        assert_eq!((r.resident_pages(), r.is_resident(1000), r.refault_epoch), (1, false, 1));
    }

    #[test]
    fn used_prefetches_are_counted_in_their_allocation() {
        let mut r = Residency::default();
        // Two allocations added out of address order (index 0 above index 1), a gap between them.
        r.used_by_alloc.add(1024, 1536);
        r.used_by_alloc.add(0, 512);
        for p in [5, 700, 1100, 1101] {
            r.make_prefetched(p);
        }
        // Walks and touches through a larger mapping both count, once per prefetched page; page 700
        // lies in no allocation.
        for p in [5, 5, 700, 1100] {
            r.access(p);
        }
        r.mark_touched(1101);
        r.mark_touched(1101);
        assert_eq!((r.prefetch_used, r.used_by_alloc.counts.clone()), (4, vec![2, 1]));
    }

    #[test]
    fn geometry() {
        assert_eq!(leaf_level(class_of(4096)), 1);
        assert_eq!(leaf_level(class_of(64 << 10)), 1);
        assert_eq!(leaf_level(class_of(2 << 20)), 2);
        assert_eq!(leaf_level(class_of(1 << 30)), 3);
        assert_eq!(level_shift(4), 39);
        // Neighbouring pages' PTEs are 8 bytes apart; their level-2 entries coincide.
        assert_eq!(pte_addr(1, 0x2000) - pte_addr(1, 0x1000), 8);
        assert_eq!(pte_addr(2, 0x2000), pte_addr(2, 0x1000));
    }

    /// The filter of pages mapped since the last clear: every page made resident or mapped
    /// remotely is in it (no false negatives), nothing is after a clear, and an eviction does
    /// not add the page.
    #[test]
    fn mapped_since_holds_every_page_mapped_since_the_clear() {
        let mut r = Residency::default();
        assert!(!r.mapped_since().may_hold(5));
        let pages: Vec<u64> = (0..3000).map(|i| i * 7919 + 3).collect();
        for &p in &pages[..1500] {
            r.make_resident(p);
        }
        for &p in &pages[1500..] {
            r.map_remote(p);
        }
        assert!(pages.iter().all(|&p| r.mapped_since().may_hold(p)));
        r.clear_mapped_since();
        assert!(pages.iter().all(|&p| !r.mapped_since().may_hold(p)));
        r.unmake_resident(pages[0]);
        r.make_prefetched(11);
        assert!(!r.mapped_since().may_hold(pages[0]) && r.mapped_since().may_hold(11));
        // Few false positives with a batch's worth of pages marked (8,192 bits, 256 pages).
        r.clear_mapped_since();
        for p in 0..256 {
            r.make_resident(1 << 20 | p);
        }
        let others = (0..10_000u64).filter(|&p| r.mapped_since().may_hold(p)).count();
        assert!(others < 500, "{others} of 10,000 unmarked pages pass the filter");
    }

    /// A page is mapped on the GPU when resident or mapped remotely. Taking a resident page back
    /// bumps the refault epoch (waiting warps re-execute); taking back one that was not resident
    /// (gone already, or remote) does not.
    #[test]
    fn mapped_pages_and_the_refault_epoch() {
        let mut r = Residency::default();
        r.make_resident(10);
        r.map_remote(11);
        assert!(r.is_mapped(10) && r.is_mapped(11) && !r.is_mapped(12));
        assert!(r.unmake_resident(10));
        assert_eq!(r.refault_epoch, 1);
        assert!(!r.unmake_resident(10) && !r.unmake_resident(11));
        assert_eq!(r.refault_epoch, 1);
        assert!(!r.is_mapped(10) && r.is_mapped(11));
    }

    /// A page migrated in replaces its remote mapping. A page that loses its GPU mapping without
    /// leaving (a multi-GPU invalidation) keeps its dirty bit, but an eviction reports only the
    /// resident pages' stores.
    #[test]
    fn residency_replaces_remote_mappings_and_evictions_report_resident_stores_only() {
        let mut r = Residency::default();
        r.map_remote(5);
        assert!(r.make_resident(5));
        assert!(!r.is_remote(5) && r.is_resident(5));
        r.make_resident(6);
        r.mark_dirty(5);
        r.mark_dirty(6);
        assert!(r.make_nonresident(6));
        let e = r.evict_block(0);
        assert_eq!((e.resident[0], e.dirty[0]), (1 << 5, 1 << 5));
    }

    /// Evicting a block takes its resident pages and leaves the pages it maps remotely
    /// (host memory) mapped; a block with nothing remote is forgotten.
    #[test]
    fn eviction_keeps_the_blocks_remote_mappings() {
        let mut r = Residency::default();
        r.make_resident(3);
        r.map_remote(4);
        r.make_prefetched(70);
        let e = r.evict_block(0);
        assert_eq!((e.resident[0], e.resident[1], e.untouched), (1 << 3, 1 << 6, 1));
        assert!(r.is_remote(4) && !r.is_resident(3) && !r.is_resident(70) && !r.is_untouched(70));
        assert_eq!(r.resident_pages(), 0);
        assert_eq!(r.evict_block(0), Evicted::default());
        r.make_resident(600);
        r.evict_block(1);
        assert_eq!(r.blocks(), 1);
    }
}
