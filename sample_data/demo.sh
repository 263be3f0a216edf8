#!/usr/bin/env bash
# `make demo`: the main job end to end on sample_data/, with the project's .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
OUT=demo_out
rm -rf "$OUT" && mkdir -p "$OUT"

echo "== 1. tokens of the sample treebanks (one sentence per line)"
for lang in en de; do
  $BIN/synprep align --conllu sample_data/$lang.conllu --format text -o $OUT/train.tok.$lang
done

echo "== 2. joint BPE codes (subword-nmt) and per-language vocabularies"
$BIN/synprep bpe learn --symbols 400 -i $OUT/train.tok.en -i $OUT/train.tok.de -o $OUT/codes.bpe \
  --vocab-prefix $OUT/vocab
$BIN/synprep bpe apply --codes $OUT/codes.bpe < $OUT/train.tok.de > $OUT/train.bpe.de
head -2 $OUT/train.bpe.de

echo "== 3. align: trees + BPE -> features (JSON lines, Arrow, Pascal positions, transitions)"
$BIN/synprep align --conllu sample_data/de.conllu --bpe-codes $OUT/codes.bpe \
  --features parents,distances,transitions,labels --format jsonl -o $OUT/train.de.jsonl
$BIN/synprep align --conllu sample_data/en.conllu --bpe-codes $OUT/codes.bpe --format arrow -o $OUT/train.en.arrow
$BIN/synprep align --conllu sample_data/en.conllu --bpe-codes $OUT/codes.bpe --format pascal -o $OUT/train.en.pascal
$BIN/synprep align --conllu sample_data/de.conllu --bpe-codes $OUT/codes.bpe --format transitions \
  --non-projective lift -o $OUT/train.de.transitions
head -1 $OUT/train.de.transitions

echo "== 4. read the Arrow output back with plain pyarrow"
$BIN/python - "$OUT/train.en.arrow" <<'PY'
import sys
import pyarrow as pa
table = pa.ipc.open_stream(pa.memory_map(sys.argv[1])).read_all()
row = table.slice(0, 1).to_pylist()[0]
print(f"{table.num_rows} rows, columns: {', '.join(table.column_names)}")
for name in ("subwords", "parent_mid", "transitions"):
    print(f"  {name}: {row[name]}")
PY
echo "demo finished: outputs in $OUT/"
