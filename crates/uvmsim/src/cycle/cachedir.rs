//! Akita v4.9.0's cache directory, MSHR and LRU victim finder
//! (mem/cache/directory.go, mshr.go, victimfinder.go), shared by the
//! write-around L1V and the write-back L2.

/// A cache block (Akita `cache.Block`). Blocks are addressed by
/// `set * ways + way`, which is also their storage slot.
#[derive(Clone, Debug, Default)]
pub struct Block {
    pub tag: u64,
    pub set: usize,
    pub way: usize,
    pub valid: bool,
    pub dirty: bool,
    pub read_count: i32,
    pub locked: bool,
}

/// Sets of blocks with an LRU queue per set (front = least recent).
#[derive(Clone, Debug)]
pub struct Directory {
    pub sets: usize,
    pub ways: usize,
    pub block_size: u64,
    pub blocks: Vec<Block>,
    lru: Vec<Vec<usize>>,
    /// Akita `InterleavingConverter` of a banked L2: the address is first
    /// turned into the bank-local address (`Some((interleave_bytes, banks))`).
    pub interleave: Option<(u64, u64)>,
}

impl Directory {
    pub fn new(sets: usize, ways: usize, block_size: u64) -> Self {
        let mut blocks = Vec::with_capacity(sets * ways);
        let mut lru = Vec::with_capacity(sets);
        for s in 0..sets {
            let mut q = Vec::with_capacity(ways);
            for w in 0..ways {
                blocks.push(Block { set: s, way: w, ..Block::default() });
                q.push(s * ways + w);
            }
            lru.push(q);
        }
        Self { sets, ways, block_size, blocks, lru, interleave: None }
    }

    /// Akita `InterleavingConverter.ConvertExternalToInternal`: drop the
    /// other banks' interleaving units.
    fn internal(&self, addr: u64) -> u64 {
        match self.interleave {
            None => addr,
            Some((unit, n)) => {
                let chunk = addr / unit;
                (chunk / n) * unit + addr % unit
            }
        }
    }

    pub fn set_of(&self, addr: u64) -> usize {
        ((self.internal(addr) / self.block_size) % self.sets as u64) as usize
    }

    /// Akita `Lookup`: the valid block holding line `addr`.
    pub fn lookup(&self, addr: u64) -> Option<usize> {
        let s = self.set_of(addr);
        (s * self.ways..(s + 1) * self.ways).find(|&b| self.blocks[b].valid && self.blocks[b].tag == addr)
    }

    /// Akita `LRUVictimFinder.FindVictim`: the least recent block that is
    /// invalid and unlocked, else the least recent unlocked one, else the
    /// least recent.
    pub fn find_victim(&self, addr: u64) -> usize {
        let q = &self.lru[self.set_of(addr)];
        if let Some(&b) = q.iter().find(|&&b| !self.blocks[b].valid && !self.blocks[b].locked) {
            return b;
        }
        if let Some(&b) = q.iter().find(|&&b| !self.blocks[b].locked) {
            return b;
        }
        q[0]
    }

    /// Akita `Visit`: move to the most recent end.
    pub fn visit(&mut self, block: usize) {
        let q = &mut self.lru[self.blocks[block].set];
        if let Some(i) = q.iter().position(|&b| b == block) {
            q.remove(i);
        }
        q.push(block);
    }
}

/// Akita `cache.MSHR`: entries in insertion order, keyed by line address.
#[derive(Clone, Debug)]
pub struct Mshr<R> {
    pub capacity: usize,
    pub entries: Vec<MshrEntry<R>>,
}

#[derive(Clone, Debug)]
pub struct MshrEntry<R> {
    pub addr: u64,
    pub block: usize,
    pub requests: Vec<R>,
    /// Id of the read sent below for this line, if any.
    pub read_to_bottom: Option<u64>,
}

