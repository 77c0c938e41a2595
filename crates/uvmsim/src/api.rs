//! The entry points the Python extension (and any other front end) calls:
//! JSON in, JSON out, and three error kinds — bad input, a failed simulation, an output that
//! cannot be written.

use crate::config::{self, Config, ConfigError, Source};
use crate::sim::SimError;
use crate::workload::WorkloadKind;
use serde_json::{json, Value};

#[derive(Debug)]
pub enum ApiError {
    /// Bad input: the message names the source, key and what is accepted.
    Config(ConfigError),
    /// The simulation itself failed (deadlock, livelock, impossible state).
    Sim(SimError),
    /// An output file cannot be written (no space, the directory went away, ...): not bad input.
    Output(String),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Config(e) => write!(f, "{e}"),
            ApiError::Sim(e) => write!(f, "{e}"),
            ApiError::Output(m) => f.write_str(m),
        }
    }
}

/// Resolve and validate a config from sources and `key=value` overrides.
pub fn resolve(sources: &[Source], overrides: &[String]) -> Result<Config, ConfigError> {
    config::resolve(sources, overrides)
}

/// A `--set` key as its plain dotted path, read as `--set` reads it (quoted segments are TOML keys);
/// `Err` says why the text is not a key.
pub fn plain_key(key: &str) -> Result<String, String> {
    config::plain_key(key)
}

/// The resolved config as JSON.
pub fn resolve_json(sources: &[Source], overrides: &[String]) -> Result<String, ConfigError> {
    Ok(serde_json::to_string(&resolve(sources, overrides)?).expect("config serializes"))
}

/// Which of `keys` the configuration resolved from `sources` and `overrides` does not read in its
/// mode, each with the reason the resolver would refuse a user's setting of it: `{"key": "why"}` as
/// JSON. A front end that applies one set of overrides to runs of several modes (`uvmsim reproduce
/// --set` over an experiment that compares presets) passes them as a preset-level source, which the
/// resolver does not refuse, and leaves the keys out of the runs listed here.
pub fn unread_json(sources: &[Source], overrides: &[String], keys: &[String]) -> Result<String, ConfigError> {
    let cfg = resolve(sources, overrides)?;
    let unread: serde_json::Map<String, Value> =
        keys.iter().filter_map(|k| cfg.unread(k).map(|why| (k.clone(), Value::String(why)))).collect();
    Ok(Value::Object(unread).to_string())
}

/// The record tables a run can keep, in the order `run_json` writes them (the Python package's
/// `TABLE_NAMES`, the names its loader accepts, come from here).
pub const TABLE_NAMES: [&str; 5] = ["batches", "faults", "migrations", "walks", "allocations"];

/// Run a simulation; returns `{"version", "config", "metrics"}` as JSON.
pub fn run_json(sources: &[Source], overrides: &[String]) -> Result<String, ApiError> {
    let cfg = resolve(sources, overrides).map_err(ApiError::Config)?;
    let out = crate::world::simulate_full(&cfg).map_err(|e| match e {
        SimError::BadInput(m) => ApiError::Config(ConfigError { source: None, key: None, message: m }),
        e => ApiError::Sim(e),
    })?;
    let [batches, faults, migrations, walks, allocations] = TABLE_NAMES;
    let tables: Vec<(&str, String)> = [
        out.batches.map(|t| (batches, columns(&t))),
        out.faults.map(|t| (faults, columns(&t))),
        out.migrations.map(|t| (migrations, columns(&t))),
        out.walks.map(|t| (walks, columns(&t))),
        out.allocations.map(|t| (allocations, columns(&t))),
    ]
    .into_iter()
    .flatten()
    .collect();
    let head = json!({"version": env!("CARGO_PKG_VERSION"), "config": cfg, "metrics": out.metrics}).to_string();
    // The tables are spliced in as text: `head` is an object, so it ends with its closing brace.
    let mut text = head.strip_suffix('}').expect("an object").to_string();
    text.push_str(",\"tables\":{");
    for (i, (name, body)) in tables.iter().enumerate() {
        text.push_str(if i == 0 { "\"" } else { ",\"" });
        text.push_str(name);
        text.push_str("\":");
        text.push_str(body);
    }
    text.push_str("}}");
    Ok(text)
}

