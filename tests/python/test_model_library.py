"""Model libraries (`kiln compile --model`) on the CPU: a Gemma-MLP-like block generated here with
the onnx package (fp32 initializers and Constant nodes: RMSNorm, gate/up projections, tanh-GELU,
down projection, residual) is compiled to a model library and called with only its graph input,
through kiln.load, tvm_ffi.load_module and the example C++ application (examples/cpp, built
against the installed package by scripts/test.sh, $KILN_EXAMPLE_RUN_MODEL), against a NumPy
reference and the CPU backend's outputs (kiln compile --reference). Also: a model with a 1 GiB
weight runs from the memory-mapped weights file with no second copy in host memory (RSS)."""
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
from gemma_model import kiln_binary

onnx = pytest.importorskip("onnx", reason="the onnx package builds the test models")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HIDDEN, INTER = 64, 256


def gemma_mlp_weights():
    rng = np.random.default_rng(7)
    return {
        "norm_weight": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "w_gate": (rng.standard_normal((HIDDEN, INTER)) / 8).astype(np.float32),
        "w_up": (rng.standard_normal((HIDDEN, INTER)) / 8).astype(np.float32),
        "w_down": (rng.standard_normal((INTER, HIDDEN)) / 16).astype(np.float32),
    }


def scalar_constant(name, value):
    return helper.make_node("Constant", [], [name], name=name + "_node",
                            value=numpy_helper.from_array(np.array(value, np.float32), name))


def make_gemma_mlp(path):
    w = gemma_mlp_weights()
    nodes = [
        scalar_constant("two", 2.0), scalar_constant("eps", 1e-6), scalar_constant("half", 0.5),
        scalar_constant("one", 1.0), scalar_constant("c", 0.044715), scalar_constant("three", 3.0),
        scalar_constant("k", float(np.sqrt(2 / np.pi))),
        helper.make_node("Pow", ["x", "two"], ["sq"], name="rms_pow"),
        helper.make_node("ReduceMean", ["sq"], ["ms"], name="rms_mean", axes=[-1], keepdims=1),
        helper.make_node("Add", ["ms", "eps"], ["ms_eps"], name="rms_add"),
        helper.make_node("Sqrt", ["ms_eps"], ["rms"], name="rms_sqrt"),
        helper.make_node("Div", ["x", "rms"], ["xr"], name="rms_div"),
        helper.make_node("Mul", ["xr", "norm_weight"], ["xn"], name="rms_scale"),
        helper.make_node("MatMul", ["xn", "w_gate"], ["gate"], name="gate_proj"),
        helper.make_node("MatMul", ["xn", "w_up"], ["up"], name="up_proj"),
        helper.make_node("Pow", ["gate", "three"], ["g3"], name="gelu_cube"),
        helper.make_node("Mul", ["g3", "c"], ["g3c"], name="gelu_scale"),
        helper.make_node("Add", ["gate", "g3c"], ["inner"], name="gelu_inner"),
        helper.make_node("Mul", ["inner", "k"], ["inner_k"], name="gelu_k"),
        helper.make_node("Tanh", ["inner_k"], ["t"], name="gelu_tanh"),
        helper.make_node("Add", ["t", "one"], ["t1"], name="gelu_one"),
        helper.make_node("Mul", ["gate", "t1"], ["gt"], name="gelu_mul"),
        helper.make_node("Mul", ["gt", "half"], ["gelu"], name="gelu_half"),
        helper.make_node("Mul", ["gelu", "up"], ["h"], name="gated"),
        helper.make_node("MatMul", ["h", "w_down"], ["down"], name="down_proj"),
        helper.make_node("Add", ["x", "down"], ["y"], name="residual"),
    ]
    graph = helper.make_graph(
        nodes, "gemma_mlp_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
        [numpy_helper.from_array(a, n) for n, a in w.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))


def reference(x):
    w = {n: a.astype(np.float64) for n, a in gemma_mlp_weights().items()}
    x = x.astype(np.float64)
    xn = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6) * w["norm_weight"]
    gate, up = xn @ w["w_gate"], xn @ w["w_up"]
    gelu = 0.5 * gate * (1 + np.tanh(np.sqrt(2 / np.pi) * (gate + 0.044715 * gate**3)))
    return x + (gelu * up) @ w["w_down"]


