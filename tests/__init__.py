"""The tests: tests/<part>/ tests src/scalestudy/<part>/, tests/ itself the top-level modules."""
