#!/usr/bin/env python3
"""Writes real multilingual text, one line per translated message, from the
message catalogues (.mo) of Debian packages that every test machine has:
coreutils (Essential; 43 languages), libglib2.0-data (glib20, ~100
languages, every script from Amharic to Yiddish) and libpam-runtime
(Linux-PAM). These are human translations, so the lines hold each
language's real spelling, punctuation, digits and combining marks. Lines
are deduplicated, shuffled with a fixed seed and cut to N_LINES; the
language of each line is not kept. tests/import/sentences.txt (English and
other sentences written for the import test) comes first.
Usage: real_text.py OUTPUT N_LINES [SENTENCES_TXT]"""

import gettext
import glob
import os
import random
import sys

DOMAINS = ["coreutils", "glib20", "Linux-PAM"]


def catalogue_lines(path):
    with open(path, "rb") as f:
        catalogue = gettext.GNUTranslations(f)._catalog
    for key, value in catalogue.items():
        if key == "" or not isinstance(value, str):
            continue  # the header
        for line in value.split("\n"):
            line = line.strip()
            if line and "\r" not in line:
                yield line


def main():
    output, n_lines = sys.argv[1], int(sys.argv[2])
    lines, seen = [], set()
    if len(sys.argv) > 3:
        for line in open(sys.argv[3], encoding="utf-8"):
            line = line.rstrip("\n")
            if line and line not in seen:
                seen.add(line)
                lines.append(line)
    found = []
    for domain in DOMAINS:
        for path in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/%s.mo" % domain)):
            language = path.split(os.sep)[-3]
            if language.startswith("en"):
                continue
            try:
                found.extend(sorted(set(catalogue_lines(path))))
            except (OSError, IndexError, ValueError, UnicodeDecodeError):
                continue  # a catalogue gettext cannot read (a broken header)
    random.Random(20240611).shuffle(found)
    for line in found:
        if len(lines) >= n_lines:
            break
        if line not in seen:
            seen.add(line)
            lines.append(line)
    if len(lines) < n_lines:
        sys.exit("real_text.py: only %d lines in the catalogues of %s (packages coreutils, "
                 "libglib2.0-data, libpam-runtime)" % (len(lines), ", ".join(DOMAINS)))
    with open(output, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
