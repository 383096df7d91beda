"""MkDocs hooks of the documentation site (mkdocs.yml, `make docs`).

The site is built from docs/, and from a few files that live where their readers look for them
(the front page, each client's guide in clients/<lang>/README.md): those are published as they
are, read at build time, never copied into docs/. Links are written for the repository (they
work on a code host and in an editor, relative to the file that holds them); this rewrites each
one to the page the site publishes for its target, and reports a link to a file the site does not
publish, so that `mkdocs build --strict` fails on it as on any broken link or anchor.

It also generates the API reference, one page per .proto file, from the files' comments
(scripts/proto_doc.py).
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import get_plugin_logger
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import proto_doc  # noqa: E402  (scripts/ is no package)

log = get_plugin_logger("contextengine-docs")

#: files outside docs/ that the site publishes: repository path -> path on the site
PUBLISHED = {
    "README.md": "index.md",
    "clients/python/README.md": "clients/python.md",
    "clients/typescript/README.md": "clients/typescript.md",
    "clients/java/README.md": "clients/java.md",
    "clients/kotlin/README.md": "clients/kotlin.md",
    "clients/adk_python/README.md": "clients/adk-python.md",
    "clients/typescript-adk/README.md": "clients/adk-typescript.md",
    "clients/java-adk/README.md": "clients/adk-java.md",
    "clients/conformance/README.md": "clients/conformance.md",
    "deploy/kubernetes/README.md": "operations/kubernetes.md",
    "CHANGELOG.md": "changelog.md",
    "CONTRIBUTING.md": "contributing.md",
    **{
        str(p.relative_to(ROOT)): str(p.relative_to(ROOT))
        for p in sorted((ROOT / "bench" / "results").glob("*.png"))
    },
}
#: where the API reference's pages go on the site, and the nav entry the hook fills in; a link
#: to PROTO_DIR or to a .proto file in it goes to the reference's page for it
PROTO_DIR = "proto/contextengine/v1"
REFERENCE_DIR = "reference"
REFERENCE_NAV = "API reference"

# [text](target), ![alt](target): the text may hold code spans and run over lines
_LINK = re.compile(r"(!?\[(?:`[^`]*`|[^\]`])*\]\()([^)\s]+)(\))")
_CODE_SPAN = re.compile(r"`[^`]*`")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")

_reference: dict[str, str] = {}


def _reference_pages() -> dict[str, str]:
    if not _reference:
        _reference.update(proto_doc.pages())
    return _reference


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Fill the nav's API reference entry with the generated pages."""
    _reference.clear()  # a rebuild (mkdocs serve) reads the protos again
    pages = _reference_pages()
    for entry in config.nav or []:
        if isinstance(entry, dict) and REFERENCE_NAV in entry:
            entry[REFERENCE_NAV] = [
                f"{REFERENCE_DIR}/index.md",
                *(f"{REFERENCE_DIR}/{name}.md" for name in pages if name != "index"),
            ]
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for repo_path, site_path in PUBLISHED.items():
        source = ROOT / repo_path
        if repo_path.endswith(".md"):
            files.append(File.generated(config, site_path, content=source.read_text()))
        else:
            files.append(File.generated(config, site_path, abs_src_path=str(source)))
    for name, text in _reference_pages().items():
        files.append(File.generated(config, f"{REFERENCE_DIR}/{name}.md", content=text))
    return files


_REPO_OF = {site: repo for repo, site in PUBLISHED.items()}


def _repo_path(page: Page) -> str:
    """Where the page's Markdown lives in the repository."""
    src = page.file.src_uri
    if src in _REPO_OF:
        return _REPO_OF[src]
    return f"docs/{src}"  # the reference's generated pages link only to each other


def _site_path(repo_path: str) -> str | None:
    if repo_path in PUBLISHED:
        return PUBLISHED[repo_path]
    # the .proto files (and their folder) are published as the API reference's pages
    if repo_path == PROTO_DIR:
        return f"{REFERENCE_DIR}/index.md"
    if repo_path.startswith(f"{PROTO_DIR}/") and repo_path.endswith(".proto"):
        return f"{REFERENCE_DIR}/{posixpath.basename(repo_path).removesuffix('.proto')}.md"
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    return None


def _rewrite(target: str, page: Page, repo_dir: str) -> str:
    if target.startswith(("#", "/")) or _SCHEME.match(target):
        return target
    path, hash_, anchor = target.partition("#")
    resolved = posixpath.normpath(posixpath.join(repo_dir, path))
    site = _site_path(resolved)
    if site is None:
        log.warning(
            "%s links to '%s' (%s in the repository), which the site does not publish: link a "
            "page of the site, or write the path as code",
            _repo_path(page),
            target,
            resolved,
        )
        return target
    relative = posixpath.relpath(site, posixpath.dirname(page.file.src_uri) or ".")
    return f"{relative}{hash_}{anchor}"


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **_: Any) -> str:
    """Links and images written for the repository, pointed at the site's pages."""
    repo_dir = posixpath.dirname(_repo_path(page))
    # the text outside fenced code blocks, in chunks (a link's text may run over lines)
    chunks: list[tuple[bool, list[str]]] = []
    fenced = False
    for line in markdown.split("\n"):
        opens_or_closes = bool(_FENCE.match(line))
        inside = fenced or opens_or_closes
        if not chunks or chunks[-1][0] != inside:
            chunks.append((inside, []))
        chunks[-1][1].append(line)
        if opens_or_closes:
            fenced = not fenced
    out = []
    for code, lines in chunks:
        text = "\n".join(lines)
        out.append(text if code else _rewrite_links(text, page, repo_dir))
    return "\n".join(out)


def _rewrite_links(text: str, page: Page, repo_dir: str) -> str:
    spans = [m.span() for m in _CODE_SPAN.finditer(text)]

    def replace(m: re.Match[str]) -> str:
        if any(start <= m.start() < end for start, end in spans):
            return m.group(0)  # `[shown](as code)`
        return m.group(1) + _rewrite(m.group(2), page, repo_dir) + m.group(3)

    return _LINK.sub(replace, text)
