"""Policies and learners that consume imagined rollouts."""
