#!/usr/bin/env python3
"""Writes a deterministic corpus of varied lines, as raw bytes, for comparing
tfenc's WordPiece tokenizer with Hugging Face's: English, accented Latin, CJK,
Arabic, Cyrillic and more scripts, emoji sequences, punctuation runs, numbers,
URLs, very long words, controls, literal special tokens, long lines that need
truncation, and invalid UTF-8. Lines are separated by b"\\n"; no line holds a
newline byte. Usage: make_corpus.py OUTPUT [N_LINES] [SEED]"""

import random
import sys
import unicodedata

ENGLISH = """the quick brown fox jumps over lazy dog tokenization transformer encoder
inference batch cluster weights embedding attention unaffable running jumped
international organization unbelievable electroencephalography antidisestablishmentarianism
Hello World It's don't can't won't O'Reilly McDonald's iPhone JavaScript PyTorch
state-of-the-art e-mail re-enter co-operate naïve résumé café coöperate Zürich
hyperparameter microbatch throughput latency GPU CPU HDF5 MPI OpenBLAS BERT
""".split()

FRENCH = "élève être garçon où déjà Noël français œuvre cœur Ça hôpital naïf château".split()
GERMAN = "Straße Größe Übung Äpfel Öl müssen Fußball Mädchen GRÜSSE ẞ schön".split()
VIETNAMESE = "Tiếng Việt người Việt Nam Hà Nội thành phố Hồ Chí Minh chữ quốc ngữ đẹp".split()
SPANISH = "señor niño año mañana corazón ¿qué? ¡hola! pingüino".split()
OTHER_LATIN = "Dvořák Łódź Kraków Ærø Þórr İstanbul ıspanak Şişli ǅemal ǈ ﬁne ﬂow".split()
GREEK = "Ελληνικά καλημέρα ΟΔΥΣΣΕΥΣ ψυχή Σίσυφος ἄνθρωπος ὁδός ᾨδή".split()
CYRILLIC = "Привет мир Москва ЁЛКА ёжик Україна їжак Беларусь ў Српски".split()
ARABIC = "مرحبا بالعالم اللغة العربية كتاب السلام عليكم ١٢٣ ٤٥٦ مُحَمَّد".split()
HEBREW = "שלום עולם עִבְרִית ספר".split()
DEVANAGARI = "नमस्ते हिन्दी भारत क्षत्रिय".split()
THAI = "สวัสดี ภาษาไทย ประเทศไทย".split()
CHINESE = "我爱北京天安门 中华人民共和国 机器学习 自然语言处理 繁體中文 漢字 𠀀𠀁 𪚥".split()
JAPANESE = "こんにちは 世界 カタカナ ひらがな 東京都 日本語の文章です ｶﾀｶﾅ ー々〆".split()
KOREAN = "안녕하세요 대한민국 한국어 서울특별시 ㄱㄴㄷ 똠방각하".split()
EMOJI = ["😀", "🥰", "🤩", "🦄", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇫🇷", "🇯🇵",
         "✌🏿", "🧑🏻‍🚀", "☕", "🎉", "💯", "🔥", "🙏🏼", "😂😂😂", "#️⃣", "©", "™"]
