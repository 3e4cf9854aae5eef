"""Lists a configured build's Makefile defines (TESTS and the like), with the
variables they refer to expanded, as make would expand them in this build.

Tests a fragment adds under a condition (`if !SANITIZERS`) are in automake's
am__append_N variables, defined in this build's Makefile when the condition
holds here (commented out otherwise), so the expansion follows the build.
"""
import os
import re


def makefile_lists(builddir, names):
    """{name: set of words} for each make variable of `names`."""
    text = open(os.path.join(builddir, "Makefile")).read().replace("\\\n", " ")
    values = dict(re.findall(r"^(\w+) = (.*)$", text, re.M))

    def expand(value, depth=0):
        return re.sub(r"\$\((\w+)\)",
                      lambda m: expand(values.get(m.group(1), ""), depth + 1) if depth < 10 else "",
                      value)
    return {name: set(expand(values.get(name, "")).split()) for name in names}
