#!/usr/bin/env python3
"""Nothing in the tree reaches upward, and no source files call each other
round a loop.

Each subsystem of core/ declares in the header comment of its automake
fragment (core/<subsystem>/local.mk) a line

    # may use: base job

naming the subsystems its files may include and call. This check fails,
with one line per offence naming the file, when:

  - a subsystem's declarations form a circle, or name a subsystem that does
    not exist (the declared order is the architecture: it must have no circle);
  - a file of core/<subsystem> includes a header of a subsystem it may not
    use ("model/weights.h" from core/matrix);
  - a plugin (plugins/, plugins/examples/) includes anything of core but the
    SDK (tfenc/*.h): a third-party plugin builds against the installed SDK
    alone, and the built-in ones are held to the same rule;
  - in the built objects of libtfenc (nm: the global symbols each object
    defines and the ones it leaves undefined), an object calls into a
    subsystem it may not use (a forward declaration does not hide it), or
    objects call each other round a loop (A -> B -> ... -> A), reported with
    the symbols that close it;
  - inside a subsystem, modules include each other round a loop. A module
    is a file stem of the folder (corpus.c with corpus.h); module A uses B
    when a file of A includes B's header. Files inside a subsystem depend
    downward when these uses have no loop: the knot "corpus.c includes
    hdf5_corpus.h, which includes corpus.h for a shared type" is such a loop,
    untied by a small header of the shared types that both include. The
    knots listed in KNOWN_KNOTS are printed as notes, not failures, until
    they are untied (then the note says to drop them from the list);
  - a file decides by the corpus format (an if or a switch on
    TFENC_CORPUS_TEXT, _JSONL, _HDF5, _PARQUET, or #ifdef HAVE_PARQUET)
    anywhere but the formats' table (core/input/formats.c) and the readers
    (the files that define a tfenc_corpus_reader): a format is one reader
    file and one table entry, and what differs between formats is asked of
    the table;
  - a file decides by the output kind (compares with, switches on or picks
    by TFENC_OUTPUT_POOLED, _TOKENS, _SCORES, _SPARSE, _VECTORS, or compares
    a kind's name with strcmp) anywhere but the kinds' table
    (core/output/kinds.c): a kind is one entry there, and what differs
    between kinds is a field of its entry.

It also checks the suite's split between the normal and the sanitizer
build (tests/local.mk): a test that runs fewer cases when
TFENC_SANITIZER_BUILD is set (in its source, or in a helper of its
directory it sources) must be in FEWER_CASES_UNDER_SANITIZERS, and every
test there must do so, since `tests/run-all.sh --sanitizers` runs the other
tests of both builds in the sanitizer build only.

Run from `make check` with top_srcdir and top_builddir set (tests/structure.sh),
or by hand: python3 tests/structure.py SRCDIR BUILDDIR.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'harness'))
from makefile_lists import makefile_lists  # noqa: E402  (tests/harness/makefile_lists.py)

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)
MAY_USE = re.compile(r'^#\s*may use:(.*)$', re.M)
# Global symbols an object defines (text, data, bss, read-only, common, weak).
DEFINED_TYPES = set('TDBRCVWGSi')


def subsystems(srcdir):
    """{subsystem: set of subsystems it may use}, from each local.mk."""
    core = os.path.join(srcdir, 'core')
    declared = {}
    problems = []
    for name in sorted(os.listdir(core)):
        fragment = os.path.join(core, name, 'local.mk')
        if not os.path.isfile(fragment):
            continue
        with open(fragment, encoding='utf-8') as f:
            lines = MAY_USE.findall(f.read())
        if len(lines) != 1:
            problems.append('core/%s/local.mk: %d "# may use:" lines, expected one'
                            % (name, len(lines)))
            continue
        # 'nothing' reads better than an empty line; words in brackets explain.
        words = re.sub(r'\(.*?\)', '', lines[0]).split()
        declared[name] = set(words) - {'nothing'}
    for name, uses in sorted(declared.items()):
        for used in sorted(uses - set(declared)):
            problems.append('core/%s/local.mk: may use "%s", which is no subsystem'
                            % (name, used))
        if name in uses:
            problems.append('core/%s/local.mk: names itself in "may use"' % name)
    loop = find_loop({n: u & set(declared) for n, u in declared.items()})
    if loop:
        problems.append('core/*/local.mk: the declared dependencies form a circle: '
                        + ' -> '.join(loop))
    return declared, problems


def find_loop(graph):
    """One cycle of a directed graph {node: iterable of nodes}, as a list
    that starts and ends with the same node, or None."""
    state = {}
    path = []

    def visit(node):
        state[node] = 'open'
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 'open':
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 'done'
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def strongly_connected(graph):
    """The groups of nodes that reach each other (Tarjan), of two or more."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def source_files(directory):
    for root, _dirs, files in os.walk(directory):
        for name in sorted(files):
            if name.endswith(('.c', '.h', '.cc')):
                yield os.path.join(root, name)


