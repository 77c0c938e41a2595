//! Loading: merge TOML sources and `--set` overrides over the defaults,
//! reject unknown keys (naming the nearest valid one), deserialize with the
//! failing key's path, then validate ranges. Every error names its source.

use super::Config;
use std::collections::{BTreeMap, BTreeSet};
use toml::{Table, Value};

/// One TOML text and the name to report it by (a file path or `preset NAME`).
#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    pub text: String,
    /// A system preset (`--preset`): it may set keys the configured mode does not read (a preset describes the
    /// machine, the driver's settings included); the user's files and `--set` may not ([`Config::unread`]).
    pub preset: bool,
}

impl Source {
    /// The user's TOML (a config file, a Python dict).
    pub fn user(name: impl Into<String>, text: impl Into<String>) -> Source {
        Source { name: name.into(), text: text.into(), preset: false }
    }

    /// A system preset.
    pub fn preset(name: impl Into<String>, text: impl Into<String>) -> Source {
        Source { name: name.into(), text: text.into(), preset: true }
    }
}

/// Bad configuration input: where it came from, which key, what is accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub source: Option<String>,
    pub key: Option<String>,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(s) = &self.source {
            write!(f, "{s}: ")?;
        }
        if let Some(k) = &self.key {
            write!(f, "key `{k}`: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ConfigError {}

fn err(source: Option<&str>, key: Option<&str>, message: String) -> ConfigError {
    ConfigError { source: source.map(str::to_string), key: key.map(str::to_string), message }
}

/// The tree of valid keys: the default config serialized.
fn schema() -> Table {
    Table::try_from(Config::default()).expect("the default config serializes to TOML")
}

fn all_paths(t: &Table, prefix: &str, out: &mut Vec<String>) {
    for (k, v) in t {
        let p = super::join_key(prefix, k);
        if let Value::Table(sub) = v {
            all_paths(sub, &p, out);
        }
        out.push(p);
    }
}

/// The valid key closest to `key` (edit distance on the dotted path), if any is close.
pub fn nearest_key(key: &str) -> Option<String> {
    let mut paths = vec![];
    all_paths(&schema(), "", &mut paths);
    let last = key.rsplit('.').next().unwrap_or(key);
    paths
        .into_iter()
        .map(|p| {
            let d_full = strsim::levenshtein(key, &p);
            let d_last = strsim::levenshtein(last, p.rsplit('.').next().unwrap_or(&p)) + 2;
            (d_full.min(d_last), p)
        })
        .filter(|(d, _)| *d <= 3.max(last.len() / 2))
        .min()
        .map(|(_, p)| p)
}

fn unknown(source: &str, key: &str) -> ConfigError {
    let hint = match nearest_key(key) {
        Some(k) => format!("did you mean `{k}`?"),
        None => "run `uvmsim config` for the list of keys".to_string(),
    };
    err(Some(source), Some(key), format!("unknown key; {hint}"))
}

/// A key is one path segment (`uvm.batch_size` unquoted) or several: a quoted dotted key
/// (`"uvm.batch_size" = 64`, which TOML reads as one key holding a dot) means the same key, as
/// in sweep specs. Expand those into nested tables; a key given in both forms in one source is an
/// error, as TOML makes a repeated unquoted key. A key with an empty segment (`"uvm..x"`) stays as
/// written: it is unknown.
fn expand_quoted_keys(t: Table, source: &str) -> Result<Table, ConfigError> {
    let mut out = Table::new();
    expand_into(&mut out, t, "", &[], source, &mut BTreeMap::new())?;
    Ok(out)
}

/// A key path as written in TOML: segments that are not bare keys are quoted.
fn toml_form(written: &[String]) -> String {
    let bare = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    written.iter().map(|p| if bare(p) { p.clone() } else { format!("{p:?}") }).collect::<Vec<_>>().join(".")
}

/// Insert `user` (its keys written as `written`) into `into` (the table at dotted `path`),
/// recording how each leaf was written in `forms` (by its dotted path).
fn expand_into(
    into: &mut Table,
    user: Table,
    path: &str,
    written: &[String],
    source: &str,
    forms: &mut BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    for (k, v) in user {
        let mut w = written.to_vec();
        w.push(k.clone());
        let parts: Vec<String> = if k.split('.').any(str::is_empty) { vec![k.clone()] } else { k.split('.').map(str::to_string).collect() };
        let mut slot = &mut *into;
        let mut p = path.to_string();
        for (i, part) in parts.iter().enumerate() {
            p = super::join_key(&p, part);
            let last = i + 1 == parts.len();
            match slot.get(part) {
                None if !last || v.is_table() => {
                    slot.insert(part.clone(), Value::Table(Table::new()));
                }
                None => break,
                Some(Value::Table(_)) if !last || v.is_table() => {}
                Some(_) => return Err(given_twice(source, &p, forms, &w)),
            }
            if !last {
                let Some(Value::Table(sub)) = slot.get_mut(part) else { unreachable!("a table was just checked or made") };
                slot = sub;
            }
        }
        let leaf = parts.last().expect("split yields at least one part");
        match v {
            Value::Table(vt) => {
                let Some(Value::Table(sub)) = slot.get_mut(leaf) else { unreachable!("a table was just checked or made") };
                expand_into(sub, vt, &p, &w, source, forms)?;
            }
            v => {
                forms.insert(p, toml_form(&w));
                slot.insert(leaf.clone(), v);
            }
        }
    }
    Ok(())
}

/// `key` (dotted) was given again, now written as `written`: name both forms.
fn given_twice(source: &str, key: &str, forms: &BTreeMap<String, String>, written: &[String]) -> ConfigError {
    let below = format!("{key}.");
    let earlier = forms.get(key).or_else(|| forms.iter().find(|(k, _)| k.starts_with(&below)).map(|(_, f)| f));
    let now = toml_form(written);
    let msg = match earlier {
        Some(e) if *e != now => format!("given twice, as `{e}` and as `{now}` (a quoted dotted key is the same key)"),
        _ => format!("given twice (as `{now}`)"),
    };
    err(Some(source), Some(key), msg)
}

/// Check `user`'s keys against the schema, then merge it into `into`, recording who set each leaf.
fn merge(
    into: &mut Table,
    user: Table,
    schema: &Table,
    prefix: &str,
    source: &str,
    prov: &mut BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    for (k, v) in user {
        let path = super::join_key(prefix, &k);
        let Some(sv) = schema.get(&k) else {
            return Err(unknown(source, &path));
        };
        match (sv, v) {
            (Value::Table(ss), Value::Table(uv)) => {
                let slot = into.entry(k).or_insert_with(|| Value::Table(Table::new()));
                let Value::Table(st) = slot else { unreachable!("sections stay tables") };
                merge(st, uv, ss, &path, source, prov)?;
            }
            (Value::Table(_), _) => {
                return Err(err(Some(source), Some(&path), format!("is a section, not a value; set its keys, e.g. `{path}.<key>`")));
            }
            (_, Value::Table(_)) => return Err(err(Some(source), Some(&path), "is a value, not a section".into())),
            (_, v) => {
                prov.insert(path, source.to_string());
                into.insert(k, v);
            }
        }
    }
    Ok(())
}

/// Turn `key.path=value` into a one-leaf table. The value is read as TOML
/// (numbers, booleans, quoted strings, arrays); anything else is a bare string.
/// The flag says the value is a bare integer literal TOML could not hold (beyond i64):
/// it becomes a string too, but its error is "out of range", not a type error.
fn override_table(spec: &str) -> Result<(String, Table, bool), ConfigError> {
    let src = "--set";
    let (key, raw) = spec.split_once('=').ok_or_else(|| err(Some(src), None, format!("`{spec}` is not of the form key.path=value")))?;
    let parts = set_key_parts(key.trim()).map_err(|why| err(Some(src), None, format!("`{spec}`: {why}")))?;
    let key = parts.join(".");
    let raw = raw.trim();
    let (value, overflow) = match format!("v = {raw}").parse::<Table>() {
        Ok(mut t) => (t.remove("v").unwrap_or(Value::String(raw.into())), false),
        Err(_) => (Value::String(raw.to_string()), is_integer_literal(raw)),
    };
    let mut parts = parts;
    let leaf = parts.pop().unwrap_or_default();
    let mut t = Table::new();
    t.insert(leaf, value);
    for p in parts.into_iter().rev() {
        let mut outer = Table::new();
        outer.insert(p, Value::Table(t));
        t = outer;
    }
    Ok((key, t, overflow))
}

/// The segments of a `--set` key. A key with quotes is read as a TOML key (`"workload".kind`), and a
/// quoted segment with dots names the same nested key (`"workload.kind"`), as in a config file
/// ([`expand_quoted_keys`]); splitting the raw text at its dots would have refused `"workload` as unknown.
/// The error says why not: an empty key or segment, or a quoted key TOML cannot read.
fn set_key_parts(key: &str) -> Result<Vec<String>, String> {
    let segments: Vec<String> = if key.contains(['"', '\'']) {
        let bad = || format!("`{key}` is not a key (a dotted path such as gpu.l1tlb.entries; TOML quotes around a segment are allowed)");
        let mut t: Table = format!("{key} = 0").parse().map_err(|_| bad())?;
        let mut segs = Vec::new();
        loop {
            let (k, v) = t.into_iter().next().ok_or_else(bad)?;
            segs.push(k);
            match v {
                Value::Table(inner) if inner.len() == 1 => t = inner,
                _ => break segs,
            }
        }
    } else {
        vec![key.to_string()]
    };
    let parts: Vec<String> = segments.iter().flat_map(|s| s.split('.')).map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err("empty key".into());
    }
    Ok(parts)
}

/// A `--set` key as its plain dotted path (`"workload".kind` is `workload.kind`), as `--set` reads it; the
/// error says why it is not a key. Front ends that match `--set` keys against their own (the Python
/// package's `reproduce --set`) read them with this, so both sides agree on what a key names.
pub fn plain_key(key: &str) -> Result<String, String> {
    set_key_parts(key.trim()).map(|parts| parts.join("."))
}

/// A TOML decimal integer literal: an optional sign, then digits (single `_` between digits allowed).
fn is_integer_literal(raw: &str) -> bool {
    let digits = raw.strip_prefix(['+', '-']).unwrap_or(raw);
    !digits.is_empty() && digits.split('_').all(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()))
}

