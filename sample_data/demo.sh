#!/usr/bin/env bash
# `make demo`: the main job end to end on sample_data/, with the project's .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
OUT=demo_out
mkdir -p "$OUT"

echo "== 1. convert: sample parallel corpus -> filter -> parse (tiny UDPipe models trained on the fly)"
echo "==    -> joint BPE -> features -> Arrow shards   (pipelines/sample.toml)"
$BIN/synprep convert pipelines/sample.toml --output "$OUT/sample" --overwrite

echo
echo "== 2. the shards open with plain pyarrow"
$BIN/python - "$OUT/sample/train" <<'PY'
import json, pathlib, sys
import pyarrow as pa
folder = pathlib.Path(sys.argv[1])
manifest = json.loads((folder / "manifest.json").read_text())
table = pa.concat_tables(pa.ipc.open_stream(pa.memory_map(str(p))).read_all() for p in sorted(folder.glob("part-*.arrow")))
print(f"train: {manifest['input_lines']} input pairs = {manifest['rows']} rows + rejected {manifest['rejected']}")
row = table.slice(0, 1).to_pylist()[0]
for name in ("src_text", "src_subwords", "src_parent_mid", "tgt_subwords", "tgt_transitions"):
    print(f"  {name}: {row[name]}")
PY

echo
echo "== 3. align + bpe on a treebank: features of sample_data/de.conllu with the learned codes"
$BIN/synprep align --conllu sample_data/de.conllu --bpe-codes "$OUT/sample/codes.bpe" \
  --features parents,distances,transitions,labels --format jsonl -o "$OUT/de.jsonl"
$BIN/synprep align --conllu sample_data/en.conllu --bpe-codes "$OUT/sample/codes.bpe" --format pascal \
  -o "$OUT/en.pascal"
head -c 300 "$OUT/de.jsonl"; echo " ..."

echo
echo "== 4. synthetic parallel corpus -> convert its raw text, parsed by tiny UDPipe models trained on a separate"
echo "==    synthetic treebank -> validate -> inspect (terminal + HTML report)   (pipelines/synth-demo.toml)"
$BIN/synprep synth --pairs 2000 --seed 1 -o "$OUT/synth"
$BIN/synprep synth --pairs 300 --seed 2 -o "$OUT/synth-treebank"
$BIN/synprep convert pipelines/synth-demo.toml --overwrite
$BIN/synprep validate "$OUT/synth/shards/train"
$BIN/synprep inspect "$OUT/synth/shards/train" --show 1 --html "$OUT/synth/report.html"

echo
echo "== 5. syntrain: a short CPU run of a tiny Transformer with Pascal heads on the synthetic shards"
$BIN/syntrain run pipelines/train/synth-demo.toml --overwrite  # 300 steps; scores best.pt on the test split
$BIN/syntrain translate --checkpoint "$OUT/run/best.pt" -i "$OUT/synth/shards/test" -o "$OUT/run/test.hyp"
echo "source | translation, the first test pairs:"
echo "(the target side is synprep synth's made-up German-like language: German words from a word-by-word lexicon in"
echo " German word order, without German case or agreement, so even a perfect translation looks like broken German)"
paste <(head -3 "$OUT/synth/test.src") <(head -3 "$OUT/run/test.hyp")

echo
echo "== 6. the model translates raw text: syntrain parses it with the dataset's parser model, as convert did"
echo "   (into the synthetic German-like language of step 5)"
echo "every big river sings ." | $BIN/syntrain translate --checkpoint "$OUT/run/best.pt"
echo "demo finished: outputs in $OUT/ (open $OUT/synth/report.html in a browser)"
