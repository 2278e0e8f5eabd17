"""yolo: see the package docstrings of its modules."""
