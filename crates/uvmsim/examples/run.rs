//! Developer tool: run one simulation without Python and print its metrics.
//! `cargo run --release --example run -- [FILE.toml ...] [key=value ...]`
//! The first file is a preset, as `uvmsim run --preset FILE` (it may carry keys the run's mode
//! does not read); further files are the user's, as `uvmsim run FILE`.
//! With `--record=OUT.uvmt` it records the workload's warp streams instead (as
//! `uvmsim trace record`), so scripts/pgo_build.sh needs no Python.

fn main() {
    let mut sources = vec![];
    let mut overrides = vec![];
    let mut record = None;
    for a in std::env::args().skip(1) {
        if let Some(out) = a.strip_prefix("--record=") {
            record = Some(out.to_string());
        } else if a.ends_with(".toml") {
            match std::fs::read_to_string(&a) {
                Ok(text) if sources.is_empty() => sources.push(uvmsim::config::Source::preset(a, text)),
                Ok(text) => sources.push(uvmsim::config::Source::user(a, text)),
                Err(e) => {
                    eprintln!("error: {a}: {e}");
                    std::process::exit(2);
                }
            }
        } else {
            overrides.push(a);
        }
    }
    if let Some(out) = record {
        match uvmsim::api::trace_record_json(&sources, &overrides, &out) {
            Ok(totals) => println!("{totals}"),
            Err(e) => {
                eprintln!("error: {e}");
                // An output that cannot be written is not bad input.
                std::process::exit(if matches!(e, uvmsim::api::ApiError::Output(_)) { 1 } else { 2 });
            }
        }
        return;
    }
    let cfg = match uvmsim::config::resolve(&sources, &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    match uvmsim::world::simulate(&cfg) {
        Ok(m) => {
            for (k, v) in &m.0 {
                println!("{k} = {}", v.as_f64());
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            // Bad input found once the run started (a trace's record, a converted trace) is bad
            // input, as the CLI says: exit code 2, which the stress script does not count as a bug.
            std::process::exit(if matches!(e, uvmsim::sim::SimError::BadInput(_)) { 2 } else { 1 });
        }
    }
}