/// Resolve a config: defaults, then each source in order, then overrides.
pub fn resolve(sources: &[Source], overrides: &[String]) -> Result<Config, ConfigError> {
    let schema = schema();
    let mut merged = Table::new();
    let mut prov = BTreeMap::new();
    for s in sources {
        let t: Table =
            s.text.parse().map_err(|e: toml::de::Error| err(Some(&s.name), None, format!("not valid TOML: {}", e.to_string().trim())))?;
        let t = expand_quoted_keys(t, &s.name)?;
        merge(&mut merged, t, &schema, "", &s.name, &mut prov)?;
    }
    // Keys whose --set value is an integer literal beyond i64 (the latest --set of the key decides).
    let mut overflowed = BTreeSet::new();
    for o in overrides {
        let (key, t, overflow) = override_table(o)?;
        merge(&mut merged, t, &schema, "", &format!("--set {key}"), &mut prov)
            .map_err(|e| ConfigError { source: Some("--set".into()), ..e })?;
        if overflow {
            overflowed.insert(key.clone());
        } else {
            overflowed.remove(&key);
        }
        prov.insert(key, "--set".into());
    }
    let cfg: Config = serde_path_to_error::deserialize(Value::Table(merged.clone())).map_err(|e| {
        let key = e.path().to_string();
        let src = provenance(&prov, &key);
        // The TOML deserializer appends "in `key`": the key is reported separately.
        let mut msg = e.inner().to_string().lines().next().unwrap_or_default().trim().to_string();
        if let Some(n) = too_large_integer(&msg).filter(|_| overflowed.contains(&key)) {
            // A TOML integer is an i64: a larger one (from --set or Python) reaches here as a string.
            msg = format!("{n} is out of range: config integers are at most {} (2^63 - 1, the TOML limit)", i64::MAX);
        } else if let Some(plain) = plain_expected(&msg) {
            msg = plain;
        } else if let Some(hinted) = variant_hint(&msg) {
            msg = hinted;
        } else if msg.contains("unit variant") {
            // A number or boolean for a key that takes a name: serde says "invalid type: unit
            // variant, expected string only"; name the value and the choices instead.
            msg = not_a_choice(&merged, &key).unwrap_or(msg);
        }
        if msg.starts_with("invalid type: string")
            && key.rsplit('_').next().is_some_and(|u| ["ns", "cycles", "mhz", "gbps", "s", "pages", "entries"].contains(&u))
        {
            msg.push_str(" (the unit is part of the key name: give a plain number)");
        }
        err(src.as_deref(), Some(&key), msg)
    })?;
    cfg.validate().map_err(|(key, msg)| {
        let src = provenance(&prov, &key);
        let mut msg = compact_numbers(&msg);
        // A check between two keys blames one; when the other comes from elsewhere (a preset's
        // ways against the run's --set entries), name it and its source: that is the conflict.
        let others: Vec<String> = prov
            .iter()
            .filter(|(k, s)| **k != key && Some(*s) != src.as_ref() && mentions(&msg, k))
            .map(|(k, s)| format!("`{k}` from {s}"))
            .collect();
        if !others.is_empty() {
            msg += &format!(" (in conflict with {})", others.join(", "));
        }
        err(src.as_deref(), Some(&key), msg)
    })?;
    // Keys the user set that nothing reads in the configured mode (a preset's are its machine's description).
    let presets: BTreeSet<&str> = sources.iter().filter(|s| s.preset).map(|s| s.name.as_str()).collect();
    let mut unread = prov.iter().filter(|(_, src)| !presets.contains(src.as_str())).filter_map(|(k, s)| Some((k, s, cfg.unread(k)?)));
    if let Some((key, src, mut msg)) = unread.next() {
        // A file that sets nearly every key is a whole configuration (`uvmsim config --resolved`), which
        // carries every mode's keys as a preset does: say how to load it.
        if !src.starts_with("--set") && prov.values().filter(|s| *s == src).count() >= WHOLE_CONFIG_KEYS {
            msg += &format!("; `{src}` sets every key, as `uvmsim config --resolved` writes them: load it as a preset (--preset {src}), which may carry keys its mode does not read");
        } else {
            // Name the others too, so that one run shows them all (before 2026-12-07 each took a run of its own).
            let rest: Vec<String> = unread.map(|(k, s, _)| format!("`{k}` ({s})")).collect();
            if !rest.is_empty() {
                msg += &format!(
                    "; not read in this configuration either ({} more): {}",
                    rest.len(),
                    if rest.len() > 8 { format!("{}, ...", rest[..8].join(", ")) } else { rest.join(", ") }
                );
            }
        }
        return Err(err(Some(src), Some(key), msg));
    }
    Ok(cfg)
}

