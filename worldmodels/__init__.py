"""Learned simulators behind one batched step contract."""
