"""Per-field encoding parameters of file versions 2.1/2.2, read from Arrow field metadata.

pylance 14 reads these keys of a leaf field (unparsable numbers and modes fall back to the
defaults, as pylance does; an unknown compression scheme is an error, as in pylance):

* ``lance-encoding:compression``: ``zstd`` / ``lz4`` wrap mini-block values in ``general`` and
  compress large strings value by value; ``none`` turns every compression off (plain ``flat`` /
  ``variable``); ``fsst`` forces FSST on strings;
* ``lance-encoding:compression-level``: the zstd level;
* ``lance-encoding:rle-threshold``: RLE only when runs < values x threshold (unset: chosen by
  size alone; pylance 14 does not apply its documented default of 0.5);
* ``lance-encoding:bss``: byte-stream-split of 32/64-bit values under general compression:
  ``on``, ``off`` or ``auto`` (the default: when the bytes of the first 64 values have low
  entropy);
* ``lance-encoding:dict-divisor`` (2) and ``…:dict-size-ratio`` (0.8): a page is
  dictionary-encoded when it has at most values / divisor distinct values and dictionary plus
  indices take at most ratio x the plain bytes;
* ``lance-encoding:dict-values-compression`` (lz4; zstd / none) and
  ``…:dict-values-compression-level``: how 2.2 compresses a page's dictionary;
* ``lance-encoding:structural-encoding``: ``miniblock`` or ``fullzip`` whatever the value width
  (constant and dictionary pages stay as they are);
* ``lance-encoding:minichunk-size``: the bytes a mini-block chunk of variable-width values aims
  at (4 KiB).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lance_format.encodings.array_v2_0.encode import Compression
from lance_format.errors import InvalidInputError

COMPRESSION_KEY = "lance-encoding:compression"
COMPRESSION_LEVEL_KEY = "lance-encoding:compression-level"
RLE_THRESHOLD_KEY = "lance-encoding:rle-threshold"
BSS_KEY = "lance-encoding:bss"
DICT_DIVISOR_KEY = "lance-encoding:dict-divisor"
DICT_SIZE_RATIO_KEY = "lance-encoding:dict-size-ratio"
DICT_VALUES_COMPRESSION_KEY = "lance-encoding:dict-values-compression"
DICT_VALUES_LEVEL_KEY = "lance-encoding:dict-values-compression-level"
STRUCTURAL_ENCODING_KEY = "lance-encoding:structural-encoding"
MINICHUNK_SIZE_KEY = "lance-encoding:minichunk-size"
_SCHEMES = ("zstd", "lz4", "none", "fsst")
_BSS_MODES = ("on", "off", "auto")


@dataclass(frozen=True)
class FieldParams:
    """What a field's metadata asks of the 2.1/2.2 encoders (all None: pylance's defaults)."""

    compression: str | None = None
    level: int | None = None
    rle_threshold: float | None = None
    bss: str | None = None
    dict_divisor: int | None = None
    dict_size_ratio: float | None = None
    dict_values_compression: str | None = None
    dict_values_level: int | None = None
    structural: str | None = None
    minichunk_size: int | None = None

    @property
    def general(self) -> Compression | None:
        """The lz4/zstd compression to wrap values in, if any."""
        if self.compression in ("zstd", "lz4"):
            return Compression(self.compression, self.level)
        return None

    @property
    def off(self) -> bool:
        """``compression = none``: plain values only."""
        return self.compression == "none"



DEFAULT_PARAMS = FieldParams()


def _text(raw: str | bytes | None) -> str | None:
    if raw is None:
        return None
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _number(raw: str | None, kind: type) -> float | int | None:
    if raw is None:
        return None
    try:
        return kind(raw)
    except ValueError:
        return None


def field_params(metadata: Mapping[str, str | bytes] | None, column: str | None = None) -> FieldParams:
    """The encoding parameters of a field from its metadata (keys as str; values str or bytes)."""
    if not metadata:
        return DEFAULT_PARAMS
    compression = _text(metadata.get(COMPRESSION_KEY))
    if compression is not None and compression not in _SCHEMES:
        raise InvalidInputError(f"Unknown compression scheme: {compression} (field metadata {COMPRESSION_KEY!r} "
                                f"accepts {', '.join(_SCHEMES)})", column=column)
    level = _number(_text(metadata.get(COMPRESSION_LEVEL_KEY)), int)
    threshold = _number(_text(metadata.get(RLE_THRESHOLD_KEY)), float)
    bss = _text(metadata.get(BSS_KEY))
    bss = bss.lower() if bss is not None and bss.lower() in _BSS_MODES else None
    divisor = _number(_text(metadata.get(DICT_DIVISOR_KEY)), int)
    ratio = _number(_text(metadata.get(DICT_SIZE_RATIO_KEY)), float)
    dict_values = _text(metadata.get(DICT_VALUES_COMPRESSION_KEY))
    if dict_values is not None and dict_values not in ("zstd", "lz4", "none"):
        raise InvalidInputError(f"Unknown compression scheme: {dict_values} (field metadata "
                                f"{DICT_VALUES_COMPRESSION_KEY!r} accepts zstd, lz4, none)", column=column)
    dict_level = _number(_text(metadata.get(DICT_VALUES_LEVEL_KEY)), int)
    structural = _text(metadata.get(STRUCTURAL_ENCODING_KEY))
    if structural is not None and structural not in ("miniblock", "fullzip"):
        raise InvalidInputError(f"Unknown structural encoding: {structural} (field metadata "
                                f"{STRUCTURAL_ENCODING_KEY!r} accepts miniblock, fullzip)", column=column)
    minichunk = _number(_text(metadata.get(MINICHUNK_SIZE_KEY)), int)
    return FieldParams(
        compression, None if level is None else int(level), None if threshold is None else float(threshold), bss,
        None if divisor is None or divisor < 1 else int(divisor), None if ratio is None else float(ratio),
        dict_values, None if dict_level is None else int(dict_level), structural,
        None if minichunk is None or minichunk < 1 else int(minichunk))
