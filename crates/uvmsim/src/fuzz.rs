//! The fuzz targets' bodies (`fuzz/fuzz_targets/`, run by `scripts/fuzz` with cargo-fuzz on
//! nightly). They live here, built and tested with the crate, so that a change of the parsers'
//! API breaks the build at once: the fuzz crate is not part of the workspace, and until session
//! 47 its `config_toml` target had stopped compiling unnoticed (since `Source` gained `preset`).
//! Each takes arbitrary bytes and must return without panicking; what it returns is
//! nothing the fuzzer checks.

use crate::config::{resolve, Source};
use crate::workload::trace::{TraceError, TraceReader};
use crate::workload::tracefmt::{for_each_op, Blob, TimedReader, TraceFile};

/// The config loader on arbitrary text (a config file, before the first `\u{1}`) and an
/// arbitrary `--set` override (after it): it must resolve or return a `ConfigError`. The file
/// is read as a preset when the input's length is odd (presets may set keys the mode does
/// not read) and as the user's file otherwise.
pub fn config_toml(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (file, set) = text.split_once('\u{1}').unwrap_or((&text, "gpu.sms=4"));
    let source = if data.len() % 2 == 1 { Source::preset("fuzz", file) } else { Source::user("fuzz.toml", file) };
    let _ = resolve(&[source], &[set.to_string()]);
}

/// The text trace reader on arbitrary bytes (plain or, when they start with the gzip magic,
/// compressed): it must return records or an error.
pub fn trace_csv(data: &[u8]) {
    if let Ok(mut r) = TraceReader::from_reader("fuzz", Box::new(std::io::Cursor::new(data.to_vec()))) {
        for _ in 0..10_000 {
            match r.next_record() {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
}

/// The binary `.uvmt` reader on arbitrary bytes: header, footer, chunks and every warp's ops
/// (or timed records) must decode or return an error naming the input and byte offset, without
/// allocating without bound.
pub fn trace_uvmt(data: &[u8]) {
    let Ok(f) = TraceFile::from_blob("fuzz", Blob::Mem(data.to_vec())) else { return };
    let mut ops = 0u64;
    let _ = for_each_op(&f, 4096, |_, _, _, _| {
        ops += 1;
        if ops > 1_000_000 {
            return Err(TraceError("enough".into()));
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
}

/// The Accel-Sim text reader on arbitrary bytes: the input up to its first NUL is the
/// kernelslist.g (else `kernel-1.traceg`), the rest kernel-1.traceg. It must convert or return
/// an error naming the file and line.
pub fn trace_accelsim(data: &[u8]) {
    let (list, kernel) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b"kernel-1.traceg\n"[..], data),
    };
    let _ = crate::workload::accelsim::check_bytes(list, kernel);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each target on a few inputs, valid and not (the fuzzer's corpus starts from nothing):
    /// none panics. (The property tests `arbitrary_input_never_panics` and
    /// `arbitrary_bytes_never_panic` cover the trace readers with random inputs in every run.)
    #[test]
    fn every_target_returns_on_valid_and_broken_inputs() {
        let csv = b"time_ns,gpu,cu,wavefront,kind,vaddr,size\n10,1,0,0,R,0x1000,64\n";
        let inputs: [&[u8]; 8] = [
            b"",
            b"[gpu]\nsms = 8\n",
            b"[gpu]\nsms = 8\n\x01gpu.sms=-1",
            b"[gpu\n",
            csv,
            &csv[..csv.len() - 9],
            b"UVMT\x00\x01",
            b"kernel-1.traceg\n\x00-kernel name = k\n-grid dim = (1,1,1)\n",
        ];
        for data in inputs {
            config_toml(data);
            trace_csv(data);
            trace_uvmt(data);
            trace_accelsim(data);
        }
        // Valid binary traces, whole and cut: a timed one (the CSV converted) and a warp trace
        // (a generator recorded), so that the readers get past the header.
        let dir = tempfile::tempdir().unwrap();
        let (csv_path, timed, warps) = (dir.path().join("t.csv"), dir.path().join("t.uvmt"), dir.path().join("w.uvmt"));
        std::fs::write(&csv_path, csv).unwrap();
        let path = |p: &std::path::Path| p.display().to_string();
        crate::api::trace_convert_json(&path(&csv_path), &path(&timed), &[], &[]).unwrap();
        let sets = ["workload.kind=stream".to_string(), "workload.stream.elements=4096".to_string()];
        crate::api::trace_record_json(&[], &sets, &path(&warps)).unwrap();
        for p in [&timed, &warps] {
            let bytes = std::fs::read(p).unwrap();
            assert!(TraceFile::from_blob("fuzz", Blob::Mem(bytes.clone())).is_ok());
            trace_uvmt(&bytes);
            trace_uvmt(&bytes[..bytes.len() / 2]);
        }
    }
}
