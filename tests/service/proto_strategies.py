"""Hypothesis strategies built from protobuf descriptors, not from hand-listed fields.

:func:`messages` draws a whole message of any type by walking its descriptor: scalars of every
wire type (biased to range edges), open enums (known and unknown numbers), nested messages (to a
depth), repeated fields, maps, oneofs (at most one member set) and proto3 ``optional`` presence.
``google.protobuf.Struct`` / ``Value`` / ``ListValue`` get JSON-like values, including non-finite
numbers, empty ``Value``s and nesting deeper than protobuf's parse limit.

:func:`mutated` starts from a message (a valid request) and applies a few mutations at random
places of its tree: clear a field, replace it with a drawn value, append to or empty a repeated
field, or set a string to an awkward one. Strings are biased toward awkward values (empty, huge,
control characters, unicode, look-alike prefixes) and toward the ``known`` strings of the
:class:`Vocabulary` (ids of sessions that exist, invocation ids, cursors...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor, message, message_factory
from hypothesis import strategies as st

FD = descriptor.FieldDescriptor

#: the deepest a drawn message nests other messages (below it, message fields stay unset)
MAX_DEPTH = 4

_INT_RANGES: dict[int, tuple[int, int]] = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1),
    FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1),
    FD.TYPE_FIXED64: (0, 2**64 - 1),
}

_SMALL_INTS = (0, 1, 2, 3, 5, 10, 100, 1000, 1001, 10_000, -1, -2, 2**31, 2**32, 2**53 + 1)

_FLOATS = (
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    1e-300,
    5e-324,
    1e10,
    1e300,
    -1e300,
    1.7976931348623157e308,
    253402300800.0,  # year 10000
    math.inf,
    -math.inf,
    math.nan,
)

#: strings that have broken parsers, validators and error messages before
AWKWARD_STRINGS: tuple[str, ...] = (
    "",
    " ",
    "a",
    " a",
    "a ",
    "\x00",
    "a\x00b",
    "\n",
    "\t",
    "\x7f",
    "\u0085",
    "\u00a0",
    "\u200b",
    "\u202e",
    "\ufeff",
    "\U0001f600",
    "é",
    "e\u0301",
    "%",
    "%00",
    "%s",
    "{",
    "}",
    "{}",
    "{0}",
    "{memories}",
    "{conversation_history}",
    "'",
    '"',
    "\\",
    "null",
    "true",
    "0",
    "-1",
    "01",
    "1e3",
    "9" * 19,
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "9" * 5000,
    "app:",
    "user:",
    "temp:",
    "app:k",
    "user:k",
    "temp:k",
    "..",
    "/",
    "*",
    "x" * 256,
    "x" * 257,
    "\U0001f600" * 256,
    "x" * 10_000,
    "\x01" * 3000,
    "[" * 3000,
)


@dataclass
class Vocabulary:
    """Strings worth trying besides random ones: ids that exist on the server, etc."""

    known: list[str] = field(default_factory=list)

    def strings(self) -> st.SearchStrategy[str]:
        awkward = st.sampled_from(AWKWARD_STRINGS)
        choices: list[st.SearchStrategy[str]] = [
            awkward,  # three times as likely as random text
            awkward,
            awkward,
            st.text(max_size=24),
            st.text(st.characters(codec="utf-8"), min_size=1, max_size=300),
        ]
        if self.known:
            choices += [st.sampled_from(self.known)] * 2
            # a known id made slightly different
            choices.append(
                st.tuples(st.sampled_from(self.known), st.sampled_from(AWKWARD_STRINGS[:20])).map(
                    lambda pair: pair[0] + pair[1]
                )
            )
        return st.one_of(choices)


def message_class(desc: descriptor.Descriptor) -> type[message.Message]:
    cls: type[message.Message] = message_factory.GetMessageClass(desc)
    return cls


def is_map(fd: Any) -> bool:
    return bool(
        fd.is_repeated and fd.message_type is not None and fd.message_type.GetOptions().map_entry
    )


def _real_oneofs(desc: descriptor.Descriptor) -> list[descriptor.OneofDescriptor]:
    """Oneofs other than the synthetic ones of proto3 ``optional`` fields."""
    return [o for o in desc.oneofs if not (len(o.fields) == 1 and o.name == "_" + o.fields[0].name)]


def integers(fd_type: int) -> st.SearchStrategy[int]:
    low, high = _INT_RANGES[fd_type]
    edges = [v for v in (*_SMALL_INTS, low, high, low + 1, high - 1) if low <= v <= high]
    return st.one_of(
        st.sampled_from(edges),
        st.integers(low, high),
        st.integers(-3, 20).filter(lambda v: low <= v <= high),
    )


def floats(width: int) -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from(_FLOATS), st.floats(width=width))  # type: ignore[arg-type]


def scalar(fd: descriptor.FieldDescriptor, vocab: Vocabulary) -> st.SearchStrategy[Any]:
    t = fd.type
    if t in _INT_RANGES:
        return integers(t)
    if t == FD.TYPE_DOUBLE:
        return floats(64)
    if t == FD.TYPE_FLOAT:
        return floats(32)
    if t == FD.TYPE_BOOL:
        return st.booleans()
    if t == FD.TYPE_STRING:
        return vocab.strings()
    if t == FD.TYPE_BYTES:
        return st.one_of(st.binary(max_size=64), st.just(b"\xff" * 5000))
    if t == FD.TYPE_ENUM:
        enum: Any = fd.enum_type
        known = [v.number for v in enum.values]
        return st.one_of(
            st.sampled_from(known),
            st.sampled_from([-1, max(known) + 1, 1000, 2**31 - 1, -(2**31)]),
            st.integers(-(2**31), 2**31 - 1),
        )
    raise TypeError(f"not a scalar field: {fd.full_name}")


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.floats(),
        st.sampled_from(_FLOATS),
        st.integers(-(2**60), 2**60).map(float),
        st.text(max_size=20),
        st.sampled_from(AWKWARD_STRINGS),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(
                st.one_of(st.text(max_size=8), st.sampled_from(AWKWARD_STRINGS)), inner, max_size=4
            ),
        ),
        max_leaves=max_leaves,
    )


def _deep_value(depth: int, kind: str) -> Any:
    value: Any = 1.0
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


@st.composite
def _struct_like(draw: st.DrawFn, desc: descriptor.Descriptor) -> message.Message:
    """A Struct, Value or ListValue: JSON-like content, sometimes an empty Value (not JSON) or
    nesting beyond protobuf's recursion limit (100)."""
    from google.protobuf import struct_pb2

    choice = draw(st.integers(0, 9))
    if choice == 0:
        content: Any = _deep_value(
            draw(st.sampled_from([60, 99, 101, 150])), draw(st.sampled_from(["list", "dict"]))
        )
    else:
        content = draw(json_values())
    value = struct_pb2.Value()
    try:
        _set_json(value, content)
    except (ValueError, TypeError, RecursionError):
        value.Clear()
    if choice == 1:  # an empty Value somewhere: a value with no kind
        target = value
        while target.WhichOneof("kind") in ("struct_value", "list_value"):
            if target.HasField("struct_value") and target.struct_value.fields:
                target = next(iter(target.struct_value.fields.values()))
            elif target.HasField("list_value") and target.list_value.values:
                target = target.list_value.values[0]
            else:
                break
        target.Clear()
    if desc.full_name == "google.protobuf.Value":
        return value
    if desc.full_name == "google.protobuf.ListValue":
        out = struct_pb2.ListValue()
        if value.HasField("list_value"):
            out.CopyFrom(value.list_value)
        else:
            out.values.add().CopyFrom(value)
        return out
    struct = struct_pb2.Struct()
    if value.HasField("struct_value"):
        struct.CopyFrom(value.struct_value)
    else:
        key = draw(st.one_of(st.just("k"), st.sampled_from(AWKWARD_STRINGS)))
        struct.fields[key].CopyFrom(value)
    return struct


