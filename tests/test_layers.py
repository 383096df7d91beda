"""The direction of imports is a test (issue #14, ``docs/adr/0009-engine-layering.md``).

Every module under ``server/contextengine`` and ``clients/python`` is parsed with ``ast``
(nothing is imported, so a broken module cannot hide its imports), and every import counts:
top-level, inside functions, under ``TYPE_CHECKING``, and ``importlib.import_module`` with a
literal name. The rules:

- core imports only core and the generated ``contextengine.v1`` (plus the standard library
  without I/O, ``google.protobuf`` and ``tiktoken``);
- a module never imports a layer above its own (``LAYERS`` is the table of the ADR);
- only the gRPC edge (servicers, transport, cli) and the client import grpc or a servicer (the
  settings do not: they are checked without it);
- the client imports no server module;
- a private module or name (a path segment starting with ``_``) is imported only from inside the
  package that holds it.

The meta-tests at the end plant violations in fake sources, so the checker cannot pass by
finding nothing.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
#: where the checked modules live: the server package, the client's own distribution, examples
SERVER_ROOT = ROOT / "server"
CLIENT_ROOT = ROOT / "clients" / "python"
#: the ADK drop-ins' distribution (contextengine.adk)
ADK_ROOT = ROOT / "clients" / "adk_python"
EXAMPLES_ROOT = ROOT / "examples"
ADR = ROOT / "docs" / "adr" / "0009-engine-layering.md"
#: directories never parsed (environments, build output, caches)
SKIPPED_DIRS = frozenset({".venv", "venv", "build", "dist", "node_modules", "__pycache__"})
PACKAGE = "contextengine"


@dataclass(frozen=True)
class Layer:
    """One row of the layer table: the modules that belong to it and what they may import."""

    name: str
    #: package prefixes (a module belongs to the layer of its longest matching prefix)
    packages: tuple[str, ...]
    #: the layers its modules may import besides their own and ``v1``
    may_import: tuple[str, ...]
    #: single modules that belong to the layer exactly (no prefix match)
    modules: tuple[str, ...] = ()


CORE = ("core", "core.context", "core.compaction", "core.prompt_cache", "core.context_tools")
_BELOW_ENGINE = ("compaction", "memory", "prompt_cache", "subscriptions", "runtime", "store", *CORE)

#: The layers, bottom first (``docs/adr/0009-engine-layering.md`` has the same table).
LAYERS = (
    Layer("v1", (f"{PACKAGE}.v1",), ()),
    # the server distribution's top level: its version and what Python 3.10 lacks (``_compat``);
    # ``contextengine`` is a namespace package shared with the client distribution (an
    # ``__init__`` would belong here too)
    Layer("root", (), (), modules=(PACKAGE, f"{PACKAGE}.version", f"{PACKAGE}._compat")),
    Layer("core", (f"{PACKAGE}.core",), ()),
    Layer("core.context", (f"{PACKAGE}.core.context",), ("core",)),
    Layer("core.compaction", (f"{PACKAGE}.core.compaction",), ("core", "core.context")),
    Layer(
        "core.prompt_cache",
        (f"{PACKAGE}.core.prompt_cache",),
        ("core", "core.context", "core.compaction"),
    ),
    Layer(
        "core.context_tools",
        (f"{PACKAGE}.core.context_tools",),
        ("core", "core.context", "core.compaction"),
    ),
    Layer("store", (f"{PACKAGE}.store",), ("root", *CORE)),
    Layer("runtime", (f"{PACKAGE}.runtime",), ("store", *CORE)),
    Layer("compaction", (f"{PACKAGE}.compaction",), ("root", "runtime", "store", *CORE)),
    Layer("memory", (f"{PACKAGE}.memory",), ("runtime", "store", *CORE)),
    Layer("subscriptions", (f"{PACKAGE}.subscriptions",), ("root", "runtime", "store", *CORE)),
    # prompt_cache.compaction_policy implements compaction's policy protocol
    Layer(
        "prompt_cache",
        (f"{PACKAGE}.prompt_cache",),
        ("root", "compaction", "runtime", "store", *CORE),
    ),
    Layer("engine", (f"{PACKAGE}.engine",), _BELOW_ENGINE),
    # the transport's edge: tokens, the per-RPC authorization table, TLS, bind policy (core's
    # errors only; nothing of the engine)
    Layer("auth", (f"{PACKAGE}.auth",), ("root", "core")),
    # the sidecar's settings (ServerSettings: the engine's and the transport's) and their checks,
    # the edge's among them: data, no grpc (tests/test_startup_imports.py)
    Layer(
        "settings", (), ("root", "auth", "engine", *_BELOW_ENGINE), modules=(f"{PACKAGE}.settings",)
    ),
    # thin servicers: the engine, and core's errors (nothing of the engine's parts); the handler
    # wrapper runs auth's check
    Layer("service", (f"{PACKAGE}.service",), ("auth", "engine", "core")),
    # the transport's observability: the operations HTTP port, Prometheus metrics, OpenTelemetry
    # traces, JSON logs; the engine's Telemetry hook and the handler wrapper's RpcObserver
    Layer(
        "observability",
        (f"{PACKAGE}.observability",),
        ("root", "service", "settings", "engine", *_BELOW_ENGINE),
    ),
    # the read-only session inspector in the browser (issue #21): JSON views and server-sent
    # events over the engine, served on the operations port, authorized by auth's table
    Layer(
        "inspector",
        (f"{PACKAGE}.inspector",),
        ("observability", "service", "auth", "engine", *_BELOW_ENGINE),
    ),
    # the gRPC transport: the servicers bound, health, reflection, TLS, graceful shutdown
    Layer(
        "transport",
        (),
        ("settings", "inspector", "auth", "observability", "service", "engine", *_BELOW_ENGINE),
        modules=(f"{PACKAGE}.transport",),
    ),
    # the sidecar as a process: the serve loop (signals, the event loop) over the transport, and
    # the process-wide tuning it applies (the garbage collector's policy, malloc's thresholds);
    # observability reads the collector's pauses through its own protocol (GcSource)
    Layer("process", (f"{PACKAGE}.process",), ("transport", "settings", "observability")),
    Layer(
        "cli",
        (),
        (
            "root",
            "process",
            "transport",
            "settings",
            "auth",
            "observability",
            "service",
            "engine",
            "console",
            *_BELOW_ENGINE,
        ),
        modules=(
            f"{PACKAGE}.cli",
            f"{PACKAGE}.config",
            f"{PACKAGE}.__main__",
        ),
    ),
    # what tests, benchmarks and scripts start: a sidecar in process, a throw-away PostgreSQL
    # cluster (``contextengine.testing``); nothing of the server imports it
    Layer(
        "testing",
        (f"{PACKAGE}.testing",),
        ("root", "transport", "settings", "engine", "client", *_BELOW_ENGINE),
    ),
    # the client distribution (clients/python): its package, and the programs beside it that are
    # not in the package (its conformance runner)
    Layer("client", (f"{PACKAGE}.client", "clients.python"), ()),
    # the operator's CLI (contextengine sessions|events|context|...; docs/design/console.md): a
    # client of the sidecar, shipped by the client distribution (its `cli` extra), so the public
    # client only (and the generated stubs)
    Layer("console", (f"{PACKAGE}.console",), ("client",)),
    # the ADK drop-ins' embedded backend: the one module of contextengine.adk over the engine
    Layer("adk.embedded", (), ("client", "engine", "core"), modules=(f"{PACKAGE}.adk._embedded",)),
    # the ADK drop-ins (clients/adk_python): the public client, and the engine only through
    # their embedded backend
    Layer("adk", (f"{PACKAGE}.adk",), ("client", "adk.embedded")),
    # the guides' programs: what a user writes, so only the public client, engine and ADK
    # drop-ins; the demo prints with the console's renderer
    Layer("examples", ("examples",), ("client", "engine", "adk", "console")),
)
LAYER_NAMES = frozenset(layer.name for layer in LAYERS)
#: the layers that may speak gRPC (the edge, the client, and the generated stubs themselves)
GRPC_LAYERS = frozenset(
    {
        "auth",
        "service",
        "observability",
        "transport",
        "cli",
        # it health-checks the sidecar processes it starts
        "testing",
        "client",
        "adk",
        "adk.embedded",
        "examples",
        "v1",
    }
)
GRPC_PACKAGES = ("grpc", "grpc_status", "grpc_health", "grpc_reflection")
#: what core may import from outside the standard library (pure computation)
#: (tiktoken and bpe-openai are tokenizers: their vocabularies ship inside their wheels; rfc8785
#: is RFC 8785 canonical JSON, pure Python)
CORE_THIRD_PARTY = ("google.protobuf", "tiktoken", "bpe_openai", "rfc8785")
#: standard-library modules core must not import: I/O and concurrency belong above it
CORE_NO_IO = frozenset(
    {
        "asyncio",
        "concurrent",
        "ftplib",
        "http",
        "multiprocessing",
        "selectors",
        "shutil",
        "socket",
        "sqlite3",
        "ssl",
        "subprocess",
        "tempfile",
        "threading",
        "urllib",
    }
)


@dataclass(frozen=True)
class Source:
    """One module to check: its dotted name, where it is, and its text."""

    name: str
    path: str
    text: str
    is_package: bool = False


@dataclass(frozen=True)
class Import:
    """One imported dotted name (a module, or ``module.attribute`` for ``from m import a``)."""

    importer: Source
    target: str
    line: int


@dataclass(frozen=True)
class Violation:
    rule: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    if PACKAGE in parts:  # clients/python/[src/]contextengine/...: the importable name
        parts = parts[len(parts) - parts[::-1].index(PACKAGE) - 1 :]
    elif root == CLIENT_ROOT:  # a program beside the client package (runner, tests)
        parts = ["clients", "python", *parts]
    elif root == EXAMPLES_ROOT:
        parts = ["examples", *parts]
    return ".".join(parts), is_package


def discover() -> dict[str, Source]:
    """Every module of the server package, the client distribution and the examples."""
    found: dict[str, Source] = {}
    for root in (SERVER_ROOT, CLIENT_ROOT, ADK_ROOT, EXAMPLES_ROOT):
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.py")):
            if SKIPPED_DIRS.intersection(path.relative_to(root).parts):
                continue
            name, is_package = _module_name(path, root)
            found[name] = Source(name, str(path.relative_to(ROOT)), path.read_text(), is_package)
    return found


def _package_of(source: Source) -> str:
    return source.name if source.is_package else source.name.rpartition(".")[0]


def _imports(source: Source) -> Iterator[Import]:
    tree = ast.parse(source.text, filename=source.path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(source, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(source).split(".")
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                yield Import(
                    source, base if alias.name == "*" else f"{base}.{alias.name}", node.lineno
                )
        elif (
            isinstance(node, ast.Call)
            and _called_name(node.func) in {"import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield Import(source, node.args[0].value, node.lineno)


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_of(name: str) -> str | None:
    """The layer a dotted name belongs to (longest package prefix, or an exact module)."""
    best: tuple[int, str] | None = None
    for layer in LAYERS:
        if name in layer.modules:
            return layer.name
        for prefix in layer.packages:
            if _within(name, prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), layer.name)
    return None if best is None else best[1]


def _private_owner(target: str, packages: frozenset[str]) -> str | None:
    """The package that holds the first private segment of ``target``, if it has one."""
    parts = target.split(".")
    for index, segment in enumerate(parts):
        if segment.startswith("_") and not (segment.startswith("__") and segment.endswith("__")):
            container = ".".join(parts[:index])
            return container if container in packages else container.rpartition(".")[0]
    return None


def _resolved(target: str, sources: Mapping[str, Source]) -> str:
    """``pkg.module`` for ``from pkg import module``; attributes keep their module's name."""
    return target if target in sources else target.rpartition(".")[0] or target


