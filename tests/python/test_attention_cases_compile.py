"""Every attention case of the installed onnx wheel (the opset 23/24 Attention op and its function
expansion) through `kiln compile --target sm_90 --no-build`: the CUDA lowering, with the fused
attention matcher (src/lower/TemplateAttention.cpp), ends in sources or in a clear error, never in a
crash. (The matcher once read a Select it had just released; the CUDA conformance run of these
cases crashed.) Needs the kiln binary (see gemma_model.kiln_binary)."""
import subprocess

import pytest

from gemma_model import kiln_binary


def attention_cases():
    try:
        from onnx.backend.test.case.node import collect_testcases
    except ImportError:
        return []
    return [case for case in collect_testcases(None) if case.name.startswith("test_attention")]


def test_attention_cases_compile_for_cuda_or_fail_cleanly(tmp_path):
    binary = kiln_binary()
    if binary is None:
        pytest.skip("no kiln binary (build kiln, or set KILN_BINARY)")
    cases = attention_cases()
    if not cases:
        pytest.skip("this onnx wheel defines no attention node cases")
    compiled, refused = 0, []
    for case in cases:
        model = tmp_path / f"{case.name}.onnx"
        model.write_bytes(case.model.SerializeToString())
        run = subprocess.run([str(binary), "compile", str(model), "-o", str(tmp_path / case.name), "--target", "sm_90", "--no-build"],
                             capture_output=True, text=True)
        assert run.returncode >= 0, f"{case.name}: kiln died of signal {-run.returncode}\n{run.stderr[-2000:]}"
        if run.returncode == 0:
            assert (tmp_path / case.name).is_dir(), case.name
            compiled += 1
        else:
            assert "kiln: error" in run.stderr, f"{case.name}: exit {run.returncode} without an error message\n{run.stderr[-2000:]}"
            refused.append(case.name)
    assert compiled > len(cases) // 2, f"only {compiled} of {len(cases)} attention cases compiled; refused: {refused}"
