"""The peer, driven offline: google-adk 2.13's own compaction and context-cache code run on
given events with fake models, for the benchmarks that set this engine beside google-adk and for
the differential tests that hold it to google-adk (tests may import ``bench``; ``bench`` never
imports ``tests``: ``tests/test_layers.py``)."""
