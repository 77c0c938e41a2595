//! The text trace reader on arbitrary bytes (plain or, when they start with the
//! gzip magic, compressed): it must return records or an error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uvmsim::workload::trace::TraceReader;

fuzz_target!(|data: &[u8]| {
    if let Ok(mut r) = TraceReader::from_reader("fuzz", Box::new(std::io::Cursor::new(data.to_vec()))) {
        for _ in 0..10_000 {
            match r.next_record() {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
});
