"""The run folder (`syntrain run --out OUT`): everything a run writes, reads back on --resume and hands to the
commands that use its checkpoints. One module per part of it:

- files.py: which files make a run (last.pt, best.pt, vocab.json, metrics.jsonl, config.toml, train.log, the
  kept checkpoint_<step>.pt, tensorboard/), listing and clearing them, keeping the last N step checkpoints;
- start.py: the folder from its name to its first write (default name, writer lock, refusals, vocab.json);
- config_file.py: OUT/config.toml, the run's resolved configuration;
- train_log.py: OUT/train.log, what the run printed;
- metrics_file.py: OUT/metrics.jsonl (and the trackers);
- checkpoints.py: checkpoint files (read, load, write, a run's last/best/kept ones, averaging);
- resume.py: `--resume` (the checkpoint it continues from, a lost best.pt, the checks, a finished run);
- source.py: OUT/source/, what raw-text translation needs (BPE codes, the source parser).

The package imports none of them (config.py reads files.py without importing torch).
"""
