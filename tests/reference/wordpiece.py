"""A small BERT WordPiece tokenizer in pure Python, independent of tfenc's C one.

The reference for jobs/bert-text prefers the Hugging Face `tokenizers` package;
this module is the fallback when that package is not installed, and the two are
cross-checked when both are present. It follows Google's BERT BasicTokenizer +
WordpieceTokenizer in the order Hugging Face's BertNormalizer applies them:
clean text, space out CJK ideographs, strip accents, lower-case, split on
whitespace and punctuation, then greedy longest-match-first word pieces.
"""

import unicodedata

# Google's BERT turns a longer word into [UNK] rather than searching it.
MAX_INPUT_CHARS_PER_WORD = 100


def load_vocab(path):
    """Token -> id, id = line number from 0 (CRLF and a missing final newline tolerated)."""
    with open(path, "rb") as handle:
        text = handle.read().decode("utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {}
    for index, line in enumerate(lines):
        token = line[:-1] if line.endswith("\r") else line
        # A token listed twice keeps its last line's id, as Hugging Face's
        # WordPiece.read_file fills its map line by line.
        vocab[token] = index
    return vocab


def _is_whitespace(char):
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    # Tab, newline and carriage return count as whitespace, not control.
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char).startswith("C")


def _is_punctuation(char):
    code = ord(char)
    # BERT treats every non-alphanumeric ASCII character as punctuation,
    # including $, ^, ` and others that Unicode files under symbols.
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese_char(code):
    # The CJK Unified Ideograph blocks BERT's original code lists; Hangul and
    # kana are deliberately not in them.
    return (0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF
            or 0x20000 <= code <= 0x2A6DF or 0x2A700 <= code <= 0x2B73F
            or 0x2B740 <= code <= 0x2B81F or 0x2B820 <= code <= 0x2CEAF
            or 0xF900 <= code <= 0xFAFF or 0x2F800 <= code <= 0x2FA1F)


class BertWordPiece:
    """Encodes text to [CLS] pieces [SEP] ids, truncated like Hugging Face's truncation=True."""

    def __init__(self, vocab_path, lowercase=True, strip_accents=None, chinese_chars=True,
                 unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]"):
        self.vocab = load_vocab(vocab_path)
        self.lowercase = lowercase
        # None follows lowercase, as BERT's uncased models do.
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.chinese_chars = chinese_chars
        for token in (unk_token, cls_token, sep_token):
            if token not in self.vocab:
                raise ValueError(f"{vocab_path}: special token {token} is missing")
        self.unk_id = self.vocab[unk_token]
        self.cls_id = self.vocab[cls_token]
        self.sep_id = self.vocab[sep_token]

    def normalize(self, text):
        cleaned = []
        for char in text:
            code = ord(char)
            if code == 0 or code == 0xFFFD or _is_control(char):
                continue
            if _is_whitespace(char):
                cleaned.append(" ")
            elif self.chinese_chars and _is_chinese_char(code):
                cleaned.append(" " + char + " ")
            else:
                cleaned.append(char)
        text = "".join(cleaned)
        if self.strip_accents:
            text = "".join(c for c in unicodedata.normalize("NFD", text)
                           if unicodedata.category(c) != "Mn")
        if self.lowercase:
            text = text.lower()
        return text

    def pre_tokenize(self, text):
        words = []
        for chunk in text.split():
            current = []
            for char in chunk:
                if _is_punctuation(char):
                    if current:
                        words.append("".join(current))
                        current = []
                    words.append(char)
                else:
                    current.append(char)
            if current:
                words.append("".join(current))
        return words

    def word_pieces(self, word):
        if len(word) > MAX_INPUT_CHARS_PER_WORD:
            return [self.unk_id]
        pieces = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                candidate = word[start:end]
                if start > 0:
                    candidate = "##" + candidate
                if candidate in self.vocab:
                    found = self.vocab[candidate]
                    break
                end -= 1
            if found is None:
                # One unmatched remainder makes the whole word unknown.
                return [self.unk_id]
            pieces.append(found)
            start = end
        return pieces

    def encode(self, text, max_length):
        """Returns (ids, n_truncated): [CLS] + at most max_length-2 pieces + [SEP]."""
        pieces = []
        for word in self.pre_tokenize(self.normalize(text)):
            pieces.extend(self.word_pieces(word))
        keep = max_length - 2
        truncated = max(0, len(pieces) - keep)
        return [self.cls_id] + pieces[:keep] + [self.sep_id], truncated
