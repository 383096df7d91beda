"""``python -m contextengine`` is the ``contextengine`` command."""

from __future__ import annotations

import sys

from contextengine.cli import main

if __name__ == "__main__":
    sys.exit(main())
