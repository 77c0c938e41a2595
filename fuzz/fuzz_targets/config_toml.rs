//! The config loader on arbitrary text (a config file) and an arbitrary
//! `--set` override: it must resolve or return a ConfigError, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uvmsim::config::{resolve, Source};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (file, set) = text.split_once('\u{1}').unwrap_or((&text, "gpu.sms=4"));
    let _ = resolve(&[Source { name: "fuzz.toml".into(), text: file.to_string() }], &[set.to_string()]);
});
