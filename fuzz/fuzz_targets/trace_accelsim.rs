//! The Accel-Sim text reader on arbitrary bytes: the input up to its first NUL
//! is the kernelslist.g (else `kernel-1.traceg`), the rest kernel-1.traceg. It
//! must convert or return an error naming the file and line, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (list, kernel) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b"kernel-1.traceg\n"[..], data),
    };
    let _ = uvmsim::workload::accelsim::check_bytes(list, kernel);
});