def _set_json(target: Any, value: Any) -> None:
    """Sets a ``google.protobuf.Value`` from a Python JSON-like value (iteratively deep-safe for
    the depths drawn here)."""
    if value is None:
        target.null_value = 0
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, float):
        target.number_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, list):
        target.list_value.SetInParent()
        for item in value:
            _set_json(target.list_value.values.add(), item)
    elif isinstance(value, dict):
        target.struct_value.SetInParent()
        for key, item in value.items():
            _set_json(target.struct_value.fields[key], item)
    else:
        raise TypeError(type(value).__name__)


_STRUCT_TYPES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


def messages(
    desc: descriptor.Descriptor, vocab: Vocabulary, depth: int = 0
) -> st.SearchStrategy[message.Message]:
    """Any message of type ``desc``."""
    if desc.full_name in _STRUCT_TYPES:
        return _struct_like(desc)
    return _messages(desc, vocab, depth)


@st.composite
def _messages(
    draw: st.DrawFn, desc: descriptor.Descriptor, vocab: Vocabulary, depth: int
) -> message.Message:
    msg = message_class(desc)()
    oneof_members: set[str] = set()
    for oneof in _real_oneofs(desc):
        oneof_members.update(f.name for f in oneof.fields)
        chosen = draw(st.sampled_from([None, *oneof.fields]))
        if chosen is not None:
            _fill(draw, msg, chosen, vocab, depth)
    for fd in desc.fields:
        if fd.name in oneof_members:
            continue
        if draw(st.integers(0, 2)) == 0:  # a third of the fields stay unset
            continue
        _fill(draw, msg, fd, vocab, depth)
    return msg


