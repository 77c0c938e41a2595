//! `uvmsim._core`: the thin Python binding of the simulator. Converts
//! arguments, releases the GIL while simulating, maps the two error kinds to
//! `ConfigError` (bad input) and `SimulationError` (the run failed; `BudgetExceeded`,
//! a subclass, when it stopped at `sim.max_events`).

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use uvmsim::api::{self, ApiError};
use uvmsim::config::Source;

create_exception!(uvmsim._core, ConfigError, PyValueError, "Bad simulator input: the message names the source, key and what is accepted.");
create_exception!(uvmsim._core, SimulationError, PyRuntimeError, "The simulation failed (deadlock, livelock or an impossible state).");
create_exception!(uvmsim._core, BudgetExceeded, SimulationError, "The run handled its `sim.max_events` events without finishing.");

/// `(name, TOML text, is a preset)` layers, as `uvmsim.sources` makes them.
fn to_sources(s: Vec<(String, String, bool)>) -> Vec<Source> {
    s.into_iter().map(|(name, text, preset)| if preset { Source::preset(name, text) } else { Source::user(name, text) }).collect()
}

/// Run `f` without the GIL on a thread of its own while this thread checks for signals every
/// 50 ms: Ctrl-C (a KeyboardInterrupt from the interpreter's handler; the CLI's SIGTERM handler
/// raises one too) sets the work's interrupt flag (`uvmsim::sim::with_cancel`), waits for it to
/// stop, and raises the exception. Without this, a signal was handled only when the simulation
/// (or a trace loop over GBs) returned, minutes later. Used by every call that can take long:
/// `run`, `trace_record`, `trace_info`, `trace_convert`.
fn interruptible<T: Send + 'static>(py: Python<'_>, f: impl FnOnce() -> T + Send + 'static) -> PyResult<T> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;
    let flag = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let worker_flag = Arc::clone(&flag);
    // The simulator was written for a main thread's stack; a spawned thread gets 2 MiB by default.
    let worker = std::thread::Builder::new()
        .name("uvmsim".into())
        .stack_size(64 << 20)
        .spawn(move || {
            let _ = tx.send(uvmsim::sim::with_cancel(worker_flag, f));
        })
        .map_err(|e| SimulationError::new_err(format!("cannot start the simulation thread: {e}")))?;
    // A panic in the simulator is a bug, not bad input: it reaches Python as a SimulationError naming it
    // (pyo3's PanicException is a BaseException, which `except Exception` and a sweep's error handling miss).
    let finish = |worker: std::thread::JoinHandle<()>| -> PyResult<()> {
        worker.join().map_err(|panic| {
            let what = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned());
            SimulationError::new_err(format!(
                "internal error (a bug in uvmsim; please report it with the config): {}",
                what.unwrap_or_else(|| "panic".into())
            ))
        })
    };
    let mut rx = rx;
    loop {
        // The receiver moves into the GIL-free closure and back (it is Send, not Sync).
        let (got, back) = py.detach(move || (rx.recv_timeout(Duration::from_millis(50)), rx));
        rx = back;
        match got {
            Ok(v) => {
                py.detach(|| finish(worker))?;
                return Ok(v);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                py.detach(|| finish(worker))?;
                unreachable!("the worker sends its result before it ends, or panics");
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    flag.store(true, Ordering::Relaxed);
                    // The work stops at its next check; its result (an interrupted error) is dropped.
                    // The interrupt is what the caller asked for; a panic while stopping is dropped with the result.
                    let _ = py.detach(move || {
                        let _ = rx.recv();
                        finish(worker)
                    });
                    return Err(e);
                }
            }
        }
    }
}

/// Run a simulation. `sources`: (name, TOML text, is a preset) merged in order; `overrides`:
/// `key.path=value`. Returns the summary as JSON (version, config, metrics).
#[pyfunction]
fn run(py: Python<'_>, sources: Vec<(String, String, bool)>, overrides: Vec<String>) -> PyResult<String> {
    let src = to_sources(sources);
    interruptible(py, move || api::run_json(&src, &overrides))?.map_err(|e| match e {
        ApiError::Config(c) => ConfigError::new_err(c.to_string()),
        ApiError::Sim(s @ uvmsim::sim::SimError::Budget { .. }) => BudgetExceeded::new_err(s.to_string()),
        ApiError::Sim(s) => SimulationError::new_err(s.to_string()),
        ApiError::Output(m) => PyOSError::new_err(m),
    })
}

