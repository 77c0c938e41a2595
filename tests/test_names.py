"""Counts in messages ("1 run", not "1 runs"), and `--set` keys read as the core reads them."""

from __future__ import annotations

from pathlib import Path

from conftest import Cli
from uvmsim import _core
from uvmsim._names import counted, plain_key


def test_counted_says_one_in_the_singular_and_other_counts_in_the_plural() -> None:
    assert [counted(n, "run") for n in (0, 1, 2, 48)] == ["0 runs", "1 run", "2 runs", "48 runs"]


def test_a_sweep_of_one_run_says_one_run(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text('preset = "kaveri-apu"\n[grid]\n"workload.stride.accesses" = [10]\n')
    assert cli("sweep", "s.toml", "-o", "out", "-q").returncode == 0
    p = cli("sweep", "s.toml", "-o", "out")
    assert p.returncode == 2 and "already holds a sweep (1 run);" in p.stderr, p.stderr
    p = cli("fingerprint", "out", "-o", "fp.json")
    assert p.returncode == 0 and "fingerprint of 1 run and 0 experiments" in p.stdout, (p.stdout, p.stderr)


def test_a_quoted_set_key_is_the_plain_dotted_key_it_names() -> None:
    assert plain_key(" gpu.sms ") == "gpu.sms"
    assert plain_key('"workload".kind') == "workload.kind"
    assert plain_key('"workload.kind"') == "workload.kind"  # one quoted segment with dots: the nested key
    assert plain_key("'uvm'.\"batch_size\"") == "uvm.batch_size"
    # A key TOML cannot read comes back as written: the core names the error.
    assert plain_key('"gpu.sms') == '"gpu.sms'
    assert plain_key("gpu..sms") == "gpu..sms"  # an empty segment: not a key either
    # The core reads them (one reading of a key for `--set` and for the front end's matching).
    assert _core.plain_key('"gpu.sms') is None
    assert _core.plain_key(' "uvm".batch_size ') == "uvm.batch_size"