def _fill(
    draw: st.DrawFn,
    msg: message.Message,
    fd: descriptor.FieldDescriptor,
    vocab: Vocabulary,
    depth: int,
) -> None:
    """Sets ``fd`` of ``msg`` to drawn content (appends, for a repeated field)."""
    if fd.message_type is not None and not is_map(fd) and depth >= MAX_DEPTH:
        return
    try:
        if is_map(fd):
            entry: Any = fd.message_type
            key_fd, value_fd = entry.fields_by_name["key"], entry.fields_by_name["value"]
            target = getattr(msg, fd.name)
            for _ in range(draw(st.integers(0, 3))):
                key = draw(scalar(key_fd, vocab))
                if value_fd.message_type is not None:
                    if depth + 1 >= MAX_DEPTH:
                        continue
                    target[key].CopyFrom(draw(messages(value_fd.message_type, vocab, depth + 1)))
                else:
                    target[key] = draw(scalar(value_fd, vocab))
        elif fd.is_repeated:
            target = getattr(msg, fd.name)
            count = draw(st.one_of(st.integers(0, 3), st.sampled_from([0, 1, 50, 2000])))
            if fd.message_type is not None:
                count = min(count, 4 if depth else 50)
                for _ in range(count):
                    target.add().CopyFrom(draw(messages(fd.message_type, vocab, depth + 1)))
            else:
                strategy = scalar(fd, vocab)
                if count > 3:  # many values: repeat one, not thousands of draws
                    target.extend([draw(strategy)] * count)
                else:
                    target.extend(draw(st.lists(strategy, min_size=count, max_size=count)))
        elif fd.message_type is not None:
            getattr(msg, fd.name).CopyFrom(draw(messages(fd.message_type, vocab, depth + 1)))
        else:
            setattr(msg, fd.name, draw(scalar(fd, vocab)))
    except (ValueError, TypeError):  # e.g. a value the Python runtime refuses to hold
        pass


# --- mutation of a valid message ---------------------------------------------------------------


def _mutation_sites(msg: message.Message, depth: int = 0) -> list[tuple[message.Message, Any]]:
    """Every (message, field) of ``msg``'s tree that a mutation may touch: every field of every
    message present in the tree (set or not), down to :data:`MAX_DEPTH`."""
    sites: list[tuple[message.Message, Any]] = []
    desc = msg.DESCRIPTOR
    if desc.full_name in _STRUCT_TYPES:
        return sites
    for fd in desc.fields:
        sites.append((msg, fd))
        if depth >= MAX_DEPTH or fd.message_type is None or is_map(fd):
            continue
        if fd.is_repeated:
            for child in list(getattr(msg, fd.name))[:4]:
                sites.extend(_mutation_sites(child, depth + 1))
        elif msg.HasField(fd.name):
            sites.extend(_mutation_sites(getattr(msg, fd.name), depth + 1))
    return sites


#: top-level fields mutated less often (a wrong address stops a request at its first check)
ADDRESS_FIELDS = frozenset({"app_name", "user_id", "session_id"})


