"""The output of a job records its matrix precision and, for int8, what the
accuracy gate measured and chose: precision,
precision_sample_min_cosine (at least the job's min_cosine) and
precision_steps (one "step precision" line per step). Ungated precisions
record 1.0 and "".

usage: check_precision_attributes.py OUTPUT.h5 PRECISION MIN_COSINE [RUNS]

RUNS is the precision the CPU runs for PRECISION (default PRECISION): a job
records what ran, so a bf16 job on a CPU without bf16 products records fp32.
"""
import sys

import h5py


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def main():
    path, precision, bar = sys.argv[1], sys.argv[2], float(sys.argv[3])
    runs = sys.argv[4] if len(sys.argv) > 4 else precision
    with h5py.File(path, "r") as f:
        attrs = dict(f.attrs)
    problems = []
    if text(attrs["precision"]) != runs:
        problems.append(f"precision attribute {text(attrs['precision'])!r}")
    cosine = float(attrs["precision_sample_min_cosine"])
    steps = text(attrs["precision_steps"])
    if precision == "int8":
        if not bar <= cosine <= 1.0:
            problems.append(f"precision_sample_min_cosine {cosine} is below {bar}")
        lines = [line.split() for line in steps.splitlines()]
        if not lines or any(len(l) != 2 or l[1] not in ("int8", "bf16", "fp32") for l in lines):
            problems.append(f"precision_steps {steps!r}")
    elif cosine != 1.0 or steps != "":
        problems.append(f"an ungated precision records {cosine} / {steps!r}")
    verdict = "FAIL" if problems else "PASS"
    print(f"{verdict}: precision {precision} attributes: sample min cosine {cosine:.6f}, "
          f"{len(steps.splitlines())} steps recorded" + ("".join("; " + p for p in problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
