"""The Python files of the test tree that scripts can run: the scripts
themselves and, transitively, every module of the tree they import.

usage: local_imports.py TESTS_DIR SCRIPT.py [SCRIPT.py ...]

Prints one path a line (relative to TESTS_DIR, sorted). tests/harness/generate
hashes them into its cache key, so that a change to one test's helper does not
invalidate every other test's generated models. A module is matched by name
wherever it lies in the tree (a generator may put another test directory on
sys.path): two files of one name both count, which can only cost a cache miss.
Imports are read with ast, whatever their form (import a.b, from a import b,
inside a function); a module the tree does not hold (torch, h5py) is the
interpreter's, which generate describes by its installed packages.
"""
import ast
import os
import sys


def modules_in_tree(tests):
    by_name = {}
    for root, _, files in os.walk(tests):
        for name in files:
            if name.endswith(".py"):
                by_name.setdefault(name[:-3], []).append(os.path.join(root, name))
    return by_name


def imported_names(path):
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.update(alias.name.split("."))
        elif isinstance(node, ast.ImportFrom):
            if node.module:
                names.update(node.module.split("."))
            # from package import module, from . import module
            names.update(alias.name for alias in node.names)
    return names


def main():
    tests, scripts = sys.argv[1], sys.argv[2:]
    by_name = modules_in_tree(tests)
    seen, todo = set(), [os.path.realpath(path) for path in scripts]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in imported_names(path):
            todo.extend(os.path.realpath(found) for found in by_name.get(name, []))
    root = os.path.realpath(tests)
    for path in sorted(os.path.relpath(p, root) for p in seen):
        print(path)


if __name__ == "__main__":
    main()
