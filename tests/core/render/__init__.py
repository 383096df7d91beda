"""Renderings for other providers (docs/design/renderings.md).

litellm fetches its model cost map from the network when imported, unless told to use the copy
it ships: set before any test module of this package imports it.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
