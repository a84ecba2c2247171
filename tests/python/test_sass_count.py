"""bench/sass_count.py: per-kernel SASS counts of a CUDA binary without a GPU (cuobjdump and nvdisasm
from the toolkit or PyPI, requirements-dev.txt), read here from the libkiln_quant of a build."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "sass_count.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def quant_library():
    built = sorted(ROOT.glob("build*/kernels/quant/libkiln_quant.so"))
    if not built:
        pytest.skip("no build*/kernels/quant/libkiln_quant.so: build kiln first")
    return built[0]


@pytest.fixture(scope="module")
def gemv8_counts(quant_library):
    done = run(quant_library, "--match", "w4_gemv8_kernel", "--opcodes", "3")
    if "not found" in done.stderr:
        pytest.skip(done.stderr.strip())
    return done


def test_counts_the_kernels_that_match(gemv8_counts):
    done = gemv8_counts
    assert done.returncode == 0, done.stderr
    kernels = [line for line in done.stdout.splitlines() if "w4_gemv8_kernel" in line]
    assert kernels, done.stdout
    for line in kernels:
        assert int(line.split()[0]) > 100, line  # a real kernel body, not a stub
    assert "HFMA2" in done.stdout  # the half2 math, among the most common opcodes


# (gemv8_counts: these tests skip with it where cuobjdump or nvdisasm is missing)
def test_names_what_matched_nothing(quant_library, gemv8_counts):
    done = run(quant_library, "--match", "no_such_kernel")
    assert done.returncode != 0
    assert "no sm_90a kernel of" in done.stderr and "'no_such_kernel'" in done.stderr


def test_names_an_arch_the_binary_lacks(quant_library, gemv8_counts):
    done = run(quant_library, "--arch", "sm_75")
    assert done.returncode != 0
    assert "sm_75" in done.stderr


def test_says_why_a_file_is_not_readable(tmp_path, gemv8_counts):
    text = tmp_path / "not_cuda.txt"
    text.write_text("plain text\n")
    done = run(text)
    assert done.returncode != 0
    assert "cuobjdump failed" in done.stderr
