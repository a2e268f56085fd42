"""The Python conformance suite (a package, so that its conftest and helpers do not shadow test/python's)."""
