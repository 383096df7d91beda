"""Where the documentation's code blocks live, for the tests that run them.

The front page is README.md, each client's guide is clients/<lang>/README.md, and the features,
operations and design pages are under docs/ (the site `make docs` builds). A test names the page
whose blocks it runs, and reads them with ``blocks``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pages() -> list[Path]:
    """Every Markdown page of the documentation: the front page, the clients' guides, docs/."""
    return [
        ROOT / "README.md",
        *sorted(ROOT.glob("clients/*/README.md")),
        *sorted((ROOT / "docs").rglob("*.md")),
    ]


def blocks(page: Path | str, language: str) -> list[str]:
    """The page's fenced code blocks in ``language`` (```python, ```sh, ...), in order."""
    text = (ROOT / page).read_text()
    return re.findall(rf"^```{re.escape(language)}\n(.*?)^```", text, re.S | re.M)


def marked(page: Path | str, marker: str) -> str:
    """The text between ``<!-- marker:start -->`` and ``<!-- marker:end -->`` on the page."""
    text = (ROOT / page).read_text()
    return text.split(f"<!-- {marker}:start -->", 1)[1].split(f"<!-- {marker}:end -->", 1)[0]
