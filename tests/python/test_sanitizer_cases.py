"""bench/contraction/sanitizer_cases.py computes the expected outputs of its kiln.QuantLinear cases
with its own numpy decoder of the 4-bit weights (NVFP4, INT4). Here kiln's CPU backend, which runs
the operator's reference expression (src/ops/QuantLinear.cpp), must agree with them on the small
shapes, so that a GPU failure in those cases means the GPU kernel is wrong, not the expectation.
Needs the kiln binary (see gemma_model.kiln_binary)."""
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from gemma_model import kiln_binary

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench" / "contraction"))
import sanitizer_cases  # noqa: E402


def test_quantlinear_expectations_match_the_cpu_backend(tmp_path):
    binary = kiln_binary()
    if binary is None:
        pytest.skip("no kiln binary (build kiln, or set KILN_BINARY)")
    rng = np.random.default_rng(7)
    for t in (sanitizer_cases.F16, sanitizer_cases.BF16):
        sanitizer_cases.quant_cases(tmp_path, rng, str(binary), t, shapes=((1, 192, 256), (5, 64, 512)))
    cases = sorted(p.name for p in tmp_path.iterdir())
    assert len(cases) == 8, cases
    run = subprocess.run([str(binary), "test-onnx", str(tmp_path), "--backend", "cpu", "-v"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "8 passed, 0 failed, 0 skipped" in run.stdout, run.stdout[-3000:]


def test_a_wrong_scale_decoder_is_caught(tmp_path, monkeypatch):
    """The comparison above can fail: a decoder 2% off in its E4M3 scales fails every NVFP4 case."""
    binary = kiln_binary()
    if binary is None:
        pytest.skip("no kiln binary (build kiln, or set KILN_BINARY)")
    decode = sanitizer_cases.decode_e4m3
    monkeypatch.setattr(sanitizer_cases, "decode_e4m3", lambda bits: decode(bits) * 1.02)
    monkeypatch.setattr(sanitizer_cases, "QUANT", [q for q in sanitizer_cases.QUANT if q[0] == "nvfp4"])
    sanitizer_cases.quant_cases(tmp_path, np.random.default_rng(7), str(binary), sanitizer_cases.F16, shapes=((5, 192, 256),))
    run = subprocess.run([str(binary), "test-onnx", str(tmp_path), "--backend", "cpu"], capture_output=True, text=True)
    assert "0 passed, 1 failed" in run.stdout, run.stdout[-3000:]


def test_conv_expectations_use_the_parameters_the_model_holds(tmp_path):
    """Each conv case's expected output, recomputed in float64 from the initializers and the input
    its files hold, is the output its files hold: the expectation and the model share their values
    (before session 26 the BatchNorm scale and mean entered the expectation unrounded, and a GPU
    result 2 ulp off the expectation failed a case on new random data, run s26e)."""
    import onnx
    from onnx import numpy_helper

    def read(path):
        t = onnx.TensorProto()
        t.ParseFromString(path.read_bytes())
        return numpy_helper.to_array(t).astype(np.float64)

    for t in (sanitizer_cases.F16, sanitizer_cases.BF16):
        sanitizer_cases.conv_cases(tmp_path, np.random.default_rng(26), t)
    cases = sorted(tmp_path.iterdir())
    assert len(cases) == 2 * len(sanitizer_cases.CONV_CASES)
    for case in cases:
        model = onnx.load(str(case / "model.onnx"))
        p = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
        conv = next(n for n in model.graph.node if n.op_type == "Conv")
        a = {x.name: onnx.helper.get_attribute_value(x) for x in conv.attribute}
        t = model.graph.output[0].type.tensor_type.elem_type
        x = read(case / "test_data_set_0" / "input_0.pb")
        bc = [1, -1] + [1] * (x.ndim - 2)
        c = sanitizer_cases.round_to(sanitizer_cases.conv_reference(x, p["w"], p["b"], a["strides"], a["pads"], a["dilations"], a["group"]), t)
        bn = (c - p["mean"].reshape(bc)) / np.sqrt(p["var"].reshape(bc) + 1e-5) * p["scale"].reshape(bc) + p["shift"].reshape(bc)
        expected = np.maximum(sanitizer_cases.round_to(bn, t), 0)
        np.testing.assert_array_equal(read(case / "test_data_set_0" / "output_0.pb"), expected, err_msg=case.name)
