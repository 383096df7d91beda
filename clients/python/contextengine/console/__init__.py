"""The operator's console: ``contextengine sessions|events|context|compaction|memory|config
get|set`` against a running sidecar (docs/design/console.md).

A client only, shipped by the client distribution behind its ``cli`` extra
(``contextengine-client[cli]``: click, rich, pyyaml): it imports ``contextengine.client`` and the
generated ``contextengine.v1``, never the engine (tests/test_layers.py checks it). :mod:`contextengine.console.render` draws sessions,
events, contexts and summaries as rich renderables (the demo uses it too),
:mod:`contextengine.console.output` decides between a terminal (colours), plain text (piped,
``NO_COLOR``) and ``--json``, and :mod:`contextengine.console.commands` is the click command tree.
``contextengine.cli``, the root of the one click tree of the ``contextengine`` command, imports
this package only when one of these commands runs, so ``serve`` never loads rich or the client.
"""

from __future__ import annotations

#: the top-level commands this package serves (``contextengine.cli`` hands them over)
COMMANDS = ("sessions", "events", "context", "compaction", "memory")
#: the ``config`` subcommands it serves (``config show`` and ``config check`` stay the server's)
CONFIG_COMMANDS = ("get", "set")

__all__ = ["COMMANDS", "CONFIG_COMMANDS"]
