"""The server distribution's version: the one place it is written (pyproject.toml reads it from
here, ``[tool.hatch.version]``), and what ``contextengine serve --version`` prints."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
