"""The proto reference: Markdown from the comments of proto/contextengine/v1/*.proto.

The .proto files are the contract and every service, RPC, message, field and enum value carries
a comment that states its invariants; this renders them, one Markdown page per file, from the
descriptors protoc builds with their source info (so the comments are protoc's reading of the
files, not a parse of our own). `make docs` calls it through scripts/docs_hooks.py; run alone it
writes the pages into a folder:

    python scripts/proto_doc.py OUT_DIR
"""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parents[1]
PROTO_ROOT = ROOT / "proto"
PACKAGE = "contextengine.v1"

# FileDescriptorProto / DescriptorProto / ... field numbers, for SourceCodeInfo paths.
_FILE_MESSAGE, _FILE_ENUM, _FILE_SERVICE, _FILE_SYNTAX = 4, 5, 6, 12
_MESSAGE_FIELD, _MESSAGE_NESTED, _MESSAGE_ENUM, _MESSAGE_ONEOF = 2, 3, 4, 8
_ENUM_VALUE = 2
_SERVICE_METHOD = 2

_SCALARS = {
    descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE: "double",
    descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT: "float",
    descriptor_pb2.FieldDescriptorProto.TYPE_INT64: "int64",
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT64: "uint64",
    descriptor_pb2.FieldDescriptorProto.TYPE_INT32: "int32",
    descriptor_pb2.FieldDescriptorProto.TYPE_FIXED64: "fixed64",
    descriptor_pb2.FieldDescriptorProto.TYPE_FIXED32: "fixed32",
    descriptor_pb2.FieldDescriptorProto.TYPE_BOOL: "bool",
    descriptor_pb2.FieldDescriptorProto.TYPE_STRING: "string",
    descriptor_pb2.FieldDescriptorProto.TYPE_BYTES: "bytes",
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT32: "uint32",
    descriptor_pb2.FieldDescriptorProto.TYPE_SFIXED32: "sfixed32",
    descriptor_pb2.FieldDescriptorProto.TYPE_SFIXED64: "sfixed64",
    descriptor_pb2.FieldDescriptorProto.TYPE_SINT32: "sint32",
    descriptor_pb2.FieldDescriptorProto.TYPE_SINT64: "sint64",
}
_WELL_KNOWN = "https://protobuf.dev/reference/protobuf/google.protobuf/#"


