"""The compile interface: a gated candidate in, a built library and its artefact findings out
(`compile`: nvcc in a sandbox of its own; `artifact`: the checks on what was built)."""