impl<R> Mshr<R> {
    pub fn new(capacity: usize) -> Self {
        Self { capacity, entries: Vec::new() }
    }
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.capacity
    }
    pub fn query(&self, addr: u64) -> Option<usize> {
        self.entries.iter().position(|e| e.addr == addr)
    }
    pub fn add(&mut self, addr: u64, block: usize) -> usize {
        assert!(self.query(addr).is_none(), "entry already in mshr");
        assert!(!self.is_full(), "MSHR is full");
        self.entries.push(MshrEntry { addr, block, requests: Vec::new(), read_to_bottom: None });
        self.entries.len() - 1
    }
    pub fn remove(&mut self, addr: u64) -> MshrEntry<R> {
        let i = self.query(addr).expect("removing a non-existent MSHR entry");
        self.entries.remove(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_victim_is_the_least_recent_unlocked_block() {
        let mut d = Directory::new(1, 4, 64);
        // All invalid: the queue's order (way 0 first).
        assert_eq!(d.find_victim(0), 0);
        for b in 0..4 {
            d.blocks[b].valid = true;
            d.blocks[b].tag = 64 * b as u64;
        }
        d.visit(0); // order 1 2 3 0
        assert_eq!(d.find_victim(0), 1);
        d.blocks[1].locked = true;
        assert_eq!(d.find_victim(0), 2);
        for b in 0..4 {
            d.blocks[b].locked = true;
        }
        assert_eq!(d.find_victim(0), 1, "all locked: the least recent");
        assert_eq!(d.lookup(128), Some(2));
        assert_eq!(d.lookup(256), None);
    }

    /// A bank of a 16-way interleaved L2 (128 B units) sees its own units as
    /// consecutive: bank-local line = (unit / 16) * 2 + line in unit.
    #[test]
    fn interleaved_banks_index_by_their_local_address() {
        let mut d = Directory::new(128, 16, 64);
        d.interleave = Some((128, 16));
        assert_eq!(d.set_of(0), 0);
        assert_eq!(d.set_of(64), 1);
        assert_eq!(d.set_of(128 * 16), 2);
        assert_eq!(d.set_of(128 * 16 + 64), 3);
    }

    #[test]
    fn the_mshr_keeps_insertion_order_and_refuses_duplicates() {
        let mut m: Mshr<u32> = Mshr::new(2);
        assert_eq!(m.add(0x40, 3), 0);
        assert_eq!(m.add(0x80, 5), 1);
        assert!(m.is_full());
        assert_eq!(m.query(0x80), Some(1));
        assert_eq!(m.remove(0x40).block, 3);
        assert_eq!(m.query(0x80), Some(0), "later entries move up");
        assert!(std::panic::catch_unwind(move || m.add(0x80, 1)).is_err(), "a line already in the MSHR");
    }

    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// Look the line up; on a hit visit it, on a miss fill the victim.
        Access(u64),
        Lock(usize),
        Unlock(usize),
        Invalidate(usize),
    }

    /// Reference victim finder on visit stamps instead of a queue: each
    /// block's last visit (initially its way, before any visit), the victim
    /// the smallest stamp among invalid unlocked blocks, else among unlocked
    /// ones, else among all.
    fn reference_victim(d: &Directory, stamps: &[i64], set: usize) -> usize {
        let blocks = set * d.ways..(set + 1) * d.ways;
        let oldest = |f: &dyn Fn(&Block) -> bool| blocks.clone().filter(|&b| f(&d.blocks[b])).min_by_key(|&b| stamps[b]);
        oldest(&|b: &Block| !b.valid && !b.locked).or_else(|| oldest(&|b: &Block| !b.locked)).or_else(|| oldest(&|_: &Block| true)).unwrap()
    }

    fn ops(blocks: usize) -> impl Strategy<Value = Vec<Op>> {
        proptest::collection::vec(
            prop_oneof![
                8 => (0u64..48).prop_map(|l| Op::Access(64 * l)),
                1 => (0..blocks).prop_map(Op::Lock),
                1 => (0..blocks).prop_map(Op::Unlock),
                1 => (0..blocks).prop_map(Op::Invalidate),
            ],
            0..300,
        )
    }

    proptest! {
        #[test]
        fn lru_victims_match_a_stamp_reference(geo in prop_oneof![Just((1usize, 4usize)), Just((4, 2)), Just((2, 8)), Just((3, 3))],
                                               seq in ops(24)) {
            let (sets, ways) = geo;
            let mut d = Directory::new(sets, ways, 64);
            let mut stamps: Vec<i64> = (0..sets * ways).map(|b| (b % ways) as i64 - ways as i64).collect();
            for (t, op) in seq.into_iter().enumerate() {
                let t = t as i64;
                match op {
                    Op::Access(addr) => {
                        let s = d.set_of(addr);
                        let hit = (s * ways..(s + 1) * ways).find(|&b| d.blocks[b].valid && d.blocks[b].tag == addr);
                        prop_assert_eq!(d.lookup(addr), hit);
                        let b = match hit {
                            Some(b) => b,
                            None => {
                                let v = d.find_victim(addr);
                                prop_assert_eq!(v, reference_victim(&d, &stamps, s));
                                d.blocks[v].tag = addr;
                                d.blocks[v].valid = true;
                                v
                            }
                        };
                        d.visit(b);
                        stamps[b] = t;
                    }
                    Op::Lock(b) if b < sets * ways => d.blocks[b].locked = true,
                    Op::Unlock(b) if b < sets * ways => d.blocks[b].locked = false,
                    Op::Invalidate(b) if b < sets * ways => d.blocks[b].valid = false,
                    _ => {}
                }
            }
        }
    }
}
