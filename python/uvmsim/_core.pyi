"""Type stub of ``uvmsim._core``, the Rust binding (``crates/uvmsim-py/src/lib.rs``): mypy and editors read the
compiled module's signatures here. Keep it in step with the ``#[pyfunction]``s there; the test
``test_core_stub_matches_the_module`` compares the names.

``sources`` are ``(name, TOML text, is a preset)`` layers merged in order (as ``uvmsim.sources`` makes them),
``overrides`` ``key.path=value`` strings. Results are JSON text."""

__version__: str
WALL_CLOCK_METRICS: list[str]
TABLE_NAMES: list[str]

class ConfigError(ValueError):
    """Bad simulator input: the message names the source, key and what is accepted."""

class SimulationError(RuntimeError):
    """The simulation failed (deadlock, livelock or an impossible state)."""

class BudgetExceeded(SimulationError):
    """The run handled its ``sim.max_events`` events without finishing."""

def run(sources: list[tuple[str, str, bool]], overrides: list[str]) -> str:
    """Run a simulation; returns the summary as JSON (version, config, metrics). Raises ConfigError,
    SimulationError (BudgetExceeded at ``sim.max_events``) or OSError (an output that cannot be written)."""

def resolve(sources: list[tuple[str, str, bool]], overrides: list[str]) -> str:
    """Validate a config; returns the resolved config as JSON."""

def unread(sources: list[tuple[str, str, bool]], overrides: list[str], keys: list[str]) -> str:
    """The keys of ``keys`` the resolved config does not read in its mode, with the reason, as JSON
    ``{key: why}``. Raises ConfigError like ``resolve``."""

def plain_key(key: str) -> str | None:
    """A ``--set`` key as its plain dotted path (``"workload".kind`` is ``workload.kind``), read as the core reads
    ``--set``; None when the text is not a key."""

def config_reference() -> str:
    """Every config parameter as JSON: ``[{key, default, doc}]``."""

def config_sections() -> str:
    """Every config section as JSON: ``[{key, doc}]``."""

def workloads() -> str:
    """Every workload generator as JSON: ``[{name, description, params}]``."""

def trace_info(path: str) -> str:
    """Summary of a trace file as JSON (accesses, footprint, ...); a bad trace raises ConfigError."""

def trace_record(sources: list[tuple[str, str, bool]], overrides: list[str], out: str) -> str:
    """Record a workload's warp streams to a ``.uvmt`` trace (no simulation); returns the totals as JSON."""

def trace_convert(input: str, out: str, sources: list[tuple[str, str, bool]], overrides: list[str]) -> str:
    """Convert a trace between formats (CSV <-> timed ``.uvmt``, Accel-Sim -> warp ``.uvmt``); returns JSON."""

def _panic_for_test() -> None:
    """For the tests only: a panic on the simulation thread, which must reach Python as a SimulationError."""
