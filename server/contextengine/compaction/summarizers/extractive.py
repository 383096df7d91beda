"""An offline summarizer: no model, deterministic, built from the events of the range.

The summary is one text part of a ``model`` content, at most ``max_chars`` characters, made of
up to four sections (a section with nothing to say is left out):

.. code-block:: text

    Earlier summary:
    <the rolled-up previous summary, condensed: its first lines>
    User requests:
    - <what the user wrote, one line per message>
    Tools called: search (3), get_weather (1)
    Key facts:
    - <the most informative sentences of the agents' replies, and short tool results>

Where the pieces come from:

* the previous summary is a leading event authored ``model`` (the rolling seed) or any event
  carrying a compaction; when it is itself an extractive summary, its tool counts are merged into
  this one's instead of being repeated;
* user requests are the user's non-thought texts; tool names are counted from function calls
  (exact names, first-use order); thoughts are never used; credential-request events are skipped;
* facts are sentences of the other authors' texts, scored by how central their words are to the
  range (word frequency across all replies, normalised by length), with bonuses for numbers,
  capitalised names, identifiers and quoted values, the first sentence of a reply and later
  replies, and penalties for filler ("Sure, let me...") and questions. The best ones that fit are
  listed in their original order. Short tool results ("search returned {...}") compete too.

Budget: the tool line may take a quarter of ``max_chars``, requests and the earlier summary up to
30% each (requests keep the first and the most recent), facts the rest. Pure Python and linear in
the size of the range.

A range with nothing of the above (blank texts, replies too short to be facts, thoughts only)
still gets a summary: what it held, counted, and its short texts quoted (``Earlier turns: 2
events (1 from the user, 1 from agents). Short replies: "ok"``). A summarizer that answered
nothing would leave the range unsummarized and the compaction retried forever.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from contextengine.compaction.summarizers.summarizer import Summary, SummaryInput
from contextengine.core.compaction import is_credential_request
from contextengine.core.errors import ContextEngineError
from contextengine.core.structs import sorted_keys, struct_to_dict
from contextengine.v1 import content_pb2, event_pb2

__all__ = ["ExtractiveSummarizer"]

_EARLIER = "Earlier summary:"
_REQUESTS = "User requests:"
_TOOLS = "Tools called: "
_FACTS = "Key facts:"
_INVENTORY = "Earlier turns:"
#: ADK's own control tools: their results are bookkeeping, not facts (and each ADK port answers
#: a transfer differently: ``{'result': None}`` in Python, ``{}`` in Java, ``'Transfer queued'``
#: in TypeScript), so they are counted as calls but never quoted.
_CONTROL_TOOLS = frozenset({"transfer_to_agent"})
#: Short texts a summary with nothing else to say quotes, and the length each is cut to.
_MAX_SHORT_TEXTS = 5
_MAX_SHORT_TEXT = 60

#: Longest request, fact or earlier-summary line kept (longer ones are cut at a word boundary).
_MAX_LINE = 300
#: Tool results longer than this when printed are not offered as facts.
_MAX_TOOL_RESULT = 200
#: Facts scoring below this fraction of the best one are left out even when there is room.
_RELATIVE_FLOOR = 0.25
#: A request or earlier-summary line is shortened to fit only when this much room is left.
_MIN_CUT = 40
#: Below this budget a summary may be a cut-down fragment rather than whole sections.
_MIN_BUDGET = 400

_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\s*\n\s*")
_WORD = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*")
_IDENTIFIER = re.compile(r"\w[\w-]*[_/@#:]\w|`[^`]+`|\"[^\"]+\"|'[^'\s][^']*'")
_TOOL_COUNT = re.compile(r"(.+?) \((\d+)\)(?:, |$)")
_STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her his
    how i if in into is it its me my no not of on or our she so than that the their them then
    there these they this to too was we were what when where which who will with would you your
    yes also just very here now about all any some more most other such only own same""".split()  # noqa: SIM905
)
_FILLER = (
    "sure",
    "ok",
    "okay",
    "let me",
    "i will",
    "i'll",
    "i am going",
    "i'm going",
    "one moment",
    "great",
    "thanks",
    "thank you",
    "hello",
    "hi",
    "of course",
    "certainly",
)


@dataclass
class _Material:
    """What the range contains, in reading order."""

    earlier: list[str]
    requests: list[str]
    tools: Counter[str]
    #: (reply index, sentence) for agents' sentences and tool results (a tool result has the
    #: index of the reply after it, so it is scored as the first sentence of its own reply)
    sentences: list[tuple[int, str]]
    replies: int


