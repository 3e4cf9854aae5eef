#!/bin/sh
# make check: the benchmark harness still runs end to end on a tiny workload
# (all-MiniLM-L6-v2, 64 short texts and 8 passages made of
# tests/import/sentences.txt, the roofline timer for a few milliseconds per
# shape): sentence-transformers, tfenc fp32 in both layouts and bf16 and
# int8 in one, and ONNX Runtime fp32 and int8 where tests/bench/setup-bench
# --smoke can install it (not OpenVINO: CI stays quick; without PyPI the
# smoke test goes on without ONNX Runtime). It checks that each row is measured or refused
# with a reason, that the fp32 rows agree with sentence-transformers
# (cosine >= 0.9999) and that the CSV and PNG are written. It
# asserts no timing; `make bench` is the benchmark.
set -u
here=$(cd "$(dirname "$0")" && pwd)
builddir=${abs_top_builddir:-$(pwd)}
python=${TFENC_VENV_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv/bin/python}
out="$builddir/tests/data/generated/bench-smoke"
if [ "$(id -u)" -eq 0 ]; then
  : "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
rm -rf "$out"
mkdir -p "$out"
# tfenc fp32 in both layouts, bf16 and int8 in one: the harness's paths
# for a layout do not depend on the precision, and int8's accuracy gate
# costs each run more than the smoke's whole encoding.
engines="st-fp32,tfenc-fp32,tfenc-bf16-1x2,tfenc-int8-1x2"
if sh "$here/setup-bench" --smoke >"$out/setup.log" 2>&1; then
  engines="$engines,ort-fp32,ort-int8"
else
  echo "bench smoke: no ONNX Runtime (setup-bench --smoke failed; offline?), going on without it:"
  tail -n 3 "$out/setup.log"
fi
if ! "$python" "$here/bench.py" --builddir "$builddir" --smoke --out "$out" \
    --engines "$engines" >"$out/log" 2>&1; then
  cat "$out/log"
  echo "bench smoke: FAIL: the harness failed (log above)"
  exit 1
fi
"$python" - "$out/bench.csv" "$engines" <<'PY' || { cat "$out/log"; exit 1; }
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
engines = sys.argv[2].split(",")
tfenc_rows = sum(2 if e.count("-") == 1 else 1 for e in engines if e.startswith("tfenc-"))
expected = 2 * (1 + tfenc_rows + sum(e.startswith("ort") for e in engines))
problems = []
if len(rows) != expected:
    problems.append(f"{len(rows)} rows, expected {expected}")
for r in rows:
    name = f"{r['engine']} on {r['text']}"
    if r["status"] == "refused":
        # Only tfenc may refuse, and only a precision other than fp32.
        if not r["engine"].startswith("tfenc") or r["precision"] == "fp32" or not r["reason"]:
            problems.append(f"{name}: refused without cause ({r['reason']!r})")
    elif r["status"] != "ok":
        problems.append(f"{name}: {r['status']}: {r['reason']}")
    else:
        for field in ("tokens_per_s", "roofline_tokens_per_s", "min_cos", "mean_cos",
                      "peak_rss_mib"):
            if not r[field] or not math.isfinite(float(r[field])) or float(r[field]) <= 0:
                problems.append(f"{name}: {field} is {r[field]!r}")
        # Beside each tfenc figure, what ran it (the attention path and the
        # products' kernels) and its share of the cores' peak.
        if r["engine"].startswith("tfenc"):
            if "attention " not in r["kernels"] or not ("oneDNN " in r["kernels"]
                                                        or "OpenBLAS " in r["kernels"]):
                problems.append(f"{name}: kernels {r['kernels']!r}")
            if not r["peak_pct"] or not 0 < float(r["peak_pct"]) < 100:
                problems.append(f"{name}: % peak {r['peak_pct']!r}")
        # tfenc is exact on MiniLM (tests/import/parity.sh's bar is tighter);
        # float32 engines differ in summation order only.
        if r["precision"] == "fp32" and r["min_cos"] and not float(r["min_cos"]) >= 0.9999:
            problems.append(f"{name}: min cosine {r['min_cos']} to sentence-transformers")
for p in problems:
    print(f"bench smoke: FAIL: {p}")
sys.exit(1 if problems else 0)
PY
if [ ! -s "$out/bench.png" ]; then
  cat "$out/log"
  echo "bench smoke: FAIL: no bench.png"
  exit 1
fi
grep '^|' "$out/log"
rm -rf "$out"
echo "bench smoke: ok"
