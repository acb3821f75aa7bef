"""The words and the tokenizer of the demo ranked models.

Twin of sdk/engines/demo/ranked-vocab.ts (the same string, the same ids): token 0 ends a
generation and pads a short context, tokens 1..127 are these words in order.
"""
from __future__ import annotations

from typing import List, Sequence

from .ranked_math import fnv1a32

_WORDS = """the a an and or but of to in on at with from under over near is was are were has had will can i
you he she it we they this that some every no cat dog fox bird fish tree river stone house road
city sea sky sun moon star rain wind fire light night day song book door window garden mountain
forest ship train machine worker gateway job queue model token word red orange yellow green blue
purple pink brown black white gray gold silver small large old new quiet bright dark warm cold
fast slow happy strange runs walks sleeps sings reads writes builds finds sees holds waits opens
carries slowly quickly again together always never here there today hello world time water"""

END_TOKEN = 0
VOCAB = ("<end>",) + tuple(_WORDS.split())
#: A prompt longer than this keeps its last MAX_PROMPT_TOKENS tokens.
MAX_PROMPT_TOKENS = 4096

_INDEX = {w: i for i, w in enumerate(VOCAB)}
_WORD_BYTES = frozenset(range(0x61, 0x7B)) | frozenset(range(0x30, 0x3A)) | frozenset(range(0x80, 0x100))


def _utf8(text: str) -> bytes:
    # A lone surrogate becomes U+FFFD, as Buffer.from(text, 'utf8') makes it in JavaScript.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace").encode("utf-8")


def tokenize(text: str) -> List[int]:
    """UTF-8 bytes with ASCII A-Z lowered, split into runs of [a-z0-9] and non-ASCII bytes; a word
    of the vocabulary is its id, any other 1 + FNV-1a(its bytes) mod 127 (never the end token)."""
    data = _utf8(text).translate(bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz"))
    ids: List[int] = []
    i, n = 0, len(data)
    while i < n:
        if data[i] not in _WORD_BYTES:
            i += 1
            continue
        end = i
        while end < n and data[end] in _WORD_BYTES:
            end += 1
        word = data[i:end]
        ids.append(_INDEX.get(word.decode("latin-1"), 1 + fnv1a32(word) % (len(VOCAB) - 1)))
        i = end
    return ids[-MAX_PROMPT_TOKENS:]


def detokenize(ids: Sequence[int]) -> str:
    """The words of generated ids, space-separated; the end token writes nothing."""
    return " ".join(VOCAB[i] for i in ids if i != END_TOKEN)