def check(sources: Mapping[str, Source]) -> list[Violation]:
    """Every broken rule in ``sources`` (the checker itself, fed fake sources by the meta-tests)."""
    packages = frozenset(
        {s.name for s in sources.values() if s.is_package}
        | {name.rpartition(".")[0] for name in sources if "." in name}
    )
    allowed = {layer.name: {layer.name, "v1", *layer.may_import} for layer in LAYERS}
    violations: list[Violation] = []
    for source in sources.values():
        here = layer_of(source.name)
        if here is None:
            violations.append(
                Violation("unassigned", source.path, f"{source.name} belongs to no layer (LAYERS)")
            )
            continue
        for imp in _imports(source):
            where = f"{source.path}:{imp.line}"
            for rule, message in _broken(here, imp, sources, packages, allowed):
                violations.append(Violation(rule, where, f"{source.name} imports {message}"))
    return violations


def _broken(
    here: str,
    imp: Import,
    sources: Mapping[str, Source],
    packages: frozenset[str],
    allowed: Mapping[str, set[str]],
) -> Iterator[tuple[str, str]]:
    target = imp.target
    ours = _within(target, PACKAGE)
    if here in CORE and not ours and not _pure(target):
        yield "core", f"{target} (core is pure: standard library without I/O, {CORE_THIRD_PARTY})"
    if here not in GRPC_LAYERS and (
        any(_within(target, g) for g in GRPC_PACKAGES) or "_pb2_grpc" in target
    ):
        yield "grpc", f"{target} (only {sorted(GRPC_LAYERS)} speak gRPC; layer {here} is below)"
    if not ours:
        return
    there = layer_of(_resolved(target, sources))
    owner = _private_owner(target, packages)
    if owner is not None and not _within(_package_of(imp.importer), owner):
        init = f"{owner.replace('.', '/')}/__init__.py"
        yield "private", f"{target} (private to {owner}: export it from {init})"
    if there is None:
        yield "unassigned", f"{target}, which belongs to no layer"
    elif there not in allowed[here]:
        if here in CORE and there not in CORE:
            rule = "core"
        elif here == "client":
            rule = "client"
        else:
            rule = "layer"
        yield rule, f"{target} (layer {here} may not import layer {there})"


