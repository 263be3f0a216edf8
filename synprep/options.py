"""The names of the choices the library accepts and the constants the CLI shows, in one light module (no
heavy imports): the library checks against them and the CLI offers them, so the two never disagree."""

BPE_SEPARATOR = "@@"  # subword-nmt's mark of a piece that continues
MAX_LINE_CHARS = 5000  # default bound per line of text (parsing time grows ~3x per doubling of the length)

ALIGN_FORMATS = ("jsonl", "arrow", "pascal", "transitions", "text")  # synprep align --format
INPUT_FORMATS = ("text", "sgml", "xml", "conllu", "tsv")  # one side of a parallel corpus (tsv: a column)
ROOT_POLICIES = ("drop", "keep")
NON_PROJECTIVE_POLICIES = ("drop", "lift", "keep")
PARSER_BACKENDS = ("udpipe", "stanza", "spacy-udpipe", "spacy")
LANGID_BACKENDS = ("langdetect", "py3langid")  # langdetect: as in the papers; py3langid: faster, more accurate
DEFAULT_LANGID = "py3langid"  # synprep filter / [filter] langid: measured in docs/langid.md
UDPIPE_PRESETS = ("tiny", "small", "medium", "default")  # synprep parser train --preset
SEGMENTATIONS = ("auto", "whitespace")  # [filter] segmentation / synprep filter --segmentation
NORMALIZERS = ("romanian", "remove-diacritics")  # [normalize] src / tgt (synprep.normalize)
BLEU_TOKENIZERS = ("auto", "13a", "intl", "zh", "ja-mecab", "ko-mecab", "char", "none", "flores101", "flores200",
                   "spm")  # syntrain: sacrebleu's; auto: from the target language (synprep.languages.bleu_tokenize)
ENGINES = ("local", "ray")  # synprep convert --engine
COMPRESSIONS = ("none", "lz4", "zstd")  # shard compression
MANIFEST = "manifest.json"  # in a split folder: its configuration, signature, accounting and shards
PATHS = "paths.json"  # at the dataset root: this machine's absolute paths (never inside a split folder)