PUNCTUATION = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("¡¿«»‹›“”‘’„‚–—…·•†‡§¶‰′″※「」『』【】〈〉《》、。・！？（）［］｛｝：；，．")
SPECIAL = ["[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "[cls]", "[SEP", "SEP]", "[[MASK]]", "[unused0]", "[ MASK ]"]
URLS = ["https://example.com/path?q=1&r=2#frag", "http://www.test.org/index.html",
        "ftp://files.example.net/pub/file.tar.gz", "user.name+tag@example.co.uk",
        "C:\\Program Files\\tfenc\\bin", "/usr/local/lib/libtfenc.so.0", "v1.2.3-rc.4"]
# Whitespace and invisible characters that BertNormalizer maps or drops.
INVISIBLE = ["\t", "\r", " ", "\u00a0", "\u2003", "\u3000", "\u2028", "\u2029", "\u200b", "\u200d",
             "\u00ad", "\ufeff", "\u2060", "\u202e", "\x01", "\x07", "\x0b", "\x0c", "\x1b", "\x1f",
             "\x7f", "\x85", "\x9f", "\ue000", "\U000f0000", "\ufffd", "\ufe0f", "\u0378"]
# Combining marks: nonspacing (Mn) ones that stripping removes, and spacing
# ones (Mc) with non-zero combining classes that NFD reorders and keeps.
MARKS = [chr(c) for c in range(0x300, 0x370)] + ["\u0591", "\u05b0", "\u064b", "\u0650", "\u093c",
         "\u0903", "\U0001d165", "\U0001d166", "\U0001d16d", "\U0001d16e", "\U0001d172", "\u20dd", "\u0488"]
# Characters whose lower case is special: Turkish dotted I, final sigma,
# titlecase digraphs, Cherokee, Georgian Mtavruli, Roman numerals, circled letters.
CASE = ["İ", "I", "Σ", "ς", "ǅ", "ǲ", "Ꭰ", "Ꮿ", "Ა", "Ⴀ", "Ⅻ", "Ⓐ", "Ａ", "𐐀", "K", "Å", "Ω", "ẞ"]
SCRIPTS = [ENGLISH, FRENCH, GERMAN, VIETNAMESE, SPANISH, OTHER_LATIN, GREEK, CYRILLIC, ARABIC,
           HEBREW, DEVANAGARI, THAI, CHINESE, JAPANESE, KOREAN]
# Ill-formed UTF-8: stray continuations, truncated sequences, overlongs,
# encoded surrogates, bytes that never occur, code points past U+10FFFF.
INVALID = [b"\x80", b"\xbf", b"\x80\x80\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xc0\xaf",
           b"\xc1\xbf", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf",
           b"\xed\xa0\xbd\xed\xb8\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xff",
           b"\xf4\x90\x80\x80", b"\xe2\x28\xa1", b"\xc3\x28", b"\xf0\x28\x8c\x28", b"\xe1\x80\xe2\xf0\x91\x92\xf1\xbf\x41"]


def word(rng):
    return rng.choice(rng.choice(SCRIPTS))


def long_word(rng):
    """Words around and beyond the 100-character WordPiece limit."""
    kind = rng.randrange(5)
    if kind == 0:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(95, 140)))
    if kind == 1:
        return "a" * rng.choice([99, 100, 101, 102, 250])
    if kind == 2:  # made of real pieces, so WordPiece has work to do
        return "".join(rng.choice(ENGLISH).lower() for _ in range(rng.randint(8, 30)))
    if kind == 3:  # accents count as characters before stripping, not after
        return "é" * rng.choice([60, 99, 100, 101]) + "e" * rng.randint(0, 3)
    return "".join(rng.choice("ナニヌネノ한글ж") for _ in range(rng.randint(90, 110)))


def emoji_run(rng):
    return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4)))


def combining(rng):
    base = rng.choice("aeiouAEIOUnNcC")
    return base + "".join(rng.choice(MARKS) for _ in range(rng.randint(1, 5)))


def number(rng):
    forms = [lambda: str(rng.randint(0, 10 ** rng.randint(1, 12))),
             lambda: "{:,}".format(rng.randint(1000, 10 ** 9)),
             lambda: "%.3f" % rng.uniform(-1000, 1000),
             lambda: "%d%%" % rng.randint(0, 100),
             lambda: "1e-%d" % rng.randint(1, 12),
             lambda: "٣٫١٤", lambda: "½ ⅔ ²³", lambda: "１２３"]
    return rng.choice(forms)()


