"""Accuracy offline, for every task: the task's metric of a cell's outputs through ultralytics' own metric code, beside
the PyTorch fp32 reference, on generated data and stand-in trained weights or on your weights and data; published
tables."""
