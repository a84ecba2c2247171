"""Static SASS instruction counts of GEMV variants 7, 8, 9 and 15 (cuobjdump -sass of libkiln_quant on stdin).
Variant 7's body is fully unrolled (no loops): a lane's instruction count is its static count, and
a lane handles 16 rows x 32 k per chunk, so instructions per weight = count / (512 * chunks per
warp). Variant 9 (also unrolled but for its scale copy and epilogue loops): a lane handles 8 rows x
64 k = 512 weights; its "main" count is the code from griddepcontrol.wait (ACQBULK) to the CTA
barrier before the epilogue. Writes a table, and the SASS of the nvfp4/bf16 one-chunk kernel."""
import collections
import re
import sys

out = sys.argv[1]
text = sys.stdin.read()
rows = ["| kernel | SASS instructions | per weight | top opcodes |", "|---|---|---|---|"]
keep = ""
for f in re.split(r"\n\s*Function : ", text)[1:]:
    name = f.split("\n")[0].strip()
    if "w4_gemv7_kernel" not in name and "w4_gemv8_kernel" not in name and "w4_gemv9_kernel" not in name and "w4_gemv15_kernel" not in name and "w4_gemv19_kernel" not in name:
        continue
    ins = re.findall(r"/\*[0-9a-f]{4}\*/\s+([^;]*);", f)
    if "w4_gemv15_kernel" in name or "w4_gemv19_kernel" in name:  # a lane: 512 weights; main = ACQBULK .. BAR.SYNC
        fmt = {"E0E": "nvfp4", "E1E": "mxfp4", "E2E": "int4"}
        nt = next((c for c in "1234" if f"Li{c}E" in name), "?") if "gemv15" in name else "1..8"
        label = ("v15 " if "gemv15" in name else "v19 ") + next((v for k, v in fmt.items() if f"Format{k}" in name), "?") + (" bf16" if "bfloat16" in name else " f16") + f" M={nt}"
        a = next((i for i, x in enumerate(ins) if "ACQBULK" in x), 0)
        b = next((i for i, x in enumerate(ins) if "BAR.SYNC" in x), len(ins))
        ops = collections.Counter((i.split()[1] if i.startswith("@") else i.split()[0]).split(".")[0] for i in ins[a:b])
        rows.append(f"| {label} | {len(ins)} (main {b - a}) | main {(b - a) / 512:.2f} | {', '.join(f'{k} {v}' for k, v in ops.most_common(10))} |")
        continue
    if "w4_gemv9_kernel" in name:
        fmt = {"E0E": "nvfp4", "E1E": "mxfp4", "E2E": "int4"}
        label = "v9 " + next((v for k, v in fmt.items() if f"Format{k}" in name), "?") + (" bf16" if "bfloat16" in name else " f16") + (" NT=2" if "Li2E" in name else " NT=1")
        a = next((i for i, x in enumerate(ins) if "ACQBULK" in x), 0)
        b = next((i for i, x in enumerate(ins) if "BAR.SYNC" in x), len(ins))
        ops = collections.Counter((i.split()[1] if i.startswith("@") else i.split()[0]).split(".")[0] for i in ins[a:b])
        rows.append(f"| {label} | {len(ins)} (main {b - a}) | main {(b - a) / 512:.2f} | {', '.join(f'{k} {v}' for k, v in ops.most_common(10))} |")
        continue
    ops = collections.Counter((i.split()[1] if i.startswith("@") else i.split()[0]).split(".")[0] for i in ins)
    two = "Li2ENS1_" in name  # CPW = 2 (the Ep type follows CPW in the mangled name)
    per = 512 * (2 if two else 1)
    fmt = {"E0E": "nvfp4", "E1E": "mxfp4", "E2E": "int4"}
    label = ("v8 " if "gemv8" in name else "v7 ") + next((v for k, v in fmt.items() if f"Format{k}" in name), "?") + (" bf16" if "bfloat16" in name else " f16") + (" 2 chunks" if two else " 1 chunk") + (" pre=2" if "Lb0ELi2E" in name else " pre=1" if "Lb0ELi1E" in name else "")
    rows.append(f"| {label} | {len(ins)} | {len(ins) / per:.2f} | {', '.join(f'{k} {v}' for k, v in ops.most_common(10))} |")
    if label == "v8 nvfp4 bf16 1 chunk":
        keep = f
open(out, "w").write("\n".join(rows) + "\n\n```\n" + keep + "\n```\n")
print("\n".join(rows))
