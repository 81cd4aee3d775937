"""Hydra config groups (shipped as package data so an installed `reverie` finds them)."""
