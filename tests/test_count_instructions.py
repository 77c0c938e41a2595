"""scripts/count_instructions.py (instructions per simulated unit under callgrind): its argument and output
parsing, without valgrind (the counting itself is a developer's measurement, docs/performance.md)."""

from pathlib import Path

import pytest

from conftest import load_script

ci = load_script("count_instructions")


def test_bench_values_become_the_run_examples_toml_literals() -> None:
    # Booleans lower-case, numbers as Python writes them (4/3 keeps its digits), strings quoted
    # (a size such as 4MiB is a string to the config loader, not a bare word).
    assert [ci.toml_literal(v) for v in (True, False, 1 << 20, 4 / 3, "4MiB")] == [
        "true",
        "false",
        "1048576",
        "1.3333333333333333",
        '"4MiB"',
    ]
    with pytest.raises(TypeError):
        ci.toml_literal([1])


def test_callgrind_collected_count_and_run_metrics_are_read() -> None:
    err = "==1== Events    : Ir\n==1== Collected : 130,262,097\n==1==\n==1== I   refs:      130,262,097\n"
    assert ci.collected(err) == 130_262_097
    with pytest.raises(ValueError):
        ci.collected("==1== I   refs: 5\n")
    m = ci.metrics("gpu0.warp_mem_insts = 98304\ngpu1.warp_mem_insts = 2\nsim.events = 36446\nname = x\n")
    # Every GPU's count is summed, as `uvmsim bench` does; a non-number line is skipped.
    assert (ci.all_gpus(m, "warp_mem_insts"), m["sim.events"], "name" in m) == (98306, 36446.0, False)


def test_unknown_workload_or_missing_binary_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ci.main([str(tmp_path / "run"), "--only", "stream-tlb-hit"]) == 2
    assert "unknown workload `stream-tlb-hit`" in capsys.readouterr().err
    assert ci.main([str(tmp_path / "run")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_failed_simulation_is_one_line_naming_it_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = tmp_path / "run"
    binary.write_text("")
    monkeypatch.setattr(ci.shutil, "which", lambda _: "/usr/bin/valgrind")
    stderr = "error: no progress at 5 ns (sim.watchdog_batches)\n==7== \n==7== Events    : Ir\n"
    monkeypatch.setattr(
        ci.subprocess, "run", lambda cmd, **_: ci.subprocess.CompletedProcess(cmd, 1, stdout="", stderr=stderr)
    )
    assert ci.main([str(binary), "--only", "stream-tlb-hits"]) == 1
    # The simulation's last line, not valgrind's summary after it.
    assert capsys.readouterr().err == (
        "count_instructions: stream-tlb-hits: exit 1: error: no progress at 5 ns (sim.watchdog_batches)\n"
    )
    # A run that exits 0 but whose callgrind output has no count (collection never on) is named too.
    monkeypatch.setattr(
        ci.subprocess, "run", lambda cmd, **_: ci.subprocess.CompletedProcess(cmd, 0, stdout="", stderr="==7== x\n")
    )
    assert ci.main([str(binary), "--only", "stream-tlb-hits"]) == 1
    assert "stream-tlb-hits: no `Collected :` line" in capsys.readouterr().err
