//! `uvmsim._core`: the thin Python binding of the simulator. Converts
//! arguments, releases the GIL while simulating, maps the two error kinds to
//! `ConfigError` (bad input) and `SimulationError` (the run failed; `BudgetExceeded`,
//! a subclass, when it stopped at `sim.max_events`).

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use uvmsim::api::{self, ApiError};
use uvmsim::config::Source;

create_exception!(uvmsim._core, ConfigError, PyValueError, "Bad simulator input: the message names the source, key and what is accepted.");
create_exception!(uvmsim._core, SimulationError, PyRuntimeError, "The simulation failed (deadlock, livelock or an impossible state).");
create_exception!(uvmsim._core, BudgetExceeded, SimulationError, "The run handled its `sim.max_events` events without finishing.");

fn to_sources(s: Vec<(String, String)>) -> Vec<Source> {
    s.into_iter().map(|(name, text)| Source { name, text }).collect()
}

/// Run a simulation. `sources`: (name, TOML text) merged in order; `overrides`:
/// `key.path=value`. Returns the summary as JSON (version, config, metrics).
#[pyfunction]
fn run(py: Python<'_>, sources: Vec<(String, String)>, overrides: Vec<String>) -> PyResult<String> {
    let src = to_sources(sources);
    py.detach(|| api::run_json(&src, &overrides)).map_err(|e| match e {
        ApiError::Config(c) => ConfigError::new_err(c.to_string()),
        ApiError::Sim(s @ uvmsim::sim::SimError::Budget { .. }) => BudgetExceeded::new_err(s.to_string()),
        ApiError::Sim(s) => SimulationError::new_err(s.to_string()),
    })
}

/// Validate a config; returns the resolved config as JSON.
#[pyfunction]
fn resolve(sources: Vec<(String, String)>, overrides: Vec<String>) -> PyResult<String> {
    api::resolve_json(&to_sources(sources), &overrides).map_err(|e| ConfigError::new_err(e.to_string()))
}

/// Every config parameter as JSON: [{key, default, doc}].
#[pyfunction]
fn config_reference() -> String {
    api::reference_json()
}

/// Summary of a trace file as JSON (accesses, footprint, ...); a bad trace raises ConfigError.
#[pyfunction]
fn trace_info(py: Python<'_>, path: String) -> PyResult<String> {
    py.detach(|| api::trace_info_json(&path)).map_err(|e| ConfigError::new_err(e.to_string()))
}

/// Record a workload's warp streams to a .uvmt trace (no simulation); returns the totals as JSON.
#[pyfunction]
fn trace_record(py: Python<'_>, sources: Vec<(String, String)>, overrides: Vec<String>, out: String) -> PyResult<String> {
    let src = to_sources(sources);
    py.detach(|| api::trace_record_json(&src, &overrides, &out)).map_err(|e| ConfigError::new_err(e.to_string()))
}

/// Convert a trace between formats (CSV <-> timed .uvmt, Accel-Sim -> warp .uvmt); returns JSON.
#[pyfunction]
fn trace_convert(py: Python<'_>, input: String, out: String, sources: Vec<(String, String)>, overrides: Vec<String>) -> PyResult<String> {
    let src = to_sources(sources);
    py.detach(|| api::trace_convert_json(&input, &out, &src, &overrides)).map_err(|e| ConfigError::new_err(e.to_string()))
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

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(config_reference, m)?)?;
    m.add_function(wrap_pyfunction!(config_sections, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(trace_record, m)?)?;
    m.add_function(wrap_pyfunction!(trace_convert, m)?)?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add("BudgetExceeded", m.py().get_type::<BudgetExceeded>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("WALL_CLOCK_METRICS", uvmsim::stats::WALL_CLOCK_METRICS.to_vec())?;
    Ok(())
}