def _pure(target: str) -> bool:
    top = target.partition(".")[0]
    if top in sys.stdlib_module_names:
        return top not in CORE_NO_IO
    return any(_within(target, allowed) for allowed in CORE_THIRD_PARTY)


# --------------------------------------------------------------------------- the real tree


@pytest.fixture(scope="module")
def found() -> list[Violation]:
    return check(discover())


def _assert_none(found: list[Violation], rule: str, what: str) -> None:
    offenders = sorted(str(v) for v in found if v.rule == rule)
    assert not offenders, (
        f"{what} ({len(offenders)} offending imports; docs/adr/0009-engine-layering.md):\n  "
        + "\n  ".join(offenders)
    )


#: the tests and the benchmarks: tests may use the benchmarks' machinery (they run each
#: benchmark in small, and the differential tests drive google-adk through ``bench.peers``), the
#: benchmarks never import the tests; what both need lives in ``contextengine.testing``
HARNESS_ROOTS = {"tests": ROOT / "tests", "bench": ROOT / "bench"}


def harness_imports() -> list[tuple[str, str, str]]:
    """(tree, file, imported module) of every import in tests/ and bench/ that names the other
    tree."""
    found: list[tuple[str, str, str]] = []
    for tree, root in HARNESS_ROOTS.items():
        other = "bench" if tree == "tests" else "tests"
        for path in sorted(root.rglob("*.py")):
            source = Source(tree, str(path.relative_to(ROOT)), path.read_text())
            found.extend(
                (tree, source.path, imported.target)
                for imported in _imports(source)
                if _within(imported.target, other)
            )
    return found


