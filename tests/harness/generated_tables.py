"""A document's tables generated from a program's listing (docs/layers.md
from --list-plugins, docs/job-file.md's formats from --list-formats): the
last step, shared by tests/layers_doc.py and tests/formats_doc.py, that
writes the regenerated text in place or says how it differs.
"""
import difflib


def agree(tool, path, lines, result, listing, fix, write):
    """True when `result` (the document's lines, its tables regenerated from
    `listing`) equals `lines`, or was written in place (write); else prints
    the difference and what to do (run `tool` with --write, or `fix`)."""
    if write:
        open(path, "w").write("\n".join(result) + "\n")
        return True
    if result == lines:
        return True
    print("".join(difflib.unified_diff([line + "\n" for line in lines],
                                       [line + "\n" for line in result], path, listing)), end="")
    print("{0}: {1} disagrees with {2}: run tests/{0} TFENC_BATCH {1} --write, or {3}"
          .format(tool, path, listing, fix))
    return False