def compile_model(model, out, *extra):
    binary = kiln_binary()
    if binary is None:
        pytest.skip("no kiln binary (build kiln, or set KILN_BINARY)")
    run = subprocess.run([binary, "compile", str(model), "-o", str(out), "--target", "cpu", "--model", *extra],
                         capture_output=True, text=True)
    assert run.returncode == 0, f"kiln compile --model failed:\n{run.stdout}\n{run.stderr}"
    return run.stdout


@pytest.fixture(scope="module")
def gemma_library(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gemma_model_library")
    make_gemma_mlp(folder / "gemma_mlp_block.onnx")
    log = compile_model(folder / "gemma_mlp_block.onnx", folder / "out", "--reference")
    # 3 matrices in the file and the norm weight compiled in (256 bytes); the 7 Constant scalars are
    # literals in the generated code, so the library holds none of them.
    assert "4 weight(s): 256 bytes compiled in, 196608 bytes in" in log, log
    return folder / "out" / "libgemma_mlp_block.so"


def test_kiln_load_calls_main_with_graph_inputs_only(gemma_library):
    lib = kiln.load(str(gemma_library))
    assert list(lib.functions) == ["main"]
    assert lib.main.signature == ("main(x: Tensor([batch, seq, 64], float32)) -> "
                                  "(y: Tensor([batch, seq, 64], float32))")
    for shape in [(1, 1, HIDDEN), (2, 5, HIDDEN), (3, 17, HIDDEN)]:
        x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        y = np.full(shape, np.nan, np.float32)
        lib.main(x, y)
        np.testing.assert_allclose(y, reference(x), rtol=1e-4, atol=1e-4, err_msg=f"shape {shape}")


def test_matches_the_cpu_backend(gemma_library):
    folder = gemma_library.parent / "reference"
    x = np.fromfile(folder / "input_0.bin", np.float32).reshape(2, 2, HIDDEN)
    want = np.fromfile(folder / "output_0.bin", np.float32).reshape(2, 2, HIDDEN)
    y = np.full_like(want, np.nan)
    kiln.load(str(gemma_library)).main(x, y)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_wrong_input_names_the_argument(gemma_library):
    lib = kiln.load(str(gemma_library))
    with pytest.raises(ValueError, match=r"x"):
        lib.main(np.zeros((2, 3, 32), np.float32), np.zeros((2, 3, 64), np.float32))
    with pytest.raises(TypeError, match=r"takes 2"):
        lib.main(np.zeros((2, 3, 64), np.float32), np.zeros((2, 3, 64), np.float32), np.zeros((2, 3, 64), np.float32))


def test_outputs_are_allocated_when_not_given(gemma_library):
    x = np.random.default_rng(11).standard_normal((2, 7, HIDDEN)).astype(np.float32)
    y = kiln.load(str(gemma_library)).main(x)
    assert isinstance(y, np.ndarray) and y.shape == (2, 7, HIDDEN) and y.dtype == np.float32
    np.testing.assert_allclose(y, reference(x), rtol=1e-4, atol=1e-4)


def test_tvm_ffi_load_module(gemma_library):
    tvm_ffi = pytest.importorskip("tvm_ffi", reason="apache-tvm-ffi is not installed; TVM-FFI export untested")
    x = np.random.default_rng(3).standard_normal((2, 3, HIDDEN)).astype(np.float32)
    y = np.full_like(x, np.nan)
    tvm_ffi.load_module(str(gemma_library)).main(x, y)
    np.testing.assert_allclose(y, reference(x), rtol=1e-4, atol=1e-4)


def test_example_cpp_application(gemma_library):
    app = os.environ.get("KILN_EXAMPLE_RUN_MODEL")
    if not app:
        pytest.skip("KILN_EXAMPLE_RUN_MODEL is not set (scripts/test.sh builds examples/cpp against the installed "
                    "package and sets it)")
    run = subprocess.run([app, str(gemma_library), "--threads", "3"], capture_output=True, text=True)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    assert "OK: 3 thread(s), outputs match the CPU backend's" in run.stdout, run.stdout
    assert "x: float32[batch, seq, 64]" in run.stdout, run.stdout


def rss_kib():
    fields = {}
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("RssAnon:", "RssFile:")):
            name, value = line.split(":")
            fields[name] = int(value.split()[0])
    return fields


