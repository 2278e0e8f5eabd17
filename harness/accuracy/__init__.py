"""Accuracy offline: a generated detection dataset, stand-in trained weights, mAP of a cell's outputs."""
