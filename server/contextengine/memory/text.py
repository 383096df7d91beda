"""Keyword tokenization for memory search: what an entry can be found by, and what a query asks.

Pure and deterministic. The rules follow google-adk 2.13's keyword memory (spec section 9.2/9.3):

* Text is NFC-normalized and cut into ``\\w+`` words. A word that holds a non-ASCII character is
  also cut into its maximal runs of Latin characters (ASCII letters, digits and ``_``, or a
  character whose Unicode name starts with ``LATIN``) and of other characters, so that the Latin
  word inside ``私はPythonを使う`` is a word of its own. An entry's words are lowercased before
  they are cut (ADK's in-memory service), a query's words after (ADK's SQLite service):
  ``"İ".lower()`` is ``i`` plus a combining dot, which is not a Latin character.
* An ASCII query term matches an entry that has it as a word (whole words only: ``thon`` does not
  find ``python``).
* A query term with a non-ASCII character (a CJK run such as ``東京``, or ``café``) matches an
  entry where it occurs inside a word (``東京`` finds ``東京都に行きました``), which is ADK's
  in-memory rule for non-ASCII query words. Scripts written without spaces need it.

Backends index an entry as three token columns whose tokens never contain a space:

* ``words``: the entry's ASCII words and ASCII runs, in order (repeats kept: term frequency);
* ``grams``: for each word with a non-ASCII character (lowercased), its character bigrams in
  order, words separated by ``_`` (which is never a bigram), so that a query term of two or more
  characters is a phrase of its bigrams that can only match inside one word;
* ``chars``: the non-ASCII characters of those words (for one-character query terms).
"""

from __future__ import annotations

import enum
import itertools
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "GRAM_SEPARATOR",
    "MAX_INDEXED_BYTES",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "TOKENIZER_VERSION",
    "Document",
    "QueryTerm",
    "TermKind",
    "document",
    "is_latin",
    "query_terms",
    "script_runs",
]

#: UTF-8 bytes of an entry's text that are indexed (the rest is stored, not searchable); ADK's
#: SqliteMemoryService default
MAX_INDEXED_BYTES = 262_144
#: longest query accepted by SearchMemory (preload queries are cut to this length)
MAX_QUERY_CHARS = 10_000
#: distinct terms of a query that are searched for (the first ones; the rest are ignored)
MAX_QUERY_TERMS = 64
#: separates the bigrams of two words in the ``grams`` column
GRAM_SEPARATOR = "_"
#: the version of what :func:`document` makes of a text. Stored indexes keep the terms of their
#: entries; one written with another version is re-tokenized when it is opened, so raise this
#: whenever a change to the rules changes an entry's terms.
TOKENIZER_VERSION = 1

_WORD = re.compile(r"\w+")


def is_latin(char: str) -> bool:
    """ADK's rule: ASCII letters, digits and ``_``, or a character named ``LATIN ...``."""
    if char.isascii():
        return char.isalnum() or char == "_"
    return unicodedata.name(char, "").startswith("LATIN")


def script_runs(word: str) -> list[str]:
    """``word``'s maximal runs of Latin and of non-Latin characters (the word itself if ASCII)."""
    if word.isascii():
        return [word]
    return ["".join(group) for _, group in itertools.groupby(word, is_latin)]


def _words(text: str) -> Iterator[str]:
    return (match.group() for match in _WORD.finditer(unicodedata.normalize("NFC", text)))


@dataclass(frozen=True)
class Document:
    """The searchable terms of one entry's text."""

    #: ASCII words and the ASCII runs of other words, lowercased, in order
    words: tuple[str, ...]
    #: words holding a non-ASCII character, lowercased, in order
    tokens: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.words and not self.tokens

    def grams(self) -> list[str]:
        """The ``grams`` column's tokens."""
        out: list[str] = []
        for token in self.tokens:
            if len(token) < 2:
                continue
            if out:
                out.append(GRAM_SEPARATOR)
            out.extend(token[i : i + 2] for i in range(len(token) - 1))
        return out

    def chars(self) -> list[str]:
        """The ``chars`` column's tokens."""
        return [char for token in self.tokens for char in token if not char.isascii()]


def _truncate(text: str, max_bytes: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", errors="ignore")


def document(text: str, max_bytes: int = MAX_INDEXED_BYTES) -> Document:
    """The terms of ``text`` (its first ``max_bytes`` UTF-8 bytes)."""
    text = _truncate(text, max_bytes)
    if text.isascii():  # the common case: lowercasing ASCII text changes no word boundary
        return Document(tuple(_WORD.findall(text.lower())), ())
    words: list[str] = []
    tokens: list[str] = []
    for word in _words(text):
        if word.isascii():
            words.append(word.lower())
            continue
        lowered = word.lower()
        tokens.append(lowered)
        words.extend(run for run in script_runs(lowered) if run.isascii())
    return Document(tuple(words), tuple(tokens))


class TermKind(enum.Enum):
    #: an ASCII term: matches an entry with this word
    WORD = "word"
    #: a term with a non-ASCII character: matches an entry with a word that contains it
    SUBSTRING = "substring"


@dataclass(frozen=True)
class QueryTerm:
    kind: TermKind
    #: lowercased, at least one character, no whitespace
    text: str

    def bigrams(self) -> list[str]:
        return [self.text[i : i + 2] for i in range(len(self.text) - 1)]


def query_terms(query: str, max_terms: int = MAX_QUERY_TERMS) -> list[QueryTerm]:
    """The distinct terms of ``query`` in order of first appearance (at most ``max_terms``):
    each ``\\w+`` word cut into its script runs, lowercased. Operators and punctuation of any
    query language (quotes, ``*``, ``NEAR``, ``:``, parentheses, ``AND``) are text: punctuation
    is not part of a word, and words are plain terms."""
    seen: set[str] = set()
    terms: list[QueryTerm] = []
    for word in _words(query):
        for run in script_runs(word):
            text = run.lower()
            if not text or text in seen:
                continue
            seen.add(text)
            kind = TermKind.WORD if text.isascii() else TermKind.SUBSTRING
            terms.append(QueryTerm(kind, text))
            if len(terms) >= max_terms:
                return terms
    return terms


def count_in(term: QueryTerm, doc: Document) -> int:
    """How many times ``term`` occurs in ``doc``, counted the way FTS5 counts phrase instances
    in the index columns (overlapping occurrences inside a word each count)."""
    if term.kind is TermKind.WORD:
        return doc.words.count(term.text)
    if len(term.text) == 1:
        return sum(token.count(term.text) for token in doc.tokens)
    return sum(_overlapping(token, term.text) for token in doc.tokens)


def _overlapping(haystack: str, needle: str) -> int:
    count = 0
    start = haystack.find(needle)
    while start >= 0:
        count += 1
        start = haystack.find(needle, start + 1)
    return count


def token_count(doc: Document) -> int:
    """Tokens of the entry in all three columns (FTS5's document length for BM25)."""
    return len(doc.words) + len(doc.grams()) + len(doc.chars())


def matches(terms: Sequence[QueryTerm], doc: Document) -> int:
    """How many of ``terms`` occur in ``doc``."""
    return sum(1 for term in terms if count_in(term, doc))