/// Keys a user file must set to be taken for a whole configuration (`uvmsim config --resolved` writes all
/// 400-odd; a hand-written config sets a few dozen at most).
const WHOLE_CONFIG_KEYS: usize = 300;

/// Who set `key`, or the list or table holding it: an error on an element (`multi.apps[0]`,
/// `uvm.advise.per_buffer[1]`) names the source of the whole list.
fn provenance(prov: &BTreeMap<String, String>, key: &str) -> Option<String> {
    let mut k = key;
    loop {
        if let Some(s) = prov.get(k) {
            return Some(s.clone());
        }
        k = &k[..k.rfind(['[', '.'])?];
    }
}

/// For a key that takes one of several names, given something else (a number, a boolean): what
/// was given and the names it accepts, found by deserializing the config with a name it cannot hold.
fn not_a_choice(merged: &Table, key: &str) -> Option<String> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.contains('[')) {
        return None;
    }
    let mut probe = merged.clone();
    let (last, path) = parts.split_last()?;
    let mut t = &mut probe;
    for p in path {
        t = t.get_mut(*p)?.as_table_mut()?;
    }
    let given = t.get(*last)?.to_string();
    t.insert(last.to_string(), Value::String("\u{1}".into()));
    let e = serde_path_to_error::deserialize::<_, Config>(Value::Table(probe)).err()?;
    let inner = e.inner().to_string();
    let choices = inner.lines().next()?.split_once("expected ")?.1.trim().to_string();
    (e.path().to_string() == key && inner.starts_with("unknown variant")).then(|| format!("{given} is not a name: expected {choices}"))
}

