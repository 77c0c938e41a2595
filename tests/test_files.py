"""_files: atomic writes, output-path checks and inputs refused as outputs, each pinned by a hand-checked case the
hand mutation audit found missing (docs/testing.md). No simulation; well under a second."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest

import uvmsim
from uvmsim import _files


def test_atomic_write_gives_the_usual_mode_and_writes_through_a_dot_temporary(tmp_path: Path) -> None:
    seen: list[str] = []

    def write(fd: int) -> None:
        seen.extend(p.name for p in tmp_path.iterdir())  # the temporary, while it is being written
        with os.fdopen(fd, "w") as f:
            f.write("{}")

    _files.atomic_write(tmp_path / "r.json", write)
    # A dot file in the target's directory: Parquet dataset readers, load_sweep and a resumed sweep's clean-up
    # (`.*.tmp`) all rely on the leading dot.
    assert len(seen) == 1 and seen[0].startswith(".r.json.") and seen[0].endswith(".tmp"), seen
    # mkstemp makes 0600 files; a result gets 0666 less the umask (0644 under the usual 022), as `open` would.
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o666 & ~_files._UMASK
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_atomic_write_onto_a_directory_names_it_and_keeps_the_errno(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError) as e:
        _files.atomic_write_text(tmp_path / "d", "x")
    # The rename's "[Errno 21] Is a directory: '.d.x1y2.tmp' -> 'd'" reworded to name the output; the errno kept
    # for callers that test it.
    assert str(e.value) == f"{tmp_path / 'd'}: cannot write: Is a directory" and e.value.errno == errno.EISDIR
    assert [p.name for p in tmp_path.iterdir()] == ["d"] and not list((tmp_path / "d").iterdir())


def _deny(monkeypatch: pytest.MonkeyPatch, mode_bit: int) -> None:
    """os.access as _files sees it: ``mode_bit`` denied everywhere. (Running as root, as these tests may, no mode
    bit denies a directory's write or search permission, so chmod cannot set this up.)"""
    real = os.access

    def access(path: Any, mode: int, **kwargs: Any) -> bool:
        return not mode & mode_bit and real(path, mode, **kwargs)

    monkeypatch.setattr(_files.os, "access", access)


def test_check_output_file_needs_write_permission_on_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _deny(monkeypatch, os.W_OK)
    with pytest.raises(PermissionError, match=r"t.json: cannot write: Permission denied$"):
        _files.check_output_file(tmp_path / "t.json")


def test_check_output_dir_needs_write_and_search_permission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without search (x) permission no file can be made inside a directory, even with write permission.
    _deny(monkeypatch, os.X_OK)
    with pytest.raises(OSError, match=r"out: cannot write the output directory: Permission denied$"):
        _files.check_output_dir(tmp_path / "out")


def test_reading_input_names_the_file_once_and_keeps_its_own_errors(tmp_path: Path) -> None:
    d = tmp_path / "sweep"
    with pytest.raises(uvmsim.InputError) as e, _files.reading_input(d, "sweep"):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(d))
    assert str(e.value) == f"sweep `{d}` does not exist"  # the error names the input itself: not twice
    with pytest.raises(uvmsim.InputError) as e, _files.reading_input(d, "sweep"):
        raise _files.InputError("trace `t.csv` is not a regular file")  # already an input error: as it is
    assert str(e.value) == "trace `t.csv` is not a regular file"


def test_inputs_of_has_each_multi_gpu_apps_trace(tmp_path: Path) -> None:
    # multi.apps runs several workloads side by side; a trace kind among them replays workload.trace.path too.
    cfg = {"workload": {"kind": "stream", "trace": {"path": "a.csv"}}, "multi": {"apps": ["fir", "trace"]}}
    assert _files.inputs_of(None, None, cfg) == [("the trace", Path("a.csv"))]
    # An Accel-Sim kernelslist.g names its kernel files beside it, wherever the command runs.
    (tmp_path / "kernelslist.g").write_text("MemcpyHtoD,0x1,4\nkernel-1.traceg\n")
    assert _files.kernel_files(tmp_path / "kernelslist.g") == [tmp_path / "kernel-1.traceg"]


def test_an_input_is_refused_as_output_by_any_name_for_it(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[gpu]\nsms = 4\n")
    os.link(config, tmp_path / "hard.toml")
    for other in (f"{tmp_path}/hard.toml", f"{tmp_path}/./c.toml"):  # a hard link; another spelling
        with pytest.raises(uvmsim.ConfigError, match=re.escape(f"is the config file `{config}` of this command")):
            _files.refuse_input(other, [("the config file", config)])


def test_an_output_directory_is_refused_only_where_it_writes_over_an_input(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text("{}")
    (out / "c.toml").write_text("")

    def writes(name: str) -> bool:
        return name == "sweep.json"

    _files.refuse_input_in_dir(out, [("the config file", out / "c.toml")], writes)  # not a name it writes: fine
    # A spec reached through a link elsewhere is the file the link names, out/sweep.json.
    (tmp_path / "spec.toml").symlink_to(out / "sweep.json")
    with pytest.raises(uvmsim.ConfigError, match=r"would replace the sweep spec `.*spec.toml`: this command writes"):
        _files.refuse_input_in_dir(out, [("the sweep spec", tmp_path / "spec.toml")], writes)


def test_atomic_write_refuses_to_replace_a_fifo(tmp_path: Path) -> None:
    # The rename would put a regular file where the FIFO (or a device, as root: /dev/null) was; every writer
    # goes through atomic_write, not all of them through check_output_file first.
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match=r"f: cannot write: not a regular file \(a device, FIFO or socket"):
        _files.atomic_write_text(fifo, "x")
    assert stat.S_ISFIFO(fifo.stat().st_mode) and [p.name for p in tmp_path.iterdir()] == ["f"]


def test_check_output_file_under_a_file_is_not_a_directory(tmp_path: Path) -> None:
    # The class tells the reason, as the OSError a write would raise (ENOTDIR), not a permission problem.
    (tmp_path / "f").write_text("")
    with pytest.raises(NotADirectoryError, match=r"f/t.json: cannot write: Not a directory$"):
        _files.check_output_file(tmp_path / "f" / "t.json")


def test_check_output_dir_that_is_a_fifo_says_it_is_no_directory(tmp_path: Path) -> None:
    # -o names the node itself ("it is"), not a file above it ("`X` is a file"): a FIFO is no directory either.
    os.mkfifo(tmp_path / "f")
    with pytest.raises(OSError, match=r"f: cannot write the output directory: it is a file, not a directory$"):
        _files.check_output_dir(tmp_path / "f")