/// A record table as JSON columns, `{"name": [values, ...], ...}`, written row by row. Rows as
/// objects (`[{"name": value, ...}, ...]`) repeat every name in every row and, built as one
/// `Value`, took about 2 KiB per row in this process and as many again in Python's dicts: a
/// multi-GPU run's 255,000 page moves raised the peak from 98 MiB to 614 MiB.
fn columns<T: serde::Serialize>(rows: &[T]) -> String {
    // Per column: its name, its values so far as JSON text ("[v,v,..."), and how many.
    let mut cols: Vec<(String, String, usize)> = vec![];
    for (i, row) in rows.iter().enumerate() {
        let Value::Object(fields) = serde_json::to_value(row).expect("records serialize") else {
            unreachable!("a record serializes to an object")
        };
        for (k, (name, v)) in fields.into_iter().enumerate() {
            // Rows of one record type list their fields in one order: the k-th is usually column k.
            let at = cols.get(k).is_some_and(|c| c.0 == name).then_some(k);
            let j = match at.or_else(|| cols.iter().position(|c| c.0 == name)) {
                Some(j) => j,
                None => {
                    // A column first seen in this row: null in the rows before it.
                    cols.push((name, format!("[{}", vec!["null"; i].join(",")), i));
                    cols.len() - 1
                }
            };
            let (_, text, n) = &mut cols[j];
            if *n > 0 {
                text.push(',');
            }
            text.push_str(&v.to_string());
            *n += 1;
        }
        // A column this row lacks: null.
        for (_, text, n) in &mut cols {
            if *n == i {
                text.push_str(if *n > 0 { ",null" } else { "null" });
                *n += 1;
            }
        }
    }
    // Columns in the record's declared field order (batch, start_ns, end_ns, ...), not the
    // alphabetical order of `Value`'s map; columns only later rows have go last.
    if let Some(first) = rows.first() {
        let order = field_order(&serde_json::to_string(first).expect("records serialize"));
        cols.sort_by_key(|c| order.iter().position(|n| *n == c.0).unwrap_or(usize::MAX));
    }
    let mut text = String::from("{");
    for (j, (name, col, _)) in cols.into_iter().enumerate() {
        if j > 0 {
            text.push(',');
        }
        text.push_str(&Value::String(name).to_string());
        text.push(':');
        text.push_str(&col);
        text.push(']');
    }
    text.push('}');
    text
}

/// The keys of a JSON object's text in the order written (`Value`'s map sorts them).
fn field_order(object: &str) -> Vec<String> {
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Keys, A::Error> {
                    let mut keys = vec![];
                    while let Some((k, _)) = m.next_entry::<String, serde::de::IgnoredAny>()? {
                        keys.push(k);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(V)
        }
    }
    serde_json::from_str::<Keys>(object).map(|k| k.0).unwrap_or_default()
}

/// The default of a dotted key, from the default config.
fn default_of(root: &Value, key: &str) -> Value {
    key.split('.').try_fold(root, |v, k| v.get(k)).cloned().unwrap_or(Value::Null)
}

fn params(prefix: &str) -> Vec<Value> {
    let root = serde_json::to_value(Config::default()).expect("config serializes");
    Config::reference()
        .into_iter()
        .filter(|p| p.key.starts_with(prefix))
        .map(|p| json!({"key": p.key, "default": default_of(&root, &p.key), "doc": p.doc}))
        .collect()
}

/// Every parameter: `[{"key", "default", "doc"}]`.
pub fn reference_json() -> String {
    Value::Array(params("")).to_string()
}

/// Summary of a trace file as JSON; a malformed trace is a `ConfigError` naming file and line.
pub fn trace_info_json(path: &str) -> Result<String, ConfigError> {
    let info = crate::workload::trace::info(path).map_err(|e| ConfigError { source: None, key: None, message: e.0 })?;
    Ok(serde_json::to_string(&info).expect("trace info serializes"))
}

fn bad(message: String) -> ConfigError {
    ConfigError { source: None, key: None, message }
}

