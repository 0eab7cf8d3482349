"""Export the text corpus of the `train_gpt` example: the help topics of Python's `pydoc`
(`pydoc_data/topics.py`, part of CPython, under the Python Software Foundation License,
free to redistribute), joined in key order, with the few non-ASCII characters replaced by
ASCII ones so the vocabulary is the printable ASCII characters and the newline.

Run once with the Python that ships the topics (3.11 here): python3 export_corpus.py
It writes `pydoc_topics.txt` beside this script.
"""

import pathlib
import sys

import pydoc_data.topics as topics

ASCII = {
    "\u2013": "-",
    "\u2014": "--",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u00b0": " degrees",
    "\u00df": "ss",
    "\u00a0": " ",
    "\u2026": "...",
}


def clean(text: str) -> str:
    out = []
    for ch in text:
        ch = ASCII.get(ch, ch)
        if all(c == "\n" or 32 <= ord(c) < 127 for c in ch):
            out.append(ch)
        else:
            out.append("?")
    return "".join(out)


def main() -> None:
    text = "\n".join(clean(topics.topics[k]) for k in sorted(topics.topics))
    out = pathlib.Path(__file__).with_name("pydoc_topics.txt")
    out.write_text(text, encoding="ascii")
    print(f"{out}: {len(text)} characters, {len(set(text))} distinct, Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