def test_the_benchmarks_never_import_the_tests() -> None:
    offenders = [f"{path}: {target}" for tree, path, target in harness_imports() if tree == "bench"]
    assert not offenders, (
        "bench/ imports tests/ (move what both need to contextengine.testing):\n  "
        + ("\n  ".join(offenders))
    )
    assert any(tree == "tests" for tree, _, _ in harness_imports())  # the scan sees imports


def test_the_trees_are_found() -> None:
    sources = discover()
    layers = {layer_of(name) for name in sources}
    assert len(sources) > 80
    assert {"core", "core.context", "store", "runtime", "service", "transport"} <= layers
    assert f"{PACKAGE}.core.context._rewind" in sources
    assert f"{PACKAGE}.client" in sources
    if any(CLIENT_ROOT.rglob("*.py")):
        assert any(s.path.startswith("clients/python/") for s in sources.values())


def test_the_layer_table_is_acyclic() -> None:
    graph = {layer.name: set(layer.may_import) for layer in LAYERS}
    for layer in LAYERS:
        assert set(layer.may_import) <= LAYER_NAMES, layer
        assert layer.name not in layer.may_import, layer
    done: set[str] = set()
    while len(done) < len(graph):
        ready = {name for name, deps in graph.items() if name not in done and deps <= done}
        assert ready, f"the layer table has a cycle among {sorted(set(graph) - done)}"
        done |= ready


