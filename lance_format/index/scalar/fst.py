"""Reading a finite state transducer (the ``fst`` crate's format, version 2 and 3): the token
dictionary of pylance's INVERTED index (``_token_fst_bytes``) maps each token to its id.

Layout: a 16-byte header (format version, FST type), nodes written leaves first (each node read
backwards from its address), and a footer: the number of keys and the root address (u64 LE),
then (version 3) a 4-byte checksum. Every key is enumerated once, depth first.
"""

from __future__ import annotations

import struct

from lance_format.errors import CorruptFileError

# the byte a node's 6-bit "common input" index names (index i -> _COMMON[i - 1])
_COMMON = b"te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHGWUV,YKJZXQ;)(~[]$!'*@"
_TRANS_INDEX_THRESHOLD = 32


def _uint(data: bytes, at: int, size: int) -> int:
    return int.from_bytes(data[at:at + size], "little") if size else 0


def _common(idx: int) -> int | None:
    return None if idx == 0 else _COMMON[idx - 1]


class _Node:
    """One decoded node: final flag and output, and its transitions (input, output, target)."""

    __slots__ = ("final", "final_output", "trans")

    def __init__(self, data: bytes, addr: int, version: int) -> None:
        self.final = False
        self.final_output = 0
        self.trans: list[tuple[int, int, int]] = []
        if addr == 0:  # the empty final node
            self.final = True
            return
        state = data[addr]
        kind = state >> 6
        if kind == 0b11:  # one transition to the node written just before, no output
            common = _common(state & 0x3F)
            inp = common if common is not None else data[addr - 1]
            end = addr - (0 if common is not None else 1)
            self.trans.append((inp, 0, end - 1))
        elif kind == 0b10:  # one transition with output and target address
            common = _common(state & 0x3F)
            input_len = 0 if common is not None else 1
            inp = common if common is not None else data[addr - 1]
            sizes = data[addr - input_len - 1]
            tsize, osize = sizes >> 4, sizes & 0x0F
            at = addr - input_len - 1 - tsize
            end = at - osize
            delta = _uint(data, at, tsize)
            out = _uint(data, at - osize, osize)
            self.trans.append((inp, out, 0 if delta == 0 else end - delta))
        else:  # any number of transitions
            self.final = bool(state & 0x40)
            n = state & 0x3F
            ntrans_len = 0 if n else 1
            if not n:
                n = data[addr - 1]
                n = 256 if n == 1 else n
            sizes = data[addr - ntrans_len - 1]
            tsize, osize = sizes >> 4, sizes & 0x0F
            index_size = 256 if version >= 2 and n > _TRANS_INDEX_THRESHOLD else 0
            inputs_end = addr - ntrans_len - 1 - index_size  # exclusive
            trans_size = n + n * tsize + index_size
            outs_end = addr - ntrans_len - 1 - trans_size  # exclusive
            end = outs_end - n * osize - (osize if self.final else 0)
            if self.final and osize:
                self.final_output = _uint(data, outs_end - n * osize - osize, osize)
            for i in range(n):
                inp = data[inputs_end - i - 1]
                t_at = inputs_end - n - i * tsize - tsize
                delta = _uint(data, t_at, tsize)
                out = _uint(data, outs_end - i * osize - osize, osize) if osize else 0
                self.trans.append((inp, out, 0 if delta == 0 else end - delta))
            self.trans.reverse()  # stored last first; keys come out in sorted order


def fst_items(data: bytes, where: str = "token dictionary") -> list[tuple[bytes, int]]:
    """Every ``(key, value)`` of the FST in ``data``, in key order."""
    if len(data) < 32:
        raise CorruptFileError(f"{where}: an FST of {len(data)} bytes is too short")
    version = struct.unpack_from("<Q", data, 0)[0]
    if version not in (2, 3):
        raise CorruptFileError(f"{where}: unsupported FST format version {version}")
    end = len(data) - (4 if version >= 3 else 0)
    num_keys, root = struct.unpack_from("<QQ", data, end - 16)
    body = data[:end - 16]
    items: list[tuple[bytes, int]] = []
    stack: list[tuple[int, bytes, int]] = [(root, b"", 0)]
    while stack:
        addr, prefix, acc = stack.pop()
        node = _Node(body, addr, version)
        if node.final:
            items.append((prefix, acc + node.final_output))
        for inp, out, target in reversed(node.trans):
            stack.append((target, prefix + bytes([inp]), acc + out))
    if len(items) != num_keys:
        raise CorruptFileError(f"{where}: the FST holds {len(items)} keys, its footer says {num_keys}")
    items.sort()
    return items
