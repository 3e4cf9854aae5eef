#!/usr/bin/env python3
"""Writes one line "a" + chr(c) + "b" for every code point c up to U+323AF
(the last assigned CJK block) except surrogates and the line feed, the
corpus that measures where Unicode data differs between tfenc (utf8proc)
and HF tokenizers (docs/tokenizers.md, "Known differences"). Not a test:
differences are expected there. Usage: codepoints.py OUTPUT"""

import sys

with open(sys.argv[1], "wb") as f:
    for c in range(0x323B0):
        if 0xD800 <= c <= 0xDFFF or c == 0x0A:
            continue
        f.write(("a" + chr(c) + "b\n").encode("utf-8"))
