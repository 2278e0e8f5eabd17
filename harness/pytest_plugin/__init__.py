"""The pytest plugin: matrix options, cell parametrization, records (plugin.py), GPU sharding (xdist_gpu.py)."""
