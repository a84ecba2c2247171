#!/usr/bin/env python3
"""Per-kernel SASS instruction counts of a CUDA binary (a kiln library, a test-onnx unit, an object),
read with cuobjdump and nvdisasm: the CUDA toolkit's, else PyPI's nvidia-cuda-cuobjdump and
nvidia-cuda-nvdisasm (requirements-dev.txt),
so that kernel changes can be compared on a machine without a GPU (bench/quant_route/NOTES.md, session 19).

    bench/sass_count.py BINARY [--arch sm_90a] [--match REGEX] [--opcodes N]

Prints one line per kernel (instructions, demangled name) and, with --opcodes N, its N most common
opcodes. Compare two builds of the same source by running it on each.
"""
import argparse
import collections
import os
import pathlib
import re
import shutil
import subprocess
import sys


def tool(name):
    """The CUDA tool `name` (cuobjdump, nvdisasm): on PATH, else PyPI's nvidia-cuda-<name>."""
    found = shutil.which(name)
    if found:
        return found
    try:
        import nvidia  # PyPI's nvidia-cuda-cuobjdump / -nvdisasm install nvidia/cu13/bin/<name>
        for root in nvidia.__path__:
            for candidate in pathlib.Path(root).glob("cu*/bin/" + name):
                return str(candidate)
    except ImportError:
        pass
    sys.exit("%s not found: install the CUDA toolkit's or `pip install nvidia-cuda-%s`" % (name, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--arch", default="sm_90a", help="the cubin to read (default sm_90a)")
    ap.add_argument("--match", default="", help="only kernels whose demangled name matches this regex")
    ap.add_argument("--opcodes", type=int, default=0, help="also list each kernel's most common opcodes")
    args = ap.parse_args()
    env = dict(os.environ, NVDISASM_PATH=str(pathlib.Path(tool("nvdisasm")).parent))  # cuobjdump -sass runs nvdisasm
    dump = subprocess.run([tool("cuobjdump"), "-sass", "-arch", args.arch, args.binary], capture_output=True, text=True, env=env)
    if dump.returncode != 0:
        sys.exit("cuobjdump failed: " + dump.stderr.strip())
    functions = re.split(r"\n\s*Function : ", dump.stdout)[1:]
    if not functions:
        sys.exit("no %s kernels in %s" % (args.arch, args.binary))
    names = [f.split("\n", 1)[0].strip() for f in functions]
    demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    matched = 0
    for body, name in zip(functions, demangled):
        if args.match and not re.search(args.match, name):
            continue
        matched += 1
        ops = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", body)]
        print("%6d  %s" % (len(ops), name))
        if args.opcodes:
            common = collections.Counter(op.split(".")[0] for op in ops).most_common(args.opcodes)
            print("        " + ", ".join("%s %d" % c for c in common))
    if not matched:
        sys.exit("no %s kernel of %s matches %r" % (args.arch, args.binary, args.match))


if __name__ == "__main__":
    main()