class ExtractiveSummarizer:
    """Summaries without a model (see the module docstring for the format and the scoring)."""

    def __init__(self, max_chars: int = 2000) -> None:
        if max_chars <= 0:
            raise ValueError("max_chars must be > 0")
        self.max_chars = max_chars
        self.name = "extractive"

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_chars={self.max_chars})"

    async def summarize(self, request: SummaryInput) -> Summary:
        """The summary of ``request.events`` (never empty, see the module docstring)."""
        text = self.summary_text(request.events)
        content = content_pb2.Content(role="model", parts=[content_pb2.Part(text=text)])
        return Summary(content=content)

    def summary_text(self, events: Sequence[event_pb2.Event]) -> str:
        """The summary text of ``events``: never empty."""
        material = _collect(events)
        text = _compose(material, self.max_chars)
        if not text and self.max_chars < _MIN_BUDGET:
            # Too small for any whole section: the start of a roomier summary, cut.
            text = _clip(_compose(material, _MIN_BUDGET), self.max_chars)
        return text or _clip(_inventory(events), self.max_chars)


def _compose(material: _Material, budget: int) -> str:
    tools = _tool_line(material.tools, max(budget // 4, 1))
    used = len(tools) + 1 if tools else 0
    earlier = _section(
        _EARLIER,
        material.earlier,
        range(len(material.earlier)),
        budget * 3 // 10,
        cut=True,
        prefix_only=True,
    )
    requests = _section(_REQUESTS, *_request_lines(material.requests), budget * 3 // 10, cut=True)
    used += _cost(requests) + _cost(earlier)
    facts = _section(_FACTS, *_best_facts(material), budget - used)
    lines = [*earlier, *requests, *([tools] if tools else []), *facts]
    return _clip("\n".join(lines), budget)


def _collect(events: Sequence[event_pb2.Event]) -> _Material:
    material = _Material(earlier=[], requests=[], tools=Counter(), sentences=[], replies=0)
    for index, event in enumerate(events):
        if event.actions.HasField("compaction"):
            _add_earlier(material, _texts(event.actions.compaction.compacted_content.parts))
        if not event.HasField("content") or is_credential_request(event):
            continue
        parts = event.content.parts
        if index == 0 and event.author == "model":
            _add_earlier(material, _texts(parts))
            continue
        texts = _texts(parts)
        if event.author == "user":
            material.requests.extend(_one_line(text) for text in texts)
        elif texts:
            reply = material.replies
            material.replies += 1
            material.sentences.extend((reply, s) for text in texts for s in _sentences(text))
        for part in parts:
            if part.HasField("function_call"):
                material.tools[part.function_call.name] += 1
            if part.HasField("function_response"):
                result = _tool_result(part.function_response)
                if result:
                    material.sentences.append((material.replies, result))
                    material.replies += 1
    return material


def _inventory(events: Sequence[event_pb2.Event]) -> str:
    """What a range with nothing to extract held: its events counted by who wrote them, and
    its short texts (thoughts and credential requests left out)."""
    if not events:
        return f"{_INVENTORY} no events."
    users = sum(1 for event in events if event.author == "user")
    agents = len(events) - users
    count = f"{len(events)} event{'s' if len(events) != 1 else ''}"
    line = f"{_INVENTORY} {count} ({users} from the user, {agents} from agents)."
    short = [
        _one_line(text)
        for event in events
        if event.HasField("content") and not is_credential_request(event)
        for text in _texts(event.content.parts)
    ]
    quoted = "; ".join(f'"{_shorten(text, _MAX_SHORT_TEXT)}"' for text in short[:_MAX_SHORT_TEXTS])
    return f"{line}\nShort replies: {quoted}" if quoted else line


def _texts(parts: Iterable[content_pb2.Part]) -> list[str]:
    return [part.text for part in parts if part.text.strip() and not part.thought]


def _add_earlier(material: _Material, texts: list[str]) -> None:
    """Adds a previous summary's lines; an extractive summary's tool counts are merged instead."""
    for text in texts:
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line == _EARLIER:
                continue
            if line.startswith(_TOOLS):
                for name, count in _TOOL_COUNT.findall(line[len(_TOOLS) :]):
                    material.tools[name] += int(count)
                continue
            material.earlier.append("  " + _shorten(line, _MAX_LINE))


def _tool_result(response: content_pb2.FunctionResponse) -> str:
    if not response.HasField("response") or response.name in _CONTROL_TOOLS:
        return ""
    try:
        # Keys sorted: a Struct keeps no key order, and the summary must be deterministic.
        payload = str(sorted_keys(struct_to_dict(response.response, "response")))
    except ContextEngineError:  # a number that is not valid JSON
        return ""
    if payload == "{}" or len(payload) > _MAX_TOOL_RESULT:
        return ""
    return f"{response.name} returned {payload}"


def _one_line(text: str) -> str:
    return _shorten(" ".join(text.split()), _MAX_LINE)


def _sentences(text: str) -> Iterable[str]:
    for piece in _SENTENCE_BREAK.split(text):
        sentence = " ".join(piece.split()).lstrip("-*• ").strip()
        if sentence:
            yield _shorten(sentence, _MAX_LINE)


def _content_words(sentence: str) -> list[str]:
    return [
        word
        for word in (match.lower() for match in _WORD.findall(sentence))
        if (len(word) >= 3 or any(c.isdigit() for c in word)) and word not in _STOPWORDS
    ]


def _best_facts(material: _Material) -> tuple[list[str], list[int]]:
    """Candidate fact lines in reading order (duplicates and worthless sentences removed), and
    their indices best first (ties: earlier first)."""
    words_of = [_content_words(sentence) for _, sentence in material.sentences]
    frequency: Counter[str] = Counter()
    for words in words_of:
        frequency.update(set(words))
    last_reply = max(material.replies - 1, 1)
    lines: list[str] = []
    scores: list[float] = []
    seen: set[str] = set()
    previous_reply = -2
    for (reply, sentence), words in zip(material.sentences, words_of, strict=True):
        first_of_reply = reply != previous_reply
        previous_reply = reply
        key = " ".join(words) or sentence.lower()
        if key in seen:
            continue
        seen.add(key)
        score = _score(sentence, words, frequency, first_of_reply, reply / last_reply)
        if score > 0:
            lines.append(f"- {sentence}")
            scores.append(score)
    floor = _RELATIVE_FLOOR * max(scores, default=0.0)
    ranked = sorted(range(len(lines)), key=lambda i: (-scores[i], i))
    return lines, [i for i in ranked if scores[i] >= floor]


def _score(
    sentence: str,
    words: list[str],
    frequency: Counter[str],
    first_of_reply: bool,
    recency: float,
) -> float:
    tokens = _WORD.findall(sentence)
    has_digit = any(c.isdigit() for c in sentence)
    if len(tokens) < 3 and not has_digit:
        return 0.0  # "Done.", "Sure!"
    centrality = sum(min(frequency[word], 5) for word in set(words)) / math.sqrt(len(tokens) + 1)
    names = sum(1 for token in tokens[1:] if token[0].isupper())
    score = centrality
    score += 1.0 if has_digit else 0.0
    score += 0.4 * min(names, 3)
    score += 0.5 if _IDENTIFIER.search(sentence) else 0.0
    score += 0.3 if first_of_reply else 0.0
    score += 0.5 * recency
    if sentence.lower().startswith(_FILLER) and not has_digit:
        return 0.0  # "Sure, let me look that up."
    if sentence.endswith("?"):
        score *= 0.5
    return score


def _request_lines(requests: list[str]) -> tuple[list[str], list[int]]:
    """Distinct requests in order, and the order they survive a tight budget in: the first,
    then the most recent backwards."""
    unique = [f"- {request}" for request in dict.fromkeys(requests)]
    return unique, [0, *range(len(unique) - 1, 0, -1)] if unique else []


def _section(
    heading: str,
    lines: list[str],
    priority: Iterable[int],
    budget: int,
    *,
    cut: bool = False,
    prefix_only: bool = False,
) -> list[str]:
    """``heading`` and the ``lines`` that fit in ``budget`` characters (newlines counted), taken
    in ``priority`` order and printed in their own order. A line that does not fit is skipped,
    or with ``cut`` shortened to the room left when that is 40+ characters; with
    ``prefix_only`` the first line that does not fit ends the section. [] when no line fits."""
    remaining = budget - len(heading) - 1
    kept: dict[int, str] = {}
    for index in priority:
        line = lines[index]
        if len(line) + 1 > remaining and cut and remaining >= _MIN_CUT:
            line = _shorten(line, remaining - 1)
        if len(line) + 1 <= remaining:
            kept[index] = line
            remaining -= len(line) + 1
        elif prefix_only:
            break
    if not kept:
        return []
    return [heading, *(kept[index] for index in sorted(kept))]


def _cost(section: list[str]) -> int:
    return sum(len(line) + 1 for line in section)


def _tool_line(tools: Counter[str], budget: int) -> str:
    """``Tools called: a (2), b (1)`` in first-use order; names that do not fit are counted as
    ``+N more``."""
    if not tools:
        return ""
    items = [f"{name} ({count})" for name, count in tools.items()]
    line = _TOOLS + ", ".join(items)
    while len(line) > budget and items:
        items.pop()
        more = f"+{len(tools) - len(items)} more"
        line = _TOOLS + ", ".join([*items, more])
    return line if len(line) <= budget else ""


def _shorten(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, marked with "…"."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return text[: max(limit, 0)]
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else _shorten(text, limit)
