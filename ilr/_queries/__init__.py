"""The one door to the tables: every statement the engine runs, named, with a purpose line.  One module
per table (or per reader: ``snapshot`` is the invariant checker's). No module of ``ilr`` outside
this package holds SQL; ``tests/unit/test_sql_door.py`` checks it. The lock order the protocol
states (docs/protocol.md §3.2) is read here, statement by statement."""
