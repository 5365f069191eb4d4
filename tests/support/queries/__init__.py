"""The tests' one door to the tables: every statement a test or the harness runs on the ilr tables,
named, with a purpose line. One module per table (or pair of tables); statements built from parts are
small functions returning the SQL. Tests read state through the public API where it says the same
thing, and through these where it does not (a column the API does not show, a lock, a count), or to
seed and tamper with rows on purpose. ``tests/unit/test_sql_door.py`` checks that no other module
under ``tests/`` holds SQL on the ilr tables."""
