"""Running the model: settings and their checks, the training step, the loop with its checkpoints, locks
and guards, evaluation on a split (BLEU, chrF, attention statistics), data-parallel devices.

`trainer.train_and_evaluate(config, workdir)` is the entry point. Imports only `attnmt.model` and
`attnmt.data`, never `attnmt.analysis`.
"""
