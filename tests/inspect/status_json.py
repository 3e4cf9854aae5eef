"""tfenc-batch --status --json FILE, checked field by field against what h5py
reads from the same file (tests/inspect/status.sh).

    status_json.py REPORT FILE.h5 RUNS [killed]

REPORT holds the command's standard output: exactly one line, one JSON
object. RUNS is how many entries run_summaries must have ("none": the
file has no run summary, as a job killed before its end leaves it). The
runs' tokens add up to the file's lengths and their documents to the
finished documents when every run of the file reached its end ("killed":
an earlier run was killed and left no summary, so they do not). Prints
one line per failed check and exits 1 if any failed."""
import json
import sys

import h5py
import numpy as np

report_path, path, runs_expected = sys.argv[1:4]
killed = sys.argv[4:] == ["killed"]
failures = []


def check(what, seen, expected):
    if seen != expected:
        failures.append(f"{what}: the JSON says {seen!r}, h5py reads {expected!r}")


def text(value):
    return value.decode() if isinstance(value, bytes) else (None if value is None else str(value))


with open(report_path) as stream:
    lines = stream.read().splitlines()
if len(lines) != 1:
    sys.exit(f"status_json: {len(lines)} lines on standard output, expected one JSON object")
report = json.loads(lines[0])
if not isinstance(report, dict):
    sys.exit("status_json: the JSON is not an object")

with h5py.File(path, "r") as f:
    attrs = f.attrs
    lengths = f["lengths"][...]
    finished = int(np.count_nonzero(lengths >= 0))
    complete = int(attrs["complete"]) == 1
    check("complete", report["complete"], complete)
    check("documents.total", report["documents"]["total"], int(attrs["n_documents"]))
    check("documents.finished", report["documents"]["finished"], finished)
    for name in ("output_kind", "dtype", "compression"):
        key = "kind" if name == "output_kind" else name
        check(f"output.{key}", report["output"][key], text(attrs[name]))
    check("output.d_model", report["output"]["d_model"], int(attrs["d_model"]))
    check("output.unit_norm", report["output"]["unit_norm"], bool(int(attrs["unit_norm"])))
    shapes = {name: list(item.shape) for name, item in f.items()
              if isinstance(item, h5py.Dataset)}
    check("output.datasets", report["output"]["datasets"], shapes)
    for key, name in (("precision", "precision"), ("kernels", "kernels"),
                      ("weights_sha256", "weights_sha256"), ("layout", "layout"),
                      ("tfenc_version", "tfenc_version"), ("created", "created"),
                      ("job_file", "job_path"), ("working_directory", "working_directory")):
        check(key, report[key], text(attrs[name]))
    check("path_choices", report["path_choices"],
          [line for line in text(attrs["path_choices"]).split("\n") if line])
    check("overrides", report["overrides"],
          [line for line in text(attrs["job_overrides"]).split("\n") if line])
    corpus = report["corpus_files"]
    if not corpus or sum(shard["documents"] for shard in corpus) != int(attrs["n_documents"]):
        failures.append(f"corpus_files: {corpus!r} do not add up to n_documents")
    check("not_recorded", report["not_recorded"], [])
    if complete:
        check("resume_command", report["resume_command"], None)
    elif not str(report["resume_command"]).startswith("cd "):
        failures.append(f"resume_command: {report['resume_command']!r}")

    runs = json.loads(text(attrs["run_summaries"])) if "run_summaries" in attrs else None
    check("runs", report["runs"], runs)
    if runs_expected == "none":
        check("run_summaries", runs, None)
    else:
        if runs is None or len(runs) != int(runs_expected):
            failures.append(f"run_summaries: {runs!r}, expected {runs_expected} entries")
        else:
            # "ranks=R data_parallel=D ...": every run of these files had R ranks.
            ranks = int(text(attrs["layout"]).split()[0].split("=")[1])
            for index, run in enumerate(runs):
                # Runs before the last were stopped; the last finished the file.
                check(f"run {index + 1}: finished", run["finished"],
                      complete and index == len(runs) - 1)
                if len(run["ranks"]) != ranks or run["elapsed_seconds"] <= 0:
                    failures.append(f"run {index + 1}: {run!r}: not {ranks} ranks, or no time")
                for rank in run["ranks"]:
                    if rank["tokens"] > 0 and rank["tokens_per_second"] <= 0:
                        failures.append(f"run {index + 1}: rank {rank!r} without a rate")
            if not killed:
                check("the runs' tokens", sum(run["tokens"] for run in runs),
                      int(lengths[lengths >= 0].sum()))
                check("the runs' documents", sum(run["documents"] for run in runs), finished)

for failure in failures:
    print(f"status_json: {path}: {failure}")
sys.exit(1 if failures else 0)