def includes(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return INCLUDE.findall(f.read())


def check_core_includes(srcdir, declared):
    problems = []
    for sub, uses in sorted(declared.items()):
        allowed = uses | {sub}
        for path in source_files(os.path.join(srcdir, 'core', sub)):
            for header in includes(path):
                first = header.split('/')[0] if '/' in header else None
                if first in declared and first not in allowed:
                    problems.append('%s: includes "%s", but core/%s may use only: %s'
                                    % (os.path.relpath(path, srcdir), header, sub,
                                       ' '.join(sorted(uses)) or 'nothing'))
    return problems


def check_plugin_includes(srcdir, declared):
    """Plugins see the SDK (tfenc/...) and their own folder's headers."""
    problems = []
    plugins = os.path.join(srcdir, 'plugins')
    for path in source_files(plugins):
        here = os.path.dirname(path)
        for header in includes(path):
            first = header.split('/')[0] if '/' in header else None
            if first == 'tfenc':
                continue
            if first in declared or first == 'core' or (
                    '/' not in header and not os.path.exists(os.path.join(here, header))
                    and os.path.exists(os.path.join(srcdir, 'core', header))):
                problems.append('%s: includes "%s"; a plugin may include only the SDK '
                                '(tfenc/*.h) and its own headers'
                                % (os.path.relpath(path, srcdir), header))
    return problems


def libtool_objects(builddir, declared):
    """{source name (core/<sub>/<file>.c): object path} for every libtool
    object built under core/<subsystem>/."""
    objects = {}
    for sub in declared:
        directory = os.path.join(builddir, 'core', sub)
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if not name.endswith('.lo'):
                continue
            with open(os.path.join(directory, name), encoding='utf-8') as f:
                text = f.read()
            found = re.search(r"^pic_object='([^']+)'", text, re.M)
            if not found or found.group(1) == 'none':
                found = re.search(r"^non_pic_object='([^']+)'", text, re.M)
            if not found or found.group(1) == 'none':
                continue
            # Per-target flags prefix the object with the target (core_libtfenc_matrix_la-).
            stem = re.sub(r'^.*_la-', '', name[:-3])
            objects['core/%s/%s.c' % (sub, stem)] = os.path.join(directory, found.group(1))
    return objects


def symbols(path):
    out = subprocess.run(['nm', '-P', path], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        if kind == 'U':
            undefined.add(name)
        elif kind in DEFINED_TYPES:
            defined.add(name)
    return defined, undefined


def check_objects(builddir, declared):
    objects = libtool_objects(builddir, declared)
    if not objects:
        return ['%s/core: no libtool objects found (build libtfenc first)' % builddir]
    definer = {}
    table = {}
    for source, obj in objects.items():
        table[source] = symbols(obj)
        for name in table[source][0]:
            definer.setdefault(name, source)
    calls = {}  # source -> {callee source: [symbols]}
    for source, (_defined, undefined) in table.items():
        for name in sorted(undefined):
            callee = definer.get(name)
            if callee and callee != source:
                calls.setdefault(source, {}).setdefault(callee, []).append(name)
    problems = []
    for source, callees in sorted(calls.items()):
        sub = source.split('/')[1]
        for callee, names in sorted(callees.items()):
            callee_sub = callee.split('/')[1]
            if callee_sub != sub and callee_sub not in declared[sub]:
                problems.append('%s: calls %s (%s), but core/%s may use only: %s'
                                % (source, callee, ', '.join(names[:3]), sub,
                                   ' '.join(sorted(declared[sub])) or 'nothing'))
    graph = {s: set(c) for s, c in calls.items()}
    # One loop per group of files that reach each other, so that every
    # knot is reported, not only the first.
    for group in strongly_connected(graph):
        loop = find_loop({s: graph.get(s, set()) & group for s in group})
        steps = ['%s -> %s (%s)' % (a, b, ', '.join(calls[a][b][:2]))
                 for a, b in zip(loop, loop[1:])]
        problems.append('source files call each other round a loop: ' + '; '.join(steps))
    return problems


# Knots inside subsystems that other work unties (issue 43): reported, not
# failed on. Each entry: (subsystem, the modules of the loop, why it waits).
KNOWN_KNOTS = [
]


def module_of(name):
    return name.rsplit('.', 1)[0]


def check_subsystem_knots(srcdir, declared):
    """Problems (loops of modules inside a subsystem) and notes (known knots)."""
    problems, notes = [], []
    for sub in sorted(declared):
        directory = os.path.join(srcdir, 'core', sub)
        graph, via = {}, {}
        for name in sorted(os.listdir(directory)):
            if not name.endswith(('.c', '.h', '.cc')):
                continue
            module = module_of(name)
            graph.setdefault(module, set())
            for header in includes(os.path.join(directory, name)):
                if not header.startswith(sub + '/'):
                    continue
                used = module_of(header[len(sub) + 1:])
                if used != module:
                    graph[module].add(used)
                    via.setdefault((module, used), '%s includes "%s"' % (name, header))
        known = [(modules, why) for knot_sub, modules, why in KNOWN_KNOTS if knot_sub == sub]
        found = strongly_connected(graph)
        for group in found:
            loop = find_loop({m: graph.get(m, set()) & group for m in group})
            steps = '; '.join(via[(a, b)] for a, b in zip(loop, loop[1:]))
            reason = [why for modules, why in known if modules == group]
            if reason:
                notes.append('core/%s: known knot (%s): %s' % (sub, reason[0], steps))
            else:
                problems.append('core/%s: modules include each other round a loop (%s; in all %s): '
                                '%s; move the shared types into a header of their own that '
                                'both include' % (sub, ' -> '.join(loop),
                                                  ', '.join(sorted(group)), steps))
        for modules, _why in known:
            if modules not in found:
                notes.append('core/%s: the knot of %s is untied: drop it from KNOWN_KNOTS'
                             % (sub, ' and '.join(sorted(modules))))
    return problems, notes


FORMAT_TABLE = 'core/input/formats.c'
DEFINES_READER = re.compile(r'^const\s+tfenc_corpus_reader\s+\w+\s*=', re.M)
FORMAT_CONSTANT = r'TFENC_CORPUS_(?:TEXT|JSONL|HDF5|PARQUET)\b'
DECIDES_BY_FORMAT = re.compile(
    r'(?:[!=]=\s*%s|%s\s*[!=]=|\bcase\s+%s|^\s*#\s*if.*\bHAVE_PARQUET\b)'
    % (FORMAT_CONSTANT, FORMAT_CONSTANT, FORMAT_CONSTANT), re.M)


def check_format_decisions(srcdir):
    """Only the table and the readers decide by the corpus format."""
    problems = []
    for top in ('core', 'drivers', 'plugins'):
        for path in source_files(os.path.join(srcdir, top)):
            relative = os.path.relpath(path, srcdir)
            with open(path, encoding='utf-8', errors='replace') as f:
                text = f.read()
            if relative == FORMAT_TABLE or DEFINES_READER.search(text):
                continue
            for match in DECIDES_BY_FORMAT.finditer(text):
                line = text.count('\n', 0, match.start()) + 1
                problems.append('%s:%d: decides by the corpus format ("%s"): ask the formats\' '
                                'table (%s) or the reader instead'
                                % (relative, line, match.group(0).strip(), FORMAT_TABLE))
    return problems


KINDS_TABLE = 'core/output/kinds.c'
KIND_CONSTANT = r'TFENC_OUTPUT_(?:POOLED|TOKENS|SCORES|SPARSE|VECTORS)\b'
KIND_NAME = r'"(?:pooled|tokens|scores|sparse|vectors)"'
DECIDES_BY_KIND = re.compile(
    r'(?:[!=]=\s*%s|%s\s*[!=]=|\bcase\s+%s|\?\s*%s|:\s*%s\s*;'
    r'|\bstrcmp\s*\(\s*[^,;()]*kind\w*\s*,\s*%s\s*\))'
    % (KIND_CONSTANT, KIND_CONSTANT, KIND_CONSTANT, KIND_CONSTANT, KIND_CONSTANT, KIND_NAME),
    re.M)


def check_kind_decisions(srcdir):
    """Only the kinds' table decides by the output kind."""
    problems = []
    for top in ('core', 'drivers', 'plugins'):
        for path in source_files(os.path.join(srcdir, top)):
            relative = os.path.relpath(path, srcdir)
            if relative == KINDS_TABLE:
                continue
            with open(path, encoding='utf-8', errors='replace') as f:
                text = f.read()
            for match in DECIDES_BY_KIND.finditer(text):
                line = text.count('\n', 0, match.start()) + 1
                problems.append('%s:%d: decides by the output kind ("%s"): ask the kinds\' '
                                'table (%s) instead'
                                % (relative, line, ' '.join(match.group(0).split()), KINDS_TABLE))
    return problems


def check_test_split(srcdir, builddir):
    lists = makefile_lists(builddir, ['TESTS', 'NORMAL_BUILD_ONLY_TESTS',
                                      'FEWER_CASES_UNDER_SANITIZERS'])
    fewer, normal_only = lists['FEWER_CASES_UNDER_SANITIZERS'], lists['NORMAL_BUILD_ONLY_TESTS']
    problems = []

    def reads_the_variable(test):
        source = os.path.join(srcdir, test if test.endswith(('.sh', '.py')) else test + '.c')
        if not os.path.exists(source):
            return False
        text = open(source, errors='replace').read()
        if 'TFENC_SANITIZER_BUILD' in text:
            return True
        directory = os.path.dirname(source)
        for helper in re.findall(r'^\s*(?:\.|source)\s.*?([\w.-]+\.sh)\b', text, re.M):
            path = os.path.join(directory, helper)
            if (path != source and os.path.exists(path)
                    and 'TFENC_SANITIZER_BUILD' in open(path, errors='replace').read()):
                return True
        return False

    for test in sorted(lists['TESTS'] | fewer):
        reads = reads_the_variable(test)
        if reads and test not in fewer and test not in normal_only:
            problems.append('%s runs fewer cases under the sanitizers (TFENC_SANITIZER_BUILD) '
                            'but is not in FEWER_CASES_UNDER_SANITIZERS' % test)
        if test in fewer and not reads:
            problems.append('%s is in FEWER_CASES_UNDER_SANITIZERS but does not read '
                            'TFENC_SANITIZER_BUILD' % test)
        if test in fewer and test in normal_only:
            problems.append('%s is in both NORMAL_BUILD_ONLY_TESTS and '
                            'FEWER_CASES_UNDER_SANITIZERS' % test)
    if not normal_only or not fewer:
        problems.append('the Makefile lists no NORMAL_BUILD_ONLY_TESTS or '
                        'FEWER_CASES_UNDER_SANITIZERS')
    return problems


def main(argv):
    srcdir = argv[1] if len(argv) > 1 else os.environ.get('abs_top_srcdir', '.')
    builddir = argv[2] if len(argv) > 2 else os.environ.get('abs_top_builddir', '.')
    declared, problems = subsystems(srcdir)
    notes = []
    if not declared:
        problems.append('%s/core: no subsystem declares "# may use:"' % srcdir)
    else:
        problems += check_core_includes(srcdir, declared)
        problems += check_plugin_includes(srcdir, declared)
        problems += check_objects(builddir, declared)
        knots, notes = check_subsystem_knots(srcdir, declared)
        problems += knots
    problems += check_format_decisions(srcdir)
    problems += check_kind_decisions(srcdir)
    problems += check_test_split(srcdir, builddir)
    for note in notes:
        print('structure: note: ' + note)
    for problem in problems:
        print('structure: ' + problem)
    if not problems:
        print('structure: %d subsystems, includes and objects depend only downward, inside '
              'each subsystem too; only the formats\' table and the readers decide by the '
              'corpus format, only the kinds\' table by the output kind; the tests that run fewer cases under the sanitizers are listed'
              % len(declared))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
