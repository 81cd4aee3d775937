"""The command line, the imagined-vs-simulator harness, metrics and reports."""
