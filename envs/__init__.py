"""Simulator tasks, termination functions, reference scores and offline datasets."""
