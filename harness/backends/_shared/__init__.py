"""backends/_shared: see the package docstrings of its modules."""
