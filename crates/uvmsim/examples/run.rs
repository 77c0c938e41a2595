//! Developer tool: run one simulation without Python and print its metrics.
//! `cargo run --release --example run -- [FILE.toml ...] [key=value ...]`

fn main() {
    let mut sources = vec![];
    let mut overrides = vec![];
    for a in std::env::args().skip(1) {
        if a.ends_with(".toml") {
            match std::fs::read_to_string(&a) {
                Ok(text) => sources.push(uvmsim::config::Source { name: a, text }),
                Err(e) => {
                    eprintln!("error: {a}: {e}");
                    std::process::exit(2);
                }
            }
        } else {
            overrides.push(a);
        }
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
            std::process::exit(1);
        }
    }
}
