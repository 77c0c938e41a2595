#!/usr/bin/env python3
"""Which global loads a warp has in flight together, read off a kernel's PTX.

GPGPU-Sim (the simulator of seed paged-memory) issues a warp's PTX in order, and
its scoreboard stalls an instruction that reads a register a still-outstanding
load writes. So the loads a warp keeps in flight together are the `ld.global`
(and `tex`) instructions issued before the first use of any of them, and a
kernel model's `Op::Wait` belongs where the PTX first uses a loaded value
(docs/workloads.md, "Load order").

    python scripts/ptx_load_order.py KERNEL.ptx            # read PTX
    python scripts/ptx_load_order.py KERNEL.cu [ARCH]      # compile with NVRTC first
    python scripts/ptx_load_order.py --nvrtc LIB KERNEL.cu [ARCH]   # with another libnvrtc.so

The .cu form needs NVIDIA's NVRTC library from PyPI (the `ptx` extra: `pip install -e
'.[ptx]'`, no GPU or CUDA toolkit needed); it compiles
at NVRTC's default optimisation (-O3) for ARCH (default compute_52). Kernels must
be self-contained (`extern "C" __global__`, their #defines and device helpers).
`--nvrtc` names another NVRTC library, e.g. one from `pip install --no-deps --target DIR
nvidia-cuda-nvrtc-cu11==11.7.99` (DIR/nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2), to see whether a
kernel's order moves with the compiler version (docs/workloads.md, "Load order"). A compiled
listing starts with a `# NVRTC major.minor ARCH` line.

Output, one line per event: `L3 ld.global.f32 ...` (the third load),
`WAIT 1,3 (st.shared.f32)` (the first use of loads 1 and 3), `S ...` (a global
store), `B` (a barrier), branches and labels, and `(n other)` for the
instructions in between. This reads straight-line order only: a load whose
first use is in a later loop iteration shows its WAIT there, and loads on
branches that one thread does not all take (a stencil's halo cases) are
counted as in flight together, which overcounts them.
"""

from __future__ import annotations

import ctypes
import re
import sys
from pathlib import Path

REG = re.compile(r"%[a-z]+[0-9]+")
# Instructions without a destination register: every register they name is read.
NO_DEST = ("st.", "red.", "bar", "bra", "ret", "exit", "membar", "fence", "prefetch")
LOADS = ("ld.global", "tex.", "ldu.global")
STORES = ("st.global", "red.global", "atom.global")


def instructions(ptx: str) -> list[str]:
    """The PTX's instructions and labels, comments and directives dropped."""
    out = []
    for raw in ptx.splitlines():
        line = raw.split("//")[0].strip()
        if not line or line.startswith(".") or line in ("{", "}", "(", ")"):
            continue
        out.append(line)
    return out


def split(ins: str) -> tuple[str, str, list[str], list[str]]:
    """(predicate, opcode, destination registers, source registers) of one instruction."""
    ins = ins.rstrip(";").strip()
    pred = ""
    if ins.startswith("@"):
        pred, ins = ins.split(None, 1)
    op, _, args = ins.partition(" ")
    args = args.strip()
    if op.startswith(NO_DEST) or not args:
        dest: list[str] = []
    elif args.startswith("{"):
        dest = REG.findall(args.split("}", 1)[0])
    else:
        dest = REG.findall(args.split(",", 1)[0])
    srcs = [r for r in REG.findall(args) if r not in dest] + REG.findall(pred)
    return pred, op, dest, srcs


def load_order(ptx: str) -> list[str]:
    """The events of the module doc, in PTX order."""
    out: list[str] = []
    pending: dict[str, int] = {}
    other = loads = 0

    def flush() -> None:
        nonlocal other
        if other:
            out.append(f"    ({other} other)")
            other = 0

    for ins in instructions(ptx):
        if ins.endswith(":"):
            flush()
            out.append(ins)
            continue
        pred, op, dest, srcs = split(ins)
        used = sorted({pending[r] for r in srcs if r in pending})
        if used:
            flush()
            out.append(f"  WAIT {','.join(map(str, used))} ({op})")
            # A load's registers (a vector load has several) all arrive with it.
            for r in [r for r, n in pending.items() if n in used]:
                del pending[r]
        text = ins.rstrip(";")
        if op.startswith(LOADS):
            flush()
            loads += 1
            for r in dest:
                pending[r] = loads
            out.append(f"L{loads} {text}")
        elif op.startswith(STORES):
            flush()
            out.append(f"S {text}")
        elif op.startswith("bar"):
            flush()
            out.append(f"B {text}")
        elif op.startswith(("bra", "ret", "exit")):
            flush()
            out.append(f"  {text}")
        elif not used:
            other += 1
    flush()
    return out


class BadInput(Exception):
    """A source NVRTC cannot compile, or NVRTC missing: reported with exit code 2."""


def nvrtc_library(lib_path: str | None) -> ctypes.CDLL:
    """The NVRTC library: LIB_PATH, or the one of the nvidia-cuda-nvrtc-cu12 wheel."""
    if lib_path is not None:
        if not Path(lib_path).is_file():
            raise BadInput(f"{lib_path}: no such NVRTC library")
        try:
            return ctypes.CDLL(lib_path)
        except OSError as e:
            raise BadInput(f"{lib_path}: not a loadable NVRTC library ({e})") from None
    try:
        import nvidia.cuda_nvrtc  # type: ignore[import-not-found]
    except ImportError:
        msg = "compiling .cu needs NVRTC: pip install -e '.[ptx]' (nvidia-cuda-nvrtc-cu12); or pass a .ptx file"
        raise BadInput(msg) from None
    libdir = Path(list(nvidia.cuda_nvrtc.__path__)[0]) / "lib"
    return ctypes.CDLL(str(next(libdir.glob("libnvrtc.so.*"))))


def compile_cuda(path: Path, arch: str, lib_path: str | None = None) -> tuple[str, str]:
    """PTX of a CUDA source compiled by NVRTC, and NVRTC's version ("12.9")."""
    lib = nvrtc_library(lib_path)
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    prog = ctypes.c_void_p()
    src = path.read_text().encode()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, path.name.encode(), 0, None, None):
        raise BadInput(f"{path}: NVRTC could not create the program")
    opts = [f"--gpu-architecture={arch}".encode(), b"-default-device"]
    status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    if status:
        raise BadInput(f"{path}: compilation failed\n{log.value.decode()}")
    lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetPTX(prog, ptx)
    return ptx.value.decode(), f"{major.value}.{minor.value}"


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    lib_path = None
    if argv[0] == "--nvrtc":
        if len(argv) < 3:
            print("--nvrtc needs a library and a KERNEL.cu", file=sys.stderr)
            return 2
        lib_path, argv = argv[1], argv[2:]
    path = Path(argv[0])
    if not path.is_file():
        print(f"{path}: no such file", file=sys.stderr)
        return 2
    try:
        arch = argv[1] if len(argv) > 1 else "compute_52"
        if path.suffix == ".cu":
            ptx, version = compile_cuda(path, arch, lib_path)
            print(f"# NVRTC {version} {arch}")
        else:
            ptx = path.read_text()
    except (BadInput, UnicodeDecodeError) as e:
        print(f"{path}: {e}" if isinstance(e, UnicodeDecodeError) else e, file=sys.stderr)
        return 2
    print("\n".join(load_order(ptx)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