/// Record the warp streams of the workload a config describes to a `.uvmt`
/// trace at `out`, without simulating; returns the totals as JSON.
pub fn trace_record_json(sources: &[Source], overrides: &[String], out: &str) -> Result<String, ApiError> {
    use crate::workload::warptrace::RecordError;
    let cfg = resolve(sources, overrides).map_err(ApiError::Config)?;
    let program = crate::workload::build(&cfg).map_err(|m| ApiError::Config(bad(m)))?;
    crate::workload::trace::check_out(out).map_err(ApiError::Output)?;
    let source =
        format!("uvmsim {} workload {}", env!("CARGO_PKG_VERSION"), serde_json::to_string(&cfg.workload).expect("config serializes"));
    let totals = crate::workload::warptrace::record(&program, &cfg, &source, out).map_err(|e| match e {
        RecordError::Input(m) => ApiError::Config(bad(m)),
        RecordError::Output(m) => ApiError::Output(m),
    })?;
    Ok(serde_json::to_string(&totals).expect("totals serialize"))
}

/// Convert a trace: CSV → timed `.uvmt`, timed `.uvmt` → CSV, Accel-Sim
/// `kernelslist.g` → warp `.uvmt` (laid out with the config's page size and
/// managed flag). Returns `{"from", "to", "records"}` as JSON. OUT is written
/// to a temporary file beside it and renamed at the end, and may not be IN.
/// Errors: `Config` for bad input (a malformed or unreadable IN, named with its
/// line or byte; OUT being IN; a bad config), `Output` when OUT cannot be written
/// (a directory, no space, too large, ...), before or while writing it.
pub fn trace_convert_json(input: &str, out: &str, sources: &[Source], overrides: &[String]) -> Result<String, ApiError> {
    use crate::workload::trace::ConvertError;
    use crate::workload::{accelsim, trace, tracefmt};
    if trace::same_file(input, out) {
        return Err(ApiError::Config(bad(format!(
            "{out}: is the input trace {input}: converting a file onto itself would destroy it; choose another OUT"
        ))));
    }
    trace::check_out(out).map_err(ApiError::Output)?;
    let layout = if accelsim::is_kernelslist(input) {
        Some(accelsim::Layout::of(&resolve(sources, overrides).map_err(ApiError::Config)?))
    } else {
        None
    };
    let tmp = trace::TempOut::new(out);
    let t = &tmp.tmp;
    let (from, to, n) = (|| {
        Ok(if let Some(layout) = &layout {
            ("accelsim", "uvmt-warps", accelsim::convert(input, t, layout)?.totals.warps)
        } else if tracefmt::is_uvmt(input) {
            let f = tracefmt::TraceFile::open(input)?;
            if f.header.mode == tracefmt::Mode::Warps {
                return Err(ConvertError::Input(trace::TraceError(format!(
                    "{input}: a warp trace has no timed (CSV) form; replay it with workload.kind = \"warp-trace\""
                ))));
            }
            ("uvmt-timed", "csv", trace::convert_timed(input, t, out.to_ascii_lowercase().ends_with(".gz"))?)
        } else {
            ("csv", "uvmt-timed", trace::convert_timed(input, t, false)?)
        })
    })()
    .map_err(|e| match tmp.rename_convert_err(e) {
        ConvertError::Input(e) => ApiError::Config(bad(e.0)),
        ConvertError::Output(m) => ApiError::Output(m),
    })?;
    tmp.commit().map_err(|e| ApiError::Output(e.0))?;
    Ok(json!({"from": from, "to": to, "records": n}).to_string())
}

/// Every config section: `[{"key", "doc"}]`.
pub fn sections_json() -> String {
    Value::Array(Config::sections().into_iter().map(|s| json!({"key": s.key, "doc": s.doc})).collect()).to_string()
}