def test_the_adr_has_the_same_table() -> None:
    """The ADR's rows name the layers of ``LAYERS``, in the same order (bottom first)."""
    rows = re.findall(r"^\| `([a-z0-9_.]+)` \|", ADR.read_text(), flags=re.M)
    assert rows == [layer.name for layer in LAYERS], f"update the table of {ADR.name}"


def test_every_module_belongs_to_a_layer(found: list[Violation]) -> None:
    _assert_none(found, "unassigned", "every module belongs to a row of LAYERS")


def test_core_imports_only_core_and_generated_code(found: list[Violation]) -> None:
    _assert_none(found, "core", "core imports only core and contextengine.v1")


def test_imports_point_down(found: list[Violation]) -> None:
    _assert_none(found, "layer", "a module imports only its own layer and the layers below")


def test_grpc_stays_at_the_edge(found: list[Violation]) -> None:
    _assert_none(found, "grpc", "nothing below the servicers imports grpc or a servicer")


def test_the_client_imports_no_server_module(found: list[Violation]) -> None:
    _assert_none(found, "client", "the client imports only itself and contextengine.v1")


def test_private_modules_stay_in_their_package(found: list[Violation]) -> None:
    _assert_none(found, "private", "a private module is imported only inside its package")


# --------------------------------------------------------------------------- the checker itself


def _fake(name: str, text: str, *, is_package: bool = False) -> Source:
    return Source(name, f"fake/{name.replace('.', '/')}.py", text, is_package)


def _check_fakes(*sources: Source) -> list[Violation]:
    return check({source.name: source for source in sources})


#: (importer, its source, the rule it breaks, a word the message must name)
PLANTED = [
    ("contextengine.core.fake", "from contextengine.store import SqliteStore\n", "core", "store"),
    ("contextengine.core.fake", "import aiosqlite\n", "core", "aiosqlite"),
    ("contextengine.core.fake", "def f():\n    import asyncio\n", "core", "asyncio"),
    (
        "contextengine.core.context.fake",
        "from contextengine.core.compaction import summary_event\n",
        "layer",
        "core.compaction",
    ),
    (
        "contextengine.store.fake",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from contextengine.runtime.event_cache import SessionEventCache\n",
        "layer",
        "runtime",
    ),
    (
        "contextengine.compaction.fake",
        "async def f():\n    from contextengine.prompt_cache import service\n",
        "layer",
        "prompt_cache",
    ),
    ("contextengine.engine.fake", "from contextengine.service import x\n", "layer", "service"),
    (
        "contextengine.service.fake",
        "from contextengine.runtime.event_cache import SessionEventCache\n",
        "layer",
        "runtime",
    ),
    ("contextengine.memory.fake", "from ..subscriptions import broadcaster\n", "layer", "subscr"),
    ("contextengine.runtime.fake", "import grpc\n", "grpc", "grpc"),
    (
        "contextengine.engine.fake",
        "from contextengine.v1 import context_service_pb2_grpc\n",
        "grpc",
        "_pb2_grpc",
    ),
    ("contextengine.client.fake", "from contextengine.core import structs\n", "client", "core"),
    (
        "contextengine.client.fake",
        "import importlib\nimportlib.import_module('contextengine.store')\n",
        "client",
        "store",
    ),
    (
        "contextengine.memory.fake",
        "from contextengine.store.sqlite._writer import WriteTx\n",
        "private",
        "contextengine.store.sqlite",
    ),
    (
        # one backend's subpackage does not reach into another's (shared helpers live in store)
        "contextengine.store.postgres._ops",
        "from contextengine.store.sqlite._writer import WriteTx\n",
        "private",
        "contextengine.store.sqlite",
    ),
    (
        "contextengine.compaction.fake",
        "from contextengine.core.context import _rewind\n",
        "private",
        "contextengine.core.context",
    ),
    (
        "contextengine.memory.fake",
        "from contextengine.store.sqlite import _not_open\n",
        "private",
        "contextengine.store.sqlite",
    ),
    ("examples.python.fake", "from contextengine.store import MemoryStore\n", "layer", "store"),
    ("contextengine.adk.fake", "from contextengine.engine import Engine\n", "layer", "engine"),
    ("contextengine.adk.fake", "from contextengine.store import MemoryStore\n", "layer", "store"),
    ("contextengine.stray", "import json\n", "unassigned", "no layer"),
    ("contextengine.core.fake", "from contextengine._compat import timeout\n", "core", "root"),
]