def random_text(rng):
    """Code points drawn from whole blocks, not only from word lists."""
    blocks = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x5ff),
              (0x900, 0x97f), (0x1e00, 0x1fff), (0x2000, 0x206f), (0x2100, 0x214f),
              (0x3040, 0x30ff), (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0xff00, 0xffef),
              (0x1f300, 0x1f5ff), (0x20000, 0x2a6df)]
    low, high = rng.choice(blocks)
    return "".join(chr(rng.randint(low, high)) for _ in range(rng.randint(1, 12)))


def sentence(rng, n_words):
    parts = []
    for _ in range(n_words):
        r = rng.random()
        if r < 0.55:
            w = word(rng)
            if rng.random() < 0.2:
                w = w.upper() if rng.random() < 0.5 else w.capitalize()
            parts.append(w)
        elif r < 0.63:
            parts.append(rng.choice(PUNCTUATION) * rng.randint(1, 3))
        elif r < 0.69:
            parts.append(number(rng))
        elif r < 0.73:
            parts.append(emoji_run(rng))
        elif r < 0.76:
            parts.append(rng.choice(URLS))
        elif r < 0.79:
            parts.append(combining(rng))
        elif r < 0.82:
            parts.append(rng.choice(CASE))
        elif r < 0.85:
            parts.append(rng.choice(SPECIAL))
        elif r < 0.88:
            parts.append(random_text(rng))
        elif r < 0.90:
            parts.append(long_word(rng))
        else:
            parts.append(rng.choice(INVISIBLE))
    text = ""
    for p in parts:
        # Words usually have a space between them, sometimes none or another separator.
        gap = rng.choices([" ", "", "  ", "\t", rng.choice(INVISIBLE)], [70, 10, 5, 5, 10])[0]
        text += (gap if text else "") + p
    if rng.random() < 0.3:  # both composed and decomposed accents
        text = unicodedata.normalize(rng.choice(["NFC", "NFD", "NFKC", "NFKD"]), text)
    return text


def corrupt(rng, data):
    """Splices ill-formed UTF-8 into a line, between or inside characters."""
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(data))
        data = data[:at] + rng.choice(INVALID) + data[at:]
    return data


def line(rng, index):
    kind = index % 20
    if kind == 0:  # long: several hundred pieces, cut at 128 and at 512
        text = sentence(rng, rng.randint(150, 700))
    elif kind == 1:
        text = " ".join(long_word(rng) for _ in range(rng.randint(1, 4)))
    elif kind == 2:
        text = "".join(rng.choice(PUNCTUATION) for _ in range(rng.randint(1, 40)))
    elif kind == 3:
        text = "".join(rng.choice(CHINESE + JAPANESE + KOREAN) for _ in range(rng.randint(1, 8)))
    elif kind == 4:
        text = " ".join(emoji_run(rng) for _ in range(rng.randint(1, 8)))
    elif kind == 5:
        text = " ".join(rng.choice(SPECIAL + ENGLISH) for _ in range(rng.randint(1, 10)))
    elif kind == 6:
        text = "".join(rng.choice(INVISIBLE + ["a", "b", " "]) for _ in range(rng.randint(0, 20)))
    elif kind == 7:
        text = " ".join(combining(rng) for _ in range(rng.randint(1, 10)))
    elif kind == 8:
        text = " ".join(rng.choice(CASE) + word(rng) for _ in range(rng.randint(1, 10)))
    else:
        text = sentence(rng, rng.randint(1, 40))
    data = text.encode("utf-8", "surrogatepass")
    if kind in (9, 10, 11) or rng.random() < 0.05:
        data = corrupt(rng, data)
    if index % 97 == 0:
        data = b""
    assert b"\n" not in data and b"\x00" not in data
    return data


def main():
    output = sys.argv[1]
    n_lines = int(sys.argv[2]) if len(sys.argv) > 2 else 2400
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 20240611
    rng = random.Random(seed)
    with open(output, "wb") as f:
        for i in range(n_lines):
            f.write(line(rng, i) + b"\n")


if __name__ == "__main__":
    main()
