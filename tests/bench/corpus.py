"""The benchmark's real text: short sentences and ~256-token passages.

usage: corpus.py --tokenizer TOKENIZER.json --out DIR [--docs HTML_DIR | --lines FILE]
                 [--short N] [--passages N] [--seed S]

The text is the prose of the Python 3.11 documentation as Debian ships it
(package python3.11-doc, /usr/share/doc/python3.11/html; Python Software
Foundation License Version 2): the <p> paragraphs of its tutorial, how-tos,
FAQ, library and language references, "using" and "what's new" pages, in
file order. Code blocks, tables and navigation are left out. From it:

- short texts: sentences of 5 to 60 words (a paragraph split after . ! or ?
  before a capital), deduplicated, N drawn with a fixed seed;
- passages: consecutive sentences of one page joined until the next one
  would pass 256 tokens under the model's tokenizer ([CLS] and [SEP]
  included), kept when they reach 224, so each fills most of MiniLM's
  256-token window and none is truncated; N drawn with the same seed.

--lines FILE takes the sentences from a file of one text per line instead
(tests/import/sentences.txt for the smoke test, which must work without
the documentation package); its passages join consecutive lines the same way.

Writes DIR/short.txt and DIR/passages.txt (one document per line, tfenc's
text corpus format) and DIR/source.txt, which says where they came from.
"""

import argparse
import html.parser
import os
import random
import re
import subprocess
import sys

DOCS = "/usr/share/doc/python3.11/html"
DOCS_PACKAGE = "python3.11-doc"
# The prose parts of the documentation; c-api, distutils and the indexes are
# mostly signatures and lists.
DOCS_PARTS = ("tutorial", "howto", "faq", "library", "reference", "using", "whatsnew")
SHORT_WORDS = (5, 60)
PASSAGE_TOKENS = (224, 256)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


class Paragraphs(html.parser.HTMLParser):
    """The text of each <p> of a Sphinx page, whitespace collapsed. The
    permalink signs Sphinx puts after headings are not inside <p>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs, self.current = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            classes = dict(attrs).get("class") or ""
            # "Note", "See also": an admonition's title, not a sentence.
            self.current = None if "admonition-title" in classes else []

    def handle_endtag(self, tag):
        if tag == "p" and self.current is not None:
            text = " ".join("".join(self.current).split())
            if text:
                self.paragraphs.append(text)
            self.current = None

    def handle_data(self, data):
        if self.current is not None:
            self.current.append(data)


def docs_pages(root):
    """Each page's paragraphs, pages in sorted path order."""
    pages = []
    for part in DOCS_PARTS:
        for directory, subdirectories, files in os.walk(os.path.join(root, part)):
            subdirectories.sort()
            for name in sorted(files):
                if name.endswith(".html"):
                    parser = Paragraphs()
                    with open(os.path.join(directory, name), encoding="utf-8") as f:
                        parser.feed(f.read())
                    pages.append(parser.paragraphs)
    return pages


def lines_pages(path):
    """A file of one text per line as one page of one-sentence paragraphs."""
    with open(path, encoding="utf-8") as f:
        return [[line.strip() for line in f if line.strip()]]


def is_prose(sentence):
    """Mostly words: leaves out signatures, version tables and stray code."""
    letters = sum(c.isalpha() or c.isspace() for c in sentence)
    return letters >= 0.85 * len(sentence)


def build(pages, tokenizer, n_short, n_passages, seed, split_sentences):
    short, seen, passages = [], set(), []
    for page in pages:
        sentences = []
        for paragraph in page:
            sentences.extend(SENTENCE_END.split(paragraph) if split_sentences else [paragraph])
        # Token counts without [CLS]/[SEP]: BERT-style pre-tokenizers split
        # at whitespace, so joined sentences count the sum of their parts.
        counts = [len(e.ids) for e in tokenizer.encode_batch(sentences, add_special_tokens=False)] \
            if sentences else []
        for sentence in sentences:
            words = len(sentence.split())
            if SHORT_WORDS[0] <= words <= SHORT_WORDS[1] and is_prose(sentence) \
                    and sentence not in seen:
                seen.add(sentence)
                short.append(sentence)
        current, tokens = [], 2
        for sentence, count in zip(sentences, counts):
            if tokens + count > PASSAGE_TOKENS[1]:
                if tokens >= PASSAGE_TOKENS[0]:
                    passages.append(" ".join(current))
                current, tokens = [], 2
                if 2 + count > PASSAGE_TOKENS[1]:
                    continue  # one sentence longer than a passage
            current.append(sentence)
            tokens += count
        if tokens >= PASSAGE_TOKENS[0]:
            passages.append(" ".join(current))
    rng = random.Random(seed)
    short = rng.sample(short, min(n_short, len(short)))
    passages = rng.sample(passages, min(n_passages, len(passages)))
    return short, passages


def package_version(package):
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown version"


def mean_tokens(tokenizer, texts):
    return sum(len(e.ids) for e in tokenizer.encode_batch(texts)) / max(len(texts), 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", required=True, help="the model's tokenizer.json")
    parser.add_argument("--out", required=True)
    parser.add_argument("--docs", default=DOCS)
    parser.add_argument("--lines", help="one text per line instead of the documentation")
    parser.add_argument("--short", type=int, default=4000)
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    import tokenizers
    tokenizer = tokenizers.Tokenizer.from_file(args.tokenizer)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    if args.lines:
        pages, source = lines_pages(args.lines), os.path.abspath(args.lines)
    else:
        if not os.path.isdir(os.path.join(args.docs, "library")):
            sys.exit(f"corpus: {args.docs} has no library/: install the Debian package "
                     f"{DOCS_PACKAGE} (tests/bench/setup-bench does)")
        pages = docs_pages(args.docs)
        source = (f"the Python 3.11 documentation, Debian package {DOCS_PACKAGE} "
                  f"{package_version(DOCS_PACKAGE)} ({args.docs}, Python Software Foundation "
                  f"License Version 2)")
    short, passages = build(pages, tokenizer, args.short, args.passages, args.seed,
                            split_sentences=not args.lines)
    os.makedirs(args.out, exist_ok=True)
    for name, texts in (("short", short), ("passages", passages)):
        with open(os.path.join(args.out, f"{name}.txt"), "w", encoding="utf-8") as f:
            f.writelines(text + "\n" for text in texts)
    with open(os.path.join(args.out, "source.txt"), "w", encoding="utf-8") as f:
        f.write(f"{len(short)} short texts (mean {mean_tokens(tokenizer, short):.1f} tokens) and "
                f"{len(passages)} passages (mean {mean_tokens(tokenizer, passages):.1f} tokens) "
                f"from {source}\n")


if __name__ == "__main__":
    main()
