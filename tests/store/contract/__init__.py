"""The ``EventStore`` contract (``contextengine/store/_base.py``), one module per protocol, each
run against every backend (memory, SQLite, PostgreSQL: the ``store`` fixture of
``tests/store/conftest.py``): ``test_log`` (``EventLog``, and the store's life cycle),
``test_config`` (``ConfigStore``), ``test_measures`` (``ContentMeasures``), ``test_coordination``
(``Coordination``)."""