@pytest.mark.parametrize(("name", "text", "rule", "word"), PLANTED)
def test_the_checker_catches_a_planted_violation(
    name: str, text: str, rule: str, word: str
) -> None:
    planted = _fake(name, text)
    found = _check_fakes(
        planted,
        _fake("contextengine.store", "", is_package=True),
        _fake("contextengine.store.sqlite", "def _not_open(): ...\n", is_package=True),
        _fake("contextengine.store.sqlite._writer", "class WriteTx: ...\n"),
        _fake("contextengine.core.context", "", is_package=True),
        _fake("contextengine.core.context._rewind", "def apply_rewinds(): ...\n"),
    )
    mine = [v for v in found if v.where.startswith(planted.path)]
    assert [v.rule for v in mine] == [rule], mine
    assert word in mine[0].message
    assert mine[0].where == f"{planted.path}:{text.count(chr(10))}" or rule == "unassigned"


def test_the_checker_accepts_what_the_rules_allow() -> None:
    found = _check_fakes(
        _fake(
            "contextengine.core.context",
            "from contextengine.core.context._rewind import x\n",
            is_package=True,
        ),
        _fake("contextengine.core.context._rewind", "from contextengine.v1 import event_pb2\n"),
        _fake(
            "contextengine.core.compaction._planner",
            "import json\nfrom google.protobuf import struct_pb2\n"
            "from contextengine.core.context import apply_rewinds\n",
        ),
        _fake(
            "contextengine.store.sqlite",
            "from contextengine.store.sqlite._store import SqliteStore\n",
            is_package=True,
        ),
        _fake("contextengine.store.sqlite._store", "from contextengine.store import _secrets\n"),
        _fake(
            "contextengine.store._secrets", "import sqlite3\nfrom contextengine._compat import x\n"
        ),
        _fake("contextengine.prompt_cache.policy", "from contextengine.compaction import x\n"),
        _fake("contextengine.service.s", "import grpc\nfrom contextengine.engine import Engine\n"),
        _fake("contextengine.client", "import grpc\nfrom . import _retry\n", is_package=True),
        _fake("contextengine.client._retry", "from contextengine.v1 import event_pb2_grpc\n"),
        _fake("clients.python.conformance.runner", "from contextengine.client import Client\n"),
    )
    assert found == []


def test_relative_imports_are_resolved() -> None:
    source = _fake("contextengine.memory.documents", "from ..core.context import _rewind\n")
    [imp] = list(_imports(source))
    assert imp.target == "contextengine.core.context._rewind"
    package = _fake("contextengine.memory", "from .index import Hit\n", is_package=True)
    assert [i.target for i in _imports(package)] == ["contextengine.memory.index.Hit"]