/// serde's `unknown variant `regulr`, expected one of `stride`, ...` with the nearest name
/// before the list (`; did you mean `regular`?`), as for unknown keys and presets: a long list
/// hides the one meant. A name with a `-`-separated part that is the given one or ends with it
/// (`sgemm` in `parboil-sgemm`, `gemm` in `tiled-gemm` and `parboil-sgemm`) is what was meant
/// more often than one a few edits away (`spmv`): those come first, up to three of them
/// (`_names.nearest` applies the same rule to the Python side's names).
fn variant_hint(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("unknown variant `")?;
    let (given, choices) = rest.split_once("`, expected ")?;
    let names: Vec<&str> =
        choices.strip_prefix("one of ").unwrap_or(choices).split(", ").filter_map(|c| c.strip_prefix('`')?.strip_suffix('`')).collect();
    let lower = given.to_ascii_lowercase();
    let parts: Vec<&str> = if lower.len() >= 3 {
        names.iter().copied().filter(|c| c.split('-').any(|p| p == lower || (p.len() > lower.len() && p.ends_with(&*lower)))).collect()
    } else {
        vec![]
    };
    let near = match parts.len() {
        0 => {
            let (_, c) = names.iter().map(|&c| (strsim::levenshtein(&lower, c), c)).filter(|(d, _)| *d <= 3.max(given.len() / 3)).min()?;
            format!("`{c}`")
        }
        1 => format!("`{}`", parts[0]),
        _ => format!("one of {}", parts.iter().take(3).map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")),
    };
    Some(format!("unknown variant `{given}`; did you mean {near}? expected {choices}"))
}

/// `invalid type: ..., expected u32` in the user's terms: `expected an integer` (or `a number`
/// for a float); serde names the Rust type. So does `invalid value: integer `-1`, expected u32`
/// (a negative or too large integer): `-1 is out of range: expected a non-negative integer`.
fn plain_expected(msg: &str) -> Option<String> {
    if let Some(rest) = msg.strip_prefix("invalid value: integer `") {
        let (n, ty) = rest.split_once("`, expected ")?;
        let (lo, hi): (i128, i128) = match ty {
            "u8" => (0, u8::MAX.into()),
            "u16" => (0, u16::MAX.into()),
            "u32" => (0, u32::MAX.into()),
            "u64" | "usize" => (0, u64::MAX.into()),
            "i8" => (i8::MIN.into(), i8::MAX.into()),
            "i16" => (i16::MIN.into(), i16::MAX.into()),
            "i32" => (i32::MIN.into(), i32::MAX.into()),
            "i64" | "isize" => (i64::MIN.into(), i64::MAX.into()),
            _ => return None,
        };
        let bound = match n.parse::<i128>() {
            Ok(v) if v < 0 && lo == 0 => "a non-negative integer".to_string(),
            Ok(v) if v < lo => format!("an integer of at least {lo}"),
            _ => format!("an integer of at most {hi}"),
        };
        return Some(format!("{n} is out of range: expected {bound}"));
    }
    if !msg.starts_with("invalid type: ") {
        return None;
    }
    let (head, ty) = msg.rsplit_once(", expected ")?;
    let what = match ty {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize" => "an integer",
        "f32" | "f64" => "a number",
        _ => return None,
    };
    Some(format!("{head}, expected {what}"))
}

/// The digits of `invalid type: string "123...", expected u64` (an integer TOML could not hold), if that is the error.
fn too_large_integer(msg: &str) -> Option<&str> {
    let rest = msg.strip_prefix("invalid type: string \"")?;
    let (n, tail) = rest.split_once('"')?;
    let integer = tail.starts_with(", expected u") || tail.starts_with(", expected i");
    (integer && is_integer_literal(n)).then_some(n)
}

/// Does `msg` name the dotted key `key` (not as part of a longer key)?
fn mentions(msg: &str, key: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    msg.match_indices(key).any(|(i, _)| {
        !msg[..i].ends_with(part)
            && !msg[i + key.len()..].trim_end_matches('.').starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Numbers too long for any integer the config holds are an f64's full decimal
/// expansion (Rust prints 1e308 with 309 digits): print them as `1e308`.
pub fn compact_numbers(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(i) = rest.find(|c: char| c.is_ascii_digit()) {
        out.push_str(&rest[..i]);
        let t = &rest[i..];
        let len = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let tok = t[..len].trim_end_matches('.');
        match tok.parse::<f64>() {
            Ok(v) if tok.len() > 20 && v.is_finite() => out += &format!("{v:e}"),
            _ => out.push_str(tok),
        }
        rest = &t[tok.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(name: &str, text: &str) -> Source {
        if name.starts_with("preset ") {
            Source::preset(name, text)
        } else {
            Source::user(name, text)
        }
    }

    #[test]
    fn layering_and_overrides() {
        let c = resolve(
            &[src("preset p", "[gpu]\nsms = 8\n[gpu.l1tlb]\nentries = 64\nways = 64\n"), src("my.toml", "[gpu]\nsms = 4\n")],
            &["gpu.core_mhz=720".into(), "translation.page_size=\"2MiB\"".into(), "translation.mode=iommu".into()],
        )
        .unwrap();
        assert_eq!(c.gpu.sms, 4);
        assert_eq!(c.gpu.l1tlb.entries, 64);
        assert_eq!(c.gpu.core_mhz, 720.0);
        assert_eq!(c.translation.page_size.0, 2 << 20);
        assert_eq!(c.translation.mode, super::super::TranslationMode::Iommu);
    }

    #[test]
    fn vmem_backpressure_needs_an_l1_data_cache_and_room() {
        let e = resolve(&[], &["gpu.vmem.backpressure=true".into(), "gpu.l1d.size_bytes=0".into()]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("gpu.vmem.backpressure"));
        assert!(e.message.contains("L1 data cache"), "{e}");
        let e = resolve(&[], &["gpu.vmem.buffer_entries=0".into()]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("gpu.vmem.buffer_entries"));
        assert!(resolve(&[], &["gpu.vmem.backpressure=true".into()]).is_ok());
    }

    #[test]
    fn a_conflict_between_a_preset_and_an_override_names_both() {
        let preset = src("preset p", "[gpu.l1tlb]\nentries = 32\nways = 32\n");
        let e = resolve(&[preset], &["gpu.l1tlb.entries=16".into()]).unwrap_err();
        assert_eq!((e.source.as_deref(), e.key.as_deref()), (Some("preset p"), Some("gpu.l1tlb.ways")));
        assert!(
            e.message.contains("(gpu.l1tlb.entries = 16)") && e.message.ends_with("(in conflict with `gpu.l1tlb.entries` from --set)"),
            "{e}"
        );
        // Both from one source: nothing to add.
        let e = resolve(&[], &["gpu.l1tlb.entries=16".into(), "gpu.l1tlb.ways=32".into()]).unwrap_err();
        assert!(!e.message.contains("in conflict"), "{e}");
    }

    #[test]
    fn a_workload_chosen_by_override_that_a_preset_cannot_run_names_the_override() {
        // The preset's GMMU translation is blamed (it is the key to change), and the --set that chose the
        // workload is named as the other side of the conflict.
        let preset = src("preset p", "[translation]\nmode = \"gmmu\"\n");
        let e = resolve(&[preset], &["workload.kind=\"shootdown\"".into()]).unwrap_err();
        assert_eq!((e.source.as_deref(), e.key.as_deref()), (Some("preset p"), Some("translation.mode")));
        assert!(e.message.ends_with("(in conflict with `workload.kind` from --set)"), "{e}");
    }

    #[test]
    fn a_quoted_number_is_a_type_error_not_out_of_range() {
        // A quoted digit string is a string, whatever its digits: not an integer TOML could not hold.
        for (sources, sets) in [
            (vec![], vec!["multi.gpus=\"4\"".to_string()]),
            (vec![], vec!["sim.seed=\"10\"".to_string()]),
            (vec![src("c.toml", "[multi]\ngpus = \"4\"\n")], vec![]),
            // A big integer, then the same key quoted: the last --set decides.
            (vec![], vec!["sim.seed=9223372036854775808".to_string(), "sim.seed=\"9223372036854775808\"".to_string()]),
        ] {
            let e = resolve(&sources, &sets).unwrap_err();
            assert!(!e.message.contains("out of range"), "{e}");
            assert!(e.message.starts_with("invalid type: string \"") && e.message.ends_with("expected an integer"), "{e}");
        }
        let e = resolve(&[], &["gpu.core_mhz=true".into()]).unwrap_err();
        assert_eq!(e.message, "invalid type: boolean `true`, expected a number", "{e}");
    }

    #[test]
    fn a_number_for_a_named_choice_lists_the_names() {
        let e = resolve(&[], &["uvm.replay_policy=3".into()]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("uvm.replay_policy"));
        assert_eq!(e.message, "3 is not a name: expected one of `block`, `batch`, `batch-flush`, `once`", "{e}");
        let e = resolve(&[src("c.toml", "[uvm.prefetch]\npolicy = false\n")], &[]).unwrap_err();
        assert!(e.message.starts_with("false is not a name: expected one of `none`, `density`"), "{e}");
        assert_eq!(e.source.as_deref(), Some("c.toml"));
    }

    #[test]
    fn a_misspelt_name_gets_the_nearest_one_first() {
        let e = resolve(&[], &["workload.kind=regulr".into()]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("workload.kind"));
        assert!(e.message.starts_with("unknown variant `regulr`; did you mean `regular`? expected one of `stride`,"), "{e}");
        let e = resolve(&[], &["uvm.replay_policy=\"batch_flush\"".into()]).unwrap_err();
        assert!(e.message.starts_with("unknown variant `batch_flush`; did you mean `batch-flush`?"), "{e}");
        // A whole part of a longer name beats a near short one (`sgemm` is 3 edits from `spmv`); several are listed.
        let e = resolve(&[], &["workload.kind=\"sgemm\"".into()]).unwrap_err();
        assert!(e.message.starts_with("unknown variant `sgemm`; did you mean `parboil-sgemm`? expected one of"), "{e}");
        let e = resolve(&[], &["workload.kind=\"GEMM\"".into()]).unwrap_err();
        assert!(e.message.starts_with("unknown variant `GEMM`; did you mean one of `tiled-gemm`, `blas-gemm`, `parboil-sgemm`? "), "{e}");
        // Nothing near: the list alone.
        let e = resolve(&[], &["uvm.replay_policy=\"sometimes\"".into()]).unwrap_err();
        assert_eq!(e.message, "unknown variant `sometimes`, expected one of `block`, `batch`, `batch-flush`, `once`", "{e}");
    }

    #[test]
    fn a_quoted_dotted_key_is_the_dotted_key() {
        let c = resolve(&[src("q.toml", "\"uvm.batch_size\" = 64\n[gpu]\n\"l1tlb.entries\" = 16\n\"l1tlb.ways\" = 16\n")], &[]).unwrap();
        assert_eq!((c.uvm.batch_size, c.gpu.l1tlb.entries, c.gpu.l1tlb.ways), (64, 16, 16));
        // Both forms in one source: an error naming both, as a repeated unquoted key is in TOML.
        for text in ["\"uvm.batch_size\" = 64\nuvm.batch_size = 128\n", "\"uvm.batch_size\" = 64\n[uvm]\nbatch_size = 128\n"] {
            let e = resolve(&[src("q.toml", text)], &[]).unwrap_err();
            assert_eq!((e.source.as_deref(), e.key.as_deref()), (Some("q.toml"), Some("uvm.batch_size")), "{e}");
            assert!(
                e.message.contains("given twice") && e.message.contains("`\"uvm.batch_size\"`") && e.message.contains("`uvm.batch_size`"),
                "{e}"
            );
        }
        let e = resolve(&[src("q.toml", "\"uvm.prefetch\" = 1\n[uvm.prefetch]\npolicy = \"none\"\n")], &[]).unwrap_err();
        // The section's key below it names how the section was written.
        assert_eq!(e.message, "given twice, as `uvm.prefetch.policy` and as `\"uvm.prefetch\"` (a quoted dotted key is the same key)");
        // In different sources it is layering, as for any key.
        let c = resolve(&[src("a.toml", "\"uvm.batch_size\" = 64\n"), src("b.toml", "uvm.batch_size = 128\n")], &[]).unwrap();
        assert_eq!(c.uvm.batch_size, 128);
        let e = resolve(&[src("q.toml", "\"uvm.batch_sise\" = 64\n")], &[]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("uvm.batch_sise"));
        assert!(e.message.contains("did you mean `uvm.batch_size`"), "{e}");
    }

    #[test]
    fn errors_on_list_elements_name_the_source_of_the_list() {
        let e = resolve(&[], &["multi.apps=[\"tracex\"]".into()]).unwrap_err();
        assert_eq!((e.source.as_deref(), e.key.as_deref()), (Some("--set"), Some("multi.apps[0]")), "{e}");
        let e = resolve(&[src("p.toml", "[uvm.advise]\nper_buffer = [\"none\", 3]\n")], &[]).unwrap_err();
        assert_eq!((e.source.as_deref(), e.key.as_deref()), (Some("p.toml"), Some("uvm.advise.per_buffer[1]")), "{e}");
    }

    #[test]
    fn typo_names_nearest_key_and_file() {
        let e = resolve(&[src("a.toml", "[gpu.l1tlb]\nentires = 3\n")], &[]).unwrap_err();
        assert_eq!(e.source.as_deref(), Some("a.toml"));
        assert_eq!(e.key.as_deref(), Some("gpu.l1tlb.entires"));
        assert!(e.message.contains("`gpu.l1tlb.entries`"), "{e}");
        let e = resolve(&[], &["gpu.smss=3".into()]).unwrap_err();
        assert!(e.to_string().contains("did you mean `gpu.sms`"), "{e}");
    }

    #[test]
    fn type_unit_and_range_errors_name_the_key() {
        let e = resolve(&[], &["gpu.dram.latency_ns=10us".into()]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("gpu.dram.latency_ns"));
        assert!(e.message.contains("unit is part of the key"), "{e}");
        let e = resolve(&[], &["translation.page_size=4KB".into()]).unwrap_err();
        assert!(e.message.contains("KiB"), "{e}");
        let e = resolve(&[src("b.toml", "[translation]\nlevels = 3\n")], &[]).unwrap_err();
        assert_eq!((e.source.as_deref(), e.key.as_deref()), (Some("b.toml"), Some("translation.levels")));
        assert!(e.message.contains("one of 4, 5"), "{e}");
        let e = resolve(&[], &["translation.mode=mmu".into()]).unwrap_err();
        assert!(e.message.contains("gmmu") && e.message.contains("iommu"), "{e}");
        let e = resolve(&[src("c.toml", "gpu = 3")], &[]).unwrap_err();
        assert!(e.message.contains("is a section"), "{e}");
        let e = resolve(&[src("d.toml", "[gpu\nsms=1")], &[]).unwrap_err();
        assert!(e.message.contains("not valid TOML"), "{e}");
        // Sizes that would exhaust memory or overflow are refused up front.
        let e = resolve(&[], &["gpu.sms=1000000000".into()]).unwrap_err();
        assert!(e.message.contains("between 1 and 4096"), "{e}");
        let e = resolve(&[], &["gpu.l2tlb.entries=1073741824".into()]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("gpu.l2tlb.entries"));
        let e = resolve(
            &[],
            &[
                "workload.kind=regular".into(),
                "workload.regular.threads=17179869184".into(),
                "workload.regular.bytes_per_thread=\"1GiB\"".into(),
            ],
        )
        .unwrap_err();
        assert!(e.message.contains("64 TiB"), "{e}");
        let e = resolve(&[], &["gpu.sms".into()]).unwrap_err();
        assert!(e.message.contains("key.path=value"), "{e}");
        // Floats out of range print compactly, not as 309 digits.
        let e = resolve(&[], &["gpu.core_mhz=1e308".into()]).unwrap_err();
        assert!(e.message.ends_with("got 1e308"), "{e}");
        let e = resolve(&[], &["gpu.core_mhz=1e-300".into()]).unwrap_err();
        assert!(e.message.ends_with("got 1e-300"), "{e}");
        // Integers beyond TOML's i64 say so, not "invalid type: string".
        for big in ["9223372036854775808", "1180591620717411303424"] {
            let e = resolve(&[], &[format!("sim.seed={big}")]).unwrap_err();
            assert_eq!(e.key.as_deref(), Some("sim.seed"));
            assert!(e.message.starts_with(&format!("{big} is out of range")) && e.message.contains("9223372036854775807"), "{e}");
        }
        assert_eq!(resolve(&[], &["sim.seed=9223372036854775807".into()]).unwrap().sim.seed, i64::MAX as u64);
        let e = resolve(&[], &["sim.seed=-9_223_372_036_854_775_809".into()]).unwrap_err();
        assert!(e.message.starts_with("-9_223_372_036_854_775_809 is out of range"), "{e}");
        let e = resolve(&[], &["uvm.replay_update_put_ratio=101".into()]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("uvm.replay_update_put_ratio"));
        assert!(e.message.contains("0 to 100"), "{e}");
    }

    #[test]
    fn an_error_displays_its_source_key_and_message() {
        let e = resolve(&[src("a.toml", "[gpu]\nsmss = 3\n")], &[]).unwrap_err();
        assert_eq!(e.to_string(), "a.toml: key `gpu.smss`: unknown key; did you mean `gpu.sms`?");
    }

    #[test]
    fn nearest_key_weighs_the_whole_path_and_the_threshold_is_inclusive() {
        // `gpu.l2tlb.entrie` is 1 edit from `gpu.l2tlb.entries`; every other `*.entries` key is 1 edit away by its
        // last segment alone, which costs 1 + 2 = 3, so the full path wins (not the alphabetically first `entries`).
        assert_eq!(nearest_key("gpu.l2tlb.entrie").as_deref(), Some("gpu.l2tlb.entries"));
        // `gpu.smsxyz`: 3 edits from `gpu.sms`, and the limit is max(3, len("smsxyz") / 2) = 3: still suggested.
        assert_eq!(nearest_key("gpu.smsxyz").as_deref(), Some("gpu.sms"));
    }

    #[test]
    fn integer_literals_and_range_messages() {
        assert!(is_integer_literal("1_000") && is_integer_literal("-12") && is_integer_literal("+7"));
        for not in ["1__0", "_1", "1_", "-", "", "1.0", "0x10"] {
            assert!(!is_integer_literal(not), "{not}");
        }
        // A negative value for an unsigned key: non-negative, not "at most".
        let e = resolve(&[], &["gpu.sms=-1".into()]).unwrap_err();
        assert_eq!((e.key.as_deref(), e.message.as_str()), (Some("gpu.sms"), "-1 is out of range: expected a non-negative integer"));
        // Below a signed type's minimum (i8: -128 to 127): "at least".
        assert_eq!(
            plain_expected("invalid value: integer `-200`, expected i8").as_deref(),
            Some("-200 is out of range: expected an integer of at least -128")
        );
        assert_eq!(
            plain_expected("invalid value: integer `300`, expected u8").as_deref(),
            Some("300 is out of range: expected an integer of at most 255")
        );
    }

    #[test]
    fn a_far_variant_gets_no_suggestion() {
        // levenshtein("blockblock", "block") = 5 (five deletions) > max(3, 10 / 3) = 3.
        let e = resolve(&[], &["uvm.replay_policy=blockblock".into()]).unwrap_err();
        assert_eq!(e.message, "unknown variant `blockblock`, expected one of `block`, `batch`, `batch-flush`, `once`", "{e}");
    }

    #[test]
    fn only_numbers_over_20_characters_are_compacted() {
        // 10^20 has 21 digits: compacted; 10^19 (20 digits) is left as written.
        assert_eq!(compact_numbers("got 100000000000000000000."), "got 1e20.");
        assert_eq!(compact_numbers("got 10000000000000000000."), "got 10000000000000000000.");
    }

    #[test]
    fn mentions_needs_the_whole_key() {
        assert!(mentions("(gpu.sms = 3)", "gpu.sms"));
        assert!(mentions("at most gpu.sms.", "gpu.sms"));
        assert!(!mentions("(x.gpu.sms = 3)", "gpu.sms"));
        assert!(!mentions("(gpu.sms_max = 3)", "gpu.sms"));
    }

    #[test]
    fn set_specs_are_trimmed_and_an_empty_segment_is_refused() {
        let c = resolve(&[], &[" gpu.sms = 3 ".into(), "translation.mode = iommu ".into()]).unwrap();
        assert_eq!((c.gpu.sms, c.translation.mode), (3, super::super::TranslationMode::Iommu));
        let e = resolve(&[], &["gpu..sms=1".into()]).unwrap_err();
        assert_eq!((e.source.as_deref(), e.key, e.message.as_str()), (Some("--set"), None, "`gpu..sms=1`: empty key"));
    }

    #[test]
    fn a_quoted_set_key_names_the_same_nested_key_as_in_a_config_file() {
        // Before, the raw text was split at its dots: `"workload.kind"` was refused as the unknown key `"workload`.
        for spec in ["\"workload\".kind=random", "\"workload.kind\"=random", "'workload'.\"kind\" = random"] {
            let c = resolve(&[], &[spec.into()]).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(c.workload.kind, crate::workload::WorkloadKind::Random, "{spec}");
        }
        // The key it records is the plain dotted one, so a later unquoted --set of it still decides.
        let c = resolve(&[], &["\"gpu.sms\"=3".into(), "gpu.sms=5".into()]).unwrap();
        assert_eq!(c.gpu.sms, 5);
        for spec in ["\"gpu..sms\"=1", "\"\"=1"] {
            let e = resolve(&[], &[spec.into()]).unwrap_err();
            assert_eq!((e.source.as_deref(), e.message.as_str()), (Some("--set"), format!("`{spec}`: empty key").as_str()), "{e}");
        }
        // An unbalanced quote is not an empty key: the message says what a key looks like.
        let e = resolve(&[], &["\"gpu.sms=1".into()]).unwrap_err();
        assert!(e.message.starts_with("`\"gpu.sms=1`: `\"gpu.sms` is not a key (a dotted path such as gpu.l1tlb.entries"), "{e}");
        // The front ends' reading of a key (`plain_key`) is this one.
        assert_eq!(plain_key(" 'uvm'.\"batch_size\" ").as_deref(), Ok("uvm.batch_size"));
        assert_eq!(plain_key("\"workload.kind\"").as_deref(), Ok("workload.kind"));
        assert_eq!(plain_key("gpu.sms").as_deref(), Ok("gpu.sms"));
        assert_eq!(plain_key("gpu..sms"), Err("empty key".to_string()));
        assert!(plain_key("\"gpu.sms").is_err());
    }

    #[test]
    fn a_unit_in_a_mhz_value_points_at_the_key_name() {
        let e = resolve(&[], &["gpu.core_mhz=720MHz".into()]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("gpu.core_mhz"));
        assert!(e.message.ends_with("(the unit is part of the key name: give a plain number)"), "{e}");
    }
}
