"""Developer tools: paired measurements of the training step (see tools/README.md)."""