GIB_ROWS = 16384  # W: [16384, 16384] float32 = 1 GiB


def test_one_gib_weights_are_mapped_not_copied(tmp_path):
    """A [16384, 16384] x [16384, 1] MatMul whose 1 GiB weight is in an external-data file: kiln
    writes it to the model's weights file; a fresh process loads the library, runs it, and its
    anonymous memory grows by far less than the weights (no second host copy) while its mapped
    file memory grows by about the weights (the run reads them from the mapping)."""
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    if free < 4 << 30:
        pytest.skip(f"needs 4 GiB of free disk in {tmp_path} (the model, its weights file)")
    n = GIB_ROWS
    w = np.lib.format.open_memmap(tmp_path / "w.npy", mode="w+", dtype=np.float32, shape=(n, n))
    for r in range(0, n, 1024):  # row blocks: never a second 1 GiB array here
        w[r:r + 1024] = np.random.default_rng(r).standard_normal((1024, n), dtype=np.float32) / 128
    w.flush()
    tensor = numpy_helper.from_array(np.asarray(w[:1]), "w")  # metadata only; data is external
    tensor.dims[:] = [n, n]
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    header = len(np.lib.format.magic(1, 0)) + 2 + int.from_bytes((tmp_path / "w.npy").open("rb").read(10)[8:10], "little")
    for key, value in (("location", "w.npy"), ("offset", str(header)), ("length", str(n * n * 4))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    # W @ x (not x @ W): the reduction runs along W's rows, so the run reads W once, in order.
    graph = helper.make_graph([helper.make_node("MatMul", ["w", "x"], ["y"], name="proj")], "big",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, 1])], [tensor])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "big.onnx"))
    del w
    compile_model(tmp_path / "big.onnx", tmp_path / "out")
    weights_file = tmp_path / "out" / "big.weights"
    assert weights_file.stat().st_size == 256 + n * n * 4
    (tmp_path / "w.npy").unlink()  # the library must not need the model's external data

    script = textwrap.dedent(f"""
        import json, pathlib, sys
        import numpy as np
        import kiln
        def rss():
            out = {{}}
            for line in pathlib.Path("/proc/self/status").read_text().splitlines():
                if line.startswith(("RssAnon:", "RssFile:")):
                    k, v = line.split(":"); out[k] = int(v.split()[0])
            return out
        x = np.random.default_rng(1).standard_normal(({n}, 1)).astype(np.float32)
        y = np.full(({n}, 1), np.nan, np.float32)
        before = rss()
        lib = kiln.load({str(tmp_path / "out" / "libbig.so")!r})
        lib.main(x, y)
        after = rss()
        w = np.memmap({str(weights_file)!r}, np.float32, "r", offset=256, shape=({n}, {n}))
        want = np.zeros({n}, np.float64)
        for r in range(0, {n}, 2048):
            want[r:r + 2048] = w[r:r + 2048].astype(np.float64) @ x[:, 0].astype(np.float64)
        print(json.dumps({{"before": before, "after": after,
                           "max_err": float(np.abs(y[:, 0] - want).max()), "max_ref": float(np.abs(want).max())}}))
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    import json
    r = json.loads(run.stdout.strip().splitlines()[-1])
    anon = (r["after"]["RssAnon"] - r["before"]["RssAnon"]) * 1024
    mapped = (r["after"]["RssFile"] - r["before"]["RssFile"]) * 1024
    assert r["max_err"] <= 1e-3 * max(1.0, r["max_ref"]), r
    assert anon < 64 << 20, f"anonymous memory grew by {anon / 2**20:.0f} MiB for 1 GiB of weights: a host copy?"
    assert mapped > (1 << 30) * 0.9, f"mapped file memory grew by only {mapped / 2**20:.0f} MiB: were the weights read?"


def test_unsupported_nodes_fail_at_compile_time_with_the_list(tmp_path):
    """Every node kiln cannot build is named (op, name, why) when compiling, not when running; a
    supported node that only follows an unsupported one is not listed."""
    binary = kiln_binary()
    if binary is None:
        pytest.skip("no kiln binary (build kiln, or set KILN_BINARY)")
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu1"),
             helper.make_node("FooBar", ["a"], ["b"], name="foo", domain="com.acme"),
             helper.make_node("Relu", ["b"], ["c"], name="relu2"),
             helper.make_node("Unique", ["c"], ["d"], name="uniq")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("d", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.acme", 1)]),
              str(tmp_path / "bad.onnx"))
    run = subprocess.run([binary, "compile", str(tmp_path / "bad.onnx"), "-o", str(tmp_path / "out"), "--target",
                          "cpu", "--model"], capture_output=True, text=True)
    assert run.returncode != 0
    assert "kiln cannot compile these nodes (op 'name': why):" in run.stderr, run.stderr
    assert "FooBar 'foo': op not supported" in run.stderr, run.stderr
    assert "Unique 'uniq': op not supported" in run.stderr, run.stderr
    assert "relu2" not in run.stderr, run.stderr
    assert not (tmp_path / "out" / "libbad.so").exists()


def test_a_cut_before_unsupported_nodes_compiles_and_runs(tmp_path):
    """--outputs compiles the graph up to named values: the part before an unsupported node becomes
    a model library whose only input is the one it reads and whose output is the cut; an unknown
    name is an error naming it."""
    binary = kiln_binary()
    if binary is None:
        pytest.skip("no kiln binary (build kiln, or set KILN_BINARY)")
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
             helper.make_node("Relu", ["h"], ["a"], name="relu1"),
             helper.make_node("FooBar", ["a", "unused_by_cut"], ["b"], name="foo", domain="com.acme")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4]),
                                           helper.make_tensor_value_info("unused_by_cut", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    model = tmp_path / "cut.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.acme", 1)]),
              str(model))
    whole = subprocess.run([binary, "compile", str(model), "-o", str(tmp_path / "whole"), "--target", "cpu", "--model"],
                           capture_output=True, text=True)
    assert whole.returncode != 0 and "--outputs" in whole.stderr, whole.stderr

    bad = subprocess.run([binary, "compile", str(model), "-o", str(tmp_path / "bad"), "--target", "cpu", "--model",
                          "--outputs", "nope"], capture_output=True, text=True)
    assert bad.returncode != 0 and "no value or node named 'nope'" in bad.stderr, bad.stderr

    out = tmp_path / "out"
    run = subprocess.run([binary, "compile", str(model), "-o", str(out), "--target", "cpu", "--model",
                          "--outputs", "relu1"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lib = kiln.load(str(out / "libcut.so"))
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    (y,) = (lib.main(x),)
    np.testing.assert_allclose(y, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)


def test_cuda_model_library_builds(tmp_path):
    """The CUDA side of a model library (device upload of the weights, the same entry point) compiles
    with nvcc and exports the contract, the model C API and the TVM-FFI entry (running it needs the GPU:
    bench/runtime/)."""
    import shutil
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    binary = kiln_binary()
    if nvcc is None or binary is None:
        pytest.skip("needs nvcc and the kiln binary")
    model = pathlib.Path(__file__).resolve().parents[2] / "examples" / "gemma_mlp.onnx"
    run = subprocess.run([binary, "compile", str(model), "-o", str(tmp_path), "--target", "sm_90", "--model"],
                         capture_output=True, text=True)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(tmp_path / "libgemma_mlp.so")],
                             capture_output=True, text=True).stdout
    for name in ["kiln_main", "kiln_signature_main", "kiln_library_functions", "kiln_model_info", "kiln_model_load",
                 "kiln_model_constants", "__tvm_ffi_main"]:
        assert f" {name}\n" in symbols, f"{name} is not exported:\n{symbols}"
