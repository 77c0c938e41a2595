"""The PTX reader behind docs/workloads.md's "Load order" (scripts/ptx_load_order.py), on hand-written PTX."""

import subprocess
import sys

from conftest import SCRIPTS, load_script

SCRIPT = SCRIPTS / "ptx_load_order.py"
plo = load_script("ptx_load_order")

# A load stored to shared memory at once (one in flight), two loads used together by an fma
# (two in flight), a vector load, a predicated use, a barrier and a store.
PTX = """
.visible .entry k(
    .param .u64 k_param_0
)
{
    .reg .f32 %f<9>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [k_param_0];   // a parameter, not a global load
    ld.global.f32 %f1, [%rd1];
    st.shared.f32 [%rd2], %f1;
    bar.sync 0;
    ld.global.f32 %f2, [%rd1+4];
    ld.global.nc.f32 %f3, [%rd1+8];
    add.s64 %rd3, %rd1, 16;
    fma.rn.f32 %f4, %f2, %f3, %f4;
    ld.global.v2.f32 {%f5, %f6}, [%rd3];
    setp.gt.f32 %p1, %f6, %f4;
    @%p1 bra $L__BB0_2;
    st.global.f32 [%rd3], %f5;
$L__BB0_2:
    ret;
}
"""


def test_each_load_waits_where_its_value_is_first_used():
    assert plo.load_order(PTX) == [
        "    (1 other)",
        "L1 ld.global.f32 %f1, [%rd1]",
        "  WAIT 1 (st.shared.f32)",
        "B bar.sync 0",
        "L2 ld.global.f32 %f2, [%rd1+4]",
        "L3 ld.global.nc.f32 %f3, [%rd1+8]",
        "    (1 other)",
        "  WAIT 2,3 (fma.rn.f32)",
        "L4 ld.global.v2.f32 {%f5, %f6}, [%rd3]",
        # Both registers of the vector load arrive with it: the store of %f5 does not wait again.
        "  WAIT 4 (setp.gt.f32)",
        "  @%p1 bra $L__BB0_2",
        "S st.global.f32 [%rd3], %f5",
        "$L__BB0_2:",
        "  ret",
    ]


def test_destinations_and_sources():
    assert plo.split("ld.global.v2.f32 {%f5, %f6}, [%rd3];") == ("", "ld.global.v2.f32", ["%f5", "%f6"], ["%rd3"])
    assert plo.split("st.global.f32 [%rd3], %f5;") == ("", "st.global.f32", [], ["%rd3", "%f5"])
    assert plo.split("@%p1 bra $L;") == ("@%p1", "bra", [], ["%p1"])


def test_a_missing_file_is_exit_code_2(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "none.ptx")], capture_output=True, text=True)
    assert r.returncode == 2 and "no such file" in r.stderr
    f = tmp_path / "k.ptx"
    f.write_text(PTX)
    r = subprocess.run([sys.executable, str(SCRIPT), str(f)], capture_output=True, text=True)
    assert r.returncode == 0 and "WAIT 2,3" in r.stdout


def test_a_source_that_does_not_compile_is_exit_code_2(tmp_path):
    # With NVRTC installed (the `ptx` extra) the compiler's error; without it, the install hint: code 2 either way.
    f = tmp_path / "bad.cu"
    f.write_text('extern "C" __global__ void k(float *a) { a[0] = undeclared; }\n')
    r = subprocess.run([sys.executable, str(SCRIPT), str(f)], capture_output=True, text=True)
    assert r.returncode == 2 and ("compilation failed" in r.stderr or "needs NVRTC" in r.stderr), r.stderr
    b = tmp_path / "binary.ptx"
    b.write_bytes(bytes(range(128, 256)))
    r = subprocess.run([sys.executable, str(SCRIPT), str(b)], capture_output=True, text=True)
    assert r.returncode == 2 and "codec" in r.stderr


def test_nvrtc_names_a_library_and_a_bad_one_is_exit_code_2(tmp_path):
    f = tmp_path / "k.cu"
    f.write_text('extern "C" __global__ void k(float *a) { a[0] = a[1]; }\n')
    run = [sys.executable, str(SCRIPT), "--nvrtc"]
    r = subprocess.run([*run, str(tmp_path / "libnvrtc.so.0"), str(f)], capture_output=True, text=True)
    assert r.returncode == 2 and "no such NVRTC library" in r.stderr, r.stderr
    junk = tmp_path / "libjunk.so"
    junk.write_text("not a library")
    r = subprocess.run([*run, str(junk), str(f)], capture_output=True, text=True)
    assert r.returncode == 2 and "not a loadable NVRTC library" in r.stderr, r.stderr
    r = subprocess.run([*run, str(junk)], capture_output=True, text=True)
    assert r.returncode == 2 and "needs a library and a KERNEL.cu" in r.stderr


def test_a_compiled_listing_names_its_nvrtc():
    try:
        import nvidia.cuda_nvrtc  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        import pytest

        pytest.skip("NVRTC (the `ptx` extra) is not installed")
    ptx, version = plo.compile_cuda(SCRIPT.parent.parent / "tests" / "data" / "ptx" / "copy.cu", "compute_52")
    assert ".entry copy" in ptx and version.count(".") == 1
    # One load, waited for by the store of its value.
    events = [line.split()[0] for line in plo.load_order(ptx) if not line.lstrip().startswith("(")]
    assert events == ["L1", "WAIT", "S", "ret"], plo.load_order(ptx)