/// The keys of `keys` that the configuration of `sources` and `overrides` does not read in its mode,
/// with the reason: `{"key": "why"}` as JSON (`uvmsim reproduce --set` leaves them out of such runs).
#[pyfunction]
fn unread(sources: Vec<(String, String, bool)>, overrides: Vec<String>, keys: Vec<String>) -> PyResult<String> {
    api::unread_json(&to_sources(sources), &overrides, &keys).map_err(|e| ConfigError::new_err(e.to_string()))
}

/// Validate a config; returns the resolved config as JSON.
#[pyfunction]
fn resolve(sources: Vec<(String, String, bool)>, overrides: Vec<String>) -> PyResult<String> {
    api::resolve_json(&to_sources(sources), &overrides).map_err(|e| ConfigError::new_err(e.to_string()))
}

/// A `--set` key as its plain dotted path (`"workload".kind` -> `workload.kind`), read as the core reads
/// `--set`; None when the text is not a key (the core names the error when the key is used).
#[pyfunction]
fn plain_key(key: &str) -> Option<String> {
    api::plain_key(key).ok()
}

/// Every config parameter as JSON: [{key, default, doc}].
#[pyfunction]
fn config_reference() -> String {
    api::reference_json()
}

/// Summary of a trace file as JSON (accesses, footprint, ...); a bad trace raises ConfigError.
#[pyfunction]
fn trace_info(py: Python<'_>, path: String) -> PyResult<String> {
    interruptible(py, move || api::trace_info_json(&path))?.map_err(|e| ConfigError::new_err(e.to_string()))
}

/// Record a workload's warp streams to a .uvmt trace (no simulation); returns the totals as JSON.
#[pyfunction]
fn trace_record(py: Python<'_>, sources: Vec<(String, String, bool)>, overrides: Vec<String>, out: String) -> PyResult<String> {
    let src = to_sources(sources);
    // An OUT that cannot be written is an OSError (the CLI's exit code 1), not bad input.
    interruptible(py, move || api::trace_record_json(&src, &overrides, &out))?.map_err(|e| match e {
        ApiError::Output(m) => PyOSError::new_err(m),
        e => ConfigError::new_err(e.to_string()),
    })
}

/// Convert a trace between formats (CSV <-> timed .uvmt, Accel-Sim -> warp .uvmt); returns JSON.
#[pyfunction]
fn trace_convert(
    py: Python<'_>,
    input: String,
    out: String,
    sources: Vec<(String, String, bool)>,
    overrides: Vec<String>,
) -> PyResult<String> {
    let src = to_sources(sources);
    // Interrupted, it leaves no OUT: the temporary file is removed before the KeyboardInterrupt is raised.
    // A malformed IN is bad input (ConfigError); an OUT that cannot be written, even mid-way, an OSError (the
    // CLI's exit code 1).
    interruptible(py, move || api::trace_convert_json(&input, &out, &src, &overrides))?.map_err(|e| match e {
        ApiError::Output(m) => PyOSError::new_err(m),
        e => ConfigError::new_err(e.to_string()),
    })
}

/// Every config section as JSON: [{key, doc}].
#[pyfunction]
fn config_sections() -> String {
    api::sections_json()
}

/// Every workload generator as JSON: [{name, description, params}].
#[pyfunction]
fn workloads() -> String {
    api::workloads_json()
}

/// For the tests only: a panic on the simulation thread, which must reach Python as a SimulationError.
#[pyfunction]
fn _panic_for_test(py: Python<'_>) -> PyResult<()> {
    interruptible::<()>(py, || panic!("a deliberate panic for the tests"))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(plain_key, m)?)?;
    m.add_function(wrap_pyfunction!(unread, m)?)?;
    m.add_function(wrap_pyfunction!(config_reference, m)?)?;
    m.add_function(wrap_pyfunction!(config_sections, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(trace_record, m)?)?;
    m.add_function(wrap_pyfunction!(trace_convert, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add("BudgetExceeded", m.py().get_type::<BudgetExceeded>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("WALL_CLOCK_METRICS", uvmsim::stats::WALL_CLOCK_METRICS.to_vec())?;
    m.add("TABLE_NAMES", uvmsim::api::TABLE_NAMES.to_vec())?;
    Ok(())
}