def _mutate_once(draw: st.DrawFn, root: message.Message, vocab: Vocabulary) -> None:
    sites = _mutation_sites(root)
    deeper = [(m, fd) for m, fd in sites if m is not root or fd.name not in ADDRESS_FIELDS]
    if deeper and draw(st.integers(0, 3)) > 0:
        sites = deeper
    if not sites:
        return
    msg, fd = draw(st.sampled_from(sites))
    action = draw(st.sampled_from(["clear", "set", "set", "awkward", "grow", "huge"]))
    try:
        if action == "clear":
            msg.ClearField(fd.name)
        elif action == "huge":
            _make_huge(draw, msg, fd, vocab)
        elif action == "awkward" and fd.type == FD.TYPE_STRING and not fd.is_repeated:
            setattr(msg, fd.name, draw(st.sampled_from(AWKWARD_STRINGS)))
        elif action == "grow" and fd.is_repeated:
            values = getattr(msg, fd.name)
            if len(values) and not is_map(fd) and draw(st.booleans()):
                # duplicate an element (repeated ids, repeated sequences)
                first = values[0]
                if fd.message_type is not None:
                    values.add().CopyFrom(first)
                else:
                    values.append(first)
            else:
                _fill(draw, msg, fd, vocab, 1)
        else:
            if not fd.is_repeated or draw(st.booleans()):
                msg.ClearField(fd.name)
            _fill(draw, msg, fd, vocab, 1)
    except (ValueError, TypeError):
        pass


#: lengths of the long values a "huge" mutation sets
HUGE_LENGTHS = (257, 1000, 4301, 10_000, 60_000)


def huge_strings() -> st.SearchStrategy[str]:
    """Long strings: one awkward character (or a short awkward string) many times over."""
    unit = st.one_of(
        st.sampled_from(["x", "9", "\x00", "\x01", "\U0001f600", "é", "[", "%", " ", "\n"]),
        st.sampled_from(AWKWARD_STRINGS[:40]).filter(bool),
    )
    return st.tuples(unit, st.sampled_from(HUGE_LENGTHS)).map(
        lambda pair: (pair[0] * pair[1])[: pair[1]]
    )


def _make_huge(draw: st.DrawFn, msg: message.Message, fd: Any, vocab: Vocabulary) -> None:
    """Sets ``fd`` to something long: a long string or bytes, or many repeated values."""
    if fd.is_repeated and not is_map(fd):
        values = getattr(msg, fd.name)
        count = draw(st.sampled_from([100, 2000]))
        if fd.message_type is not None:
            if len(values):
                first = values[0]
                for _ in range(min(count, 200)):
                    values.add().CopyFrom(first)
            return
        if fd.type == FD.TYPE_STRING:
            element: Any = draw(st.one_of(vocab.strings(), huge_strings().map(lambda t: t[:300])))
        else:
            element = draw(scalar(fd, vocab))
        values.extend([element] * count)
    elif fd.type == FD.TYPE_STRING:
        setattr(msg, fd.name, draw(huge_strings()))
    elif fd.type == FD.TYPE_BYTES:
        setattr(msg, fd.name, bytes(draw(st.sampled_from(HUGE_LENGTHS))))
    else:
        _fill(draw, msg, fd, vocab, 1)


@st.composite
def mutated(
    draw: st.DrawFn, base: message.Message, vocab: Vocabulary, max_mutations: int = 4
) -> message.Message:
    """``base`` (not modified) with 1 to ``max_mutations`` mutations."""
    msg = type(base)()
    msg.CopyFrom(base)
    for _ in range(draw(st.integers(1, max_mutations))):
        _mutate_once(draw, msg, vocab)
    return msg


@st.composite
def corrupted_bytes(draw: st.DrawFn, valid: bytes) -> bytes:
    """``valid`` (an encoded message) with a few byte-level edits: flips, truncation, insertion
    of random bytes, or a field of a huge declared length."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "varint", "length"]))
        at = draw(st.integers(0, len(data))) if data else 0
        if kind == "flip" and data:
            at = min(at, len(data) - 1)
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "truncate":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "varint":  # an overlong varint
            data[at:at] = b"\x08" + b"\xff" * draw(st.integers(9, 12)) + b"\x01"
        else:  # field 1 as a length-delimited value longer than what follows
            data[at:at] = b"\x0a\xff\xff\xff\xff\x0f"
    return bytes(data)


def random_bodies(valid: Sequence[bytes]) -> st.SearchStrategy[bytes]:
    """Request bodies: random bytes, or encodings of valid requests with byte-level edits."""
    options: list[st.SearchStrategy[bytes]] = [st.binary(max_size=512)]
    if valid:
        options.append(st.sampled_from(list(valid)).flatmap(corrupted_bytes))
    return st.one_of(options)


def all_methods(
    files: Sequence[descriptor.FileDescriptor],
) -> list[descriptor.MethodDescriptor]:
    """Every method of every service of ``files``."""
    return [m for f in files for s in f.services_by_name.values() for m in s.methods]
