//! The binary `.uvmt` reader on arbitrary bytes: header, footer, chunks and
//! every warp's ops (or timed records) must decode or return an error naming
//! the input and byte offset, never panic or allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uvmsim::workload::tracefmt::{for_each_op, Blob, TimedReader, TraceFile};

fuzz_target!(|data: &[u8]| {
    let Ok(f) = TraceFile::from_blob("fuzz", Blob::Mem(data.to_vec())) else { return };
    let mut ops = 0u64;
    let _ = for_each_op(&f, 4096, |_, _, _, _| {
        ops += 1;
        if ops > 1_000_000 {
            return Err(uvmsim::workload::trace::TraceError("enough".into()));
        }
        Ok(())
    });
    if let Ok(mut r) = TimedReader::new(f) {
        for _ in 0..100_000 {
            match r.next_record() {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
});
