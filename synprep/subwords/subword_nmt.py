"""The `subword-nmt` sub-word scheme (the default): joint or per-side BPE codes, learned by convert on the train
split's word counts (`[bpe] symbols`) or given (`[bpe] codes`), applied by `synprep.bpe.Bpe` (subword-nmt's
apply-bpe, same bytes); a piece that continues its token ends in '@@'. Its learning, with its vocabularies, is
convert's phase 2 (`synprep.convert.bpe_codes`)."""

from __future__ import annotations

from typing import Any

from ..options import BPE_SEPARATOR
from .base import Scheme
from .registry import register


@register
class SubwordNmt(Scheme):
    name = "subword-nmt"
    order = 0
    files = ("codes{side}.bpe",)
    marker, marker_kind = BPE_SEPARATOR, "end"
    keys = ("symbols", "codes", "min_frequency", "vocabulary_threshold", "src_symbols", "tgt_symbols")
    learns = True
    bpe_codes = True
    pieces = "BPE sub-words"
    keys_help = "learns codes from symbols or uses codes"

    def load(self, path: str | None, vocabulary: set[str] | None = None) -> Any:
        """subword-nmt codes (with an optional vocabulary filter); None without codes (no BPE)."""
        from ..bpe import Bpe

        return Bpe(path, vocabulary) if path else None

    def card_line(self, bpe: dict[str, Any], signature: dict[str, Any]) -> str:
        if bpe.get("joint", True):
            merges = f"{bpe['symbols']} merges learned on train" if bpe.get("codes") is None else "given codes"
            return (f"joint BPE (subword-nmt's, `@@` continues a piece): {merges}, `codes.bpe`, "
                    f"sha256 `{str(signature.get('bpe_codes_sha256'))[:16]}...`")
        return f"separate BPE per side: {bpe.get('src_symbols')} / {bpe.get('tgt_symbols')} merges"

    def model_what(self) -> str:
        return "BPE codes"

    def export_what(self) -> str:
        return "BPE codes"

    def fairseq_pieces(self, configuration: dict[str, Any], flag: str) -> str | None:
        return flag + " "