def descriptor_set(proto_root: Path = PROTO_ROOT) -> descriptor_pb2.FileDescriptorSet:
    """Our .proto files (and what they import) as protoc reads them, comments included."""
    from grpc_tools import protoc  # type: ignore[import-untyped]  # grpcio-tools (the dev extra)

    files = sorted(str(p.relative_to(proto_root)) for p in proto_root.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "set.binpb"
        status = protoc.main(
            [
                "protoc",
                f"-I{proto_root}",
                f"-I{include}",
                "--include_source_info",
                f"--descriptor_set_out={out}",
                *files,
            ]
        )
        if status != 0:
            raise RuntimeError(f"protoc failed ({status}) on {proto_root}")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


@dataclass
class _Comments:
    by_path: dict[tuple[int, ...], descriptor_pb2.SourceCodeInfo.Location]

    def leading(self, *path: int) -> str:
        location = self.by_path.get(path)
        return _dedent(location.leading_comments) if location else ""

    def detached(self, *path: int) -> str:
        location = self.by_path.get(path)
        if location is None:
            return ""
        return "\n\n".join(_dedent(c) for c in location.leading_detached_comments)


def _dedent(comment: str) -> str:
    lines = comment.rstrip().split("\n")
    lines = [line[1:] if line.startswith(" ") else line for line in lines]
    return "\n".join(lines).strip("\n")


def _escape(text: str) -> str:
    """`<` outside code spans would open an HTML tag in Markdown."""
    pieces = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;") for p in pieces)


def _cell(text: str) -> str:
    """A comment as one table cell: one line, pipes escaped."""
    return _escape(" ".join(text.split())).replace("|", "\\|")


class _Renderer:
    def __init__(self, files: list[descriptor_pb2.FileDescriptorProto]) -> None:
        # fully qualified type name -> (page, anchor) for our own types
        self.where: dict[str, tuple[str, str]] = {}
        # the service files first, then the others, each by name
        self.ours = sorted(
            (f for f in files if f.package == PACKAGE), key=lambda f: (not f.service, f.name)
        )
        for file in self.ours:
            page = _page_name(file.name)
            for message in file.message_type:
                self._index_message(page, f".{PACKAGE}", message)
            for enum in file.enum_type:
                self.where[f".{PACKAGE}.{enum.name}"] = (page, enum.name)

    def _index_message(
        self, page: str, scope: str, message: descriptor_pb2.DescriptorProto
    ) -> None:
        name = f"{scope}.{message.name}"
        anchor = name.removeprefix(f".{PACKAGE}.")
        self.where[name] = (page, anchor)
        for nested in message.nested_type:
            self._index_message(page, name, nested)
        for enum in message.enum_type:
            self.where[f"{name}.{enum.name}"] = (page, f"{anchor}.{enum.name}")

    def type_link(self, type_name: str, page: str) -> str:
        if type_name in self.where:
            target, anchor = self.where[type_name]
            shown = anchor
            href = f"#{anchor}" if target == page else f"{target}.md#{anchor}"
            return f"[`{shown}`]({href})"
        if type_name.startswith(".google.protobuf."):
            short = type_name.removeprefix(".google.protobuf.")
            return f"[`google.protobuf.{short}`]({_WELL_KNOWN}{short.lower()})"
        return f"`{type_name.lstrip('.')}`"

    def field_type(
        self,
        field: descriptor_pb2.FieldDescriptorProto,
        message: descriptor_pb2.DescriptorProto,
        page: str,
    ) -> str:
        label = ""
        if field.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED:
            entry = next(
                (n for n in message.nested_type if field.type_name.endswith(f".{n.name}")),
                None,
            )
            if entry is not None and entry.options.map_entry:
                key, value = entry.field[0], entry.field[1]
                return f"map&lt;{self.field_type(key, entry, page)}, {self.field_type(value, entry, page)}&gt;"
            label = "repeated "
        elif field.proto3_optional:
            label = "optional "
        if field.type_name:
            return label + self.type_link(field.type_name, page)
        return f"{label}`{_SCALARS[field.type]}`"

    def file_page(self, file: descriptor_pb2.FileDescriptorProto) -> str:
        page = _page_name(file.name)
        comments = _Comments({tuple(loc.path): loc for loc in file.source_code_info.location})
        out = [f"# {Path(file.name).name}", ""]
        out += [
            f"`{file.name}`, package `{file.package}`. Generated from the file's comments by "
            "`scripts/proto_doc.py`; the file itself is the contract.",
            "",
        ]
        intro = comments.detached(_FILE_SYNTAX) or comments.leading(_FILE_SYNTAX)
        if intro:
            out += [_escape(intro), ""]
        for i, service in enumerate(file.service):
            out += self.service(service, comments, (_FILE_SERVICE, i), page)
        for i, message in enumerate(file.message_type):
            out += self.message(message, comments, (_FILE_MESSAGE, i), page, message.name)
        for i, enum in enumerate(file.enum_type):
            out += self.enum(enum, comments, (_FILE_ENUM, i), enum.name)
        return "\n".join(out).rstrip() + "\n"

    def service(
        self,
        service: descriptor_pb2.ServiceDescriptorProto,
        comments: _Comments,
        path: tuple[int, ...],
        page: str,
    ) -> list[str]:
        out = _heading(service.name, comments.leading(*path))
        for j, method in enumerate(service.method):
            request = self.type_link(method.input_type, page)
            response = self.type_link(method.output_type, page)
            stream = "stream " if method.server_streaming else ""
            out += [
                f"### {method.name} {{ #{service.name}.{method.name} }}",
                "",
                f"`rpc {method.name}` ({request}) returns ({stream}{response})",
                "",
            ]
            if text := comments.leading(*path, _SERVICE_METHOD, j):
                out += [_escape(text), ""]
        return out

    def message(
        self,
        message: descriptor_pb2.DescriptorProto,
        comments: _Comments,
        path: tuple[int, ...],
        page: str,
        anchor: str,
    ) -> list[str]:
        if message.options.map_entry:
            return []
        out = _heading(anchor, comments.leading(*path))
        if message.field:
            out += ["| Field | Type | Description |", "| --- | --- | --- |"]
            for k, field in enumerate(message.field):
                kind = self.field_type(field, message, page)
                note = ""
                if field.HasField("oneof_index") and not field.proto3_optional:
                    note = f"One of `{message.oneof_decl[field.oneof_index].name}`. "
                text = _cell(note + comments.leading(*path, _MESSAGE_FIELD, k))
                out.append(f"| `{field.name}` = {field.number} | {kind} | {text} |")
            out.append("")
        for k, nested in enumerate(message.nested_type):
            out += self.message(
                nested, comments, (*path, _MESSAGE_NESTED, k), page, f"{anchor}.{nested.name}"
            )
        for k, enum in enumerate(message.enum_type):
            out += self.enum(enum, comments, (*path, _MESSAGE_ENUM, k), f"{anchor}.{enum.name}")
        return out

    def enum(
        self,
        enum: descriptor_pb2.EnumDescriptorProto,
        comments: _Comments,
        path: tuple[int, ...],
        anchor: str,
    ) -> list[str]:
        out = _heading(anchor, comments.leading(*path))
        out += ["| Value | Number | Description |", "| --- | --- | --- |"]
        for k, value in enumerate(enum.value):
            text = _cell(comments.leading(*path, _ENUM_VALUE, k))
            out.append(f"| `{value.name}` | {value.number} | {text} |")
        return [*out, ""]

    def index(self) -> str:
        out = [
            "# API reference",
            "",
            f"The `{PACKAGE}` API, one page per `.proto` file of `proto/contextengine/v1/`, "
            "generated from the files' comments at every build of this site "
            "(`scripts/proto_doc.py`). The files are the contract; these pages are their text.",
            "",
            "| File | Services | Messages and enums |",
            "| --- | --- | --- |",
        ]
        for file in self.ours:
            page = _page_name(file.name)
            services = ", ".join(f"[`{s.name}`]({page}.md#{s.name})" for s in file.service)
            types = len(file.message_type) + len(file.enum_type)
            out.append(f"| [{Path(file.name).name}]({page}.md) | {services} | {types} |")
        return "\n".join(out) + "\n"


def _heading(anchor: str, comment: str) -> list[str]:
    """A service's, message's or enum's heading (its name is its anchor) and its comment."""
    out = [f"## {anchor} {{ #{anchor} }}", ""]
    return [*out, _escape(comment), ""] if comment else out


def _page_name(proto_name: str) -> str:
    return Path(proto_name).stem


def pages(proto_root: Path = PROTO_ROOT) -> dict[str, str]:
    """Page name (without .md) -> Markdown: ``index`` and one per file of our package."""
    renderer = _Renderer(list(descriptor_set(proto_root).file))
    out = {"index": renderer.index()}
    for file in renderer.ours:
        out[_page_name(file.name)] = renderer.file_page(file)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in pages().items():
        (folder / f"{name}.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