/// Every workload generator: `[{"name", "description", "params"}]`.
pub fn workloads_json() -> String {
    let list: Vec<Value> = WorkloadKind::ALL
        .iter()
        .map(|k| json!({"name": k.name(), "description": k.description(), "params": params(&format!("workload.{}.", k.name().replace('-', "_")))}))
        .collect();
    Value::Array(list).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Columns in the records' key order; a key missing from some rows is null there.
    #[test]
    fn tables_go_out_as_columns() {
        let rows = [json!({"a": 1, "s": "x,y"}), json!({"a": 2.5, "b": "q", "s": "z"}), json!({"b": null, "s": "w"})];
        let cols: Value = serde_json::from_str(&columns(&rows)).unwrap();
        assert_eq!(cols, json!({"a": [1, 2.5, null], "s": ["x,y", "z", "w"], "b": [null, "q", null]}));
        // A struct's columns keep its field order (a `Value` would sort them): z before a.
        #[derive(serde::Serialize)]
        struct R {
            z: u8,
            a: u8,
        }
        assert_eq!(columns(&[R { z: 1, a: 2 }, R { z: 3, a: 4 }]), r#"{"z":[1,3],"a":[2,4]}"#);
        assert_eq!(columns::<Value>(&[]), "{}");
        assert_eq!(serde_json::from_str::<Value>(&columns(&[json!({"k": 7})])).unwrap(), json!({"k": [7]}));
    }

    /// A run's JSON holds its tables as columns, one value per row.
    #[test]
    fn run_json_splices_the_tables_in() {
        let out = run_json(&[], &["workload.managed=true".into(), "uvm.records=true".into(), "workload.kind=\"regular\"".into()]);
        let v: Value = serde_json::from_str(&out.unwrap()).unwrap();
        assert!(v["metrics"]["time.total_ns"].as_f64().unwrap() > 0.0);
        let batches = v["tables"]["batches"].as_object().unwrap();
        let n = batches["batch"].as_array().unwrap().len();
        assert!(n > 0 && batches.values().all(|c| c.as_array().unwrap().len() == n));
        assert_eq!(v["metrics"]["uvm.batches"].as_f64(), Some(n as f64));
    }

    /// `unread_json` lists the keys the resolved mode does not read, from a preset-level layer the
    /// resolver accepts them in; keys the mode reads are not listed.
    #[test]
    fn unread_json_names_the_keys_a_mode_does_not_read() {
        let layer = Source::preset("--set", "uvm.batch_size = 512\ngpu.l1tlb.mshrs = 2\n");
        let keys = ["uvm.batch_size".to_string(), "gpu.l1tlb.mshrs".to_string()];
        let iommu: Value =
            serde_json::from_str(&unread_json(std::slice::from_ref(&layer), &["translation.mode=\"iommu\"".into()], &keys).unwrap())
                .unwrap();
        assert_eq!(iommu.as_object().unwrap().keys().collect::<Vec<_>>(), ["uvm.batch_size"]);
        assert!(iommu["uvm.batch_size"].as_str().unwrap().contains("translation.mode = \"iommu\""));
        assert_eq!(unread_json(&[layer], &[], &keys).unwrap(), "{}");
    }

    /// Each generator's parameters are its own section's, found for the names with a dash too
    /// (`tiled-gemm`'s are under `workload.tiled_gemm.`), each with its default.
    #[test]
    fn every_generator_lists_its_own_parameters() {
        let list: Value = serde_json::from_str(&workloads_json()).unwrap();
        let list = list.as_array().unwrap();
        assert_eq!(list.len(), WorkloadKind::ALL.len());
        for w in list {
            let name = w["name"].as_str().unwrap();
            let prefix = format!("workload.{}.", name.replace('-', "_"));
            let params = w["params"].as_array().unwrap();
            assert!(!params.is_empty(), "{name}: no parameters");
            assert!(params.iter().all(|p| p["key"].as_str().unwrap().starts_with(&prefix)), "{name}");
        }
        let gemm = list.iter().find(|w| w["name"] == "tiled-gemm").unwrap();
        let n = gemm["params"].as_array().unwrap().iter().find(|p| p["key"] == "workload.tiled_gemm.n").unwrap();
        assert_eq!(n["default"], json!(Config::default().workload.tiled_gemm.n));
    }

    /// A recording whose OUT is a directory fails as an output error with the directory named, before
    /// the warps are generated, and leaves no temporary file beside it.
    #[test]
    fn recording_onto_a_directory_is_an_output_error() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("d");
        std::fs::create_dir(&out).unwrap();
        let out = out.display().to_string();
        match trace_record_json(&[], &["workload.kind=stream".into()], &out) {
            Err(ApiError::Output(m)) => assert_eq!(m, format!("{out}: cannot write: is a directory")),
            other => panic!("{other:?}"),
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only the directory");
    }
}
