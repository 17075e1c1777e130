"""Writing a finite state transducer in the ``fst`` crate's format (version 2): the token
dictionary (``_token_fst_bytes``) of an INVERTED index partition, token -> token id.

Keys are added in sorted byte order; nodes are frozen (written) once no later key can reach
them, children before parents, each as an "any transitions" node read backwards from its last
byte (see :mod:`.fst` for the layout). Outputs follow the ``fst`` builder's rule: a shared
transition keeps the minimum of its keys' remaining values and pushes the rest one node down.
Equal suffixes are not merged (the automaton is a trie, which every reader accepts).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from lance_format.errors import InvalidInputError

VERSION = 2
_EMPTY = 0  # the address of the final node with no transitions and no output
_INDEX_THRESHOLD = 32


def _pack_size(value: int) -> int:
    return max(1, (value.bit_length() + 7) // 8)


class _Node:
    __slots__ = ("final", "final_out", "inputs", "outs", "addrs")

    def __init__(self) -> None:
        self.final = False
        self.final_out = 0
        self.inputs: list[int] = []
        self.outs: list[int] = []
        self.addrs: list[int] = []


def _compile(node: _Node, out: bytearray) -> int:
    """Append ``node``; its address (its last byte)."""
    n = len(node.inputs)
    if n == 0 and node.final_out == 0:
        return _EMPTY
    start = len(out)
    deltas = [0 if a == _EMPTY else start - a for a in node.addrs]
    tsize = max((_pack_size(d) for d in deltas), default=1)
    any_outs = node.final_out != 0 or any(node.outs)
    osize = max([_pack_size(node.final_out)] + [_pack_size(o) for o in node.outs]) if any_outs else 0
    if any_outs:
        if node.final:
            out += node.final_out.to_bytes(osize, "little")
        for o in reversed(node.outs):
            out += o.to_bytes(osize, "little")
    for d in reversed(deltas):
        out += d.to_bytes(tsize, "little")
    out += bytes(reversed(node.inputs))
    if n > _INDEX_THRESHOLD:
        index = bytearray(b"\xff" * 256)
        for i, inp in enumerate(node.inputs):
            index[inp] = i
        out += index
    out.append((tsize << 4) | osize)
    small = n if 0 < n < 64 else 0
    if not small:
        out.append(1 if n == 256 else n)
    out.append((0x40 if node.final else 0) | small)
    return len(out) - 1


def build_fst(items: Sequence[tuple[bytes, int]]) -> bytes:
    """The FST of ``items`` (keys strictly increasing, values non-negative)."""
    out = bytearray(struct.pack("<QQ", VERSION, 0))
    stack = [_Node()]
    prev = b""
    for key, value in items:
        if prev and key <= prev:
            raise InvalidInputError(f"FST keys must be strictly increasing: {key!r} after {prev!r}")
        lcp = 0
        limit = min(len(prev), len(key))
        while lcp < limit and prev[lcp] == key[lcp]:
            lcp += 1
        while len(stack) > lcp + 1:
            done = stack.pop()
            stack[-1].addrs[-1] = _compile(done, out)
        for depth in range(lcp):
            parent = stack[depth]
            carried = parent.outs[-1]
            common = min(carried, value)
            if carried > common:
                parent.outs[-1] = common
                child = stack[depth + 1]
                child.outs = [o + carried - common for o in child.outs]
                if child.final:
                    child.final_out += carried - common
            value -= common
        for depth in range(lcp, len(key)):
            node = stack[depth]
            node.inputs.append(key[depth])
            node.outs.append(value)
            node.addrs.append(_EMPTY)
            value = 0
            stack.append(_Node())
        stack[-1].final = True
        stack[-1].final_out += value
        prev = key
    while len(stack) > 1:
        done = stack.pop()
        stack[-1].addrs[-1] = _compile(done, out)
    root = stack[0]
    if not root.inputs and not root.final:
        root_addr = _compile_forced(root, out)
    else:
        root_addr = _compile(root, out)
        if root_addr == _EMPTY:
            root_addr = _compile_forced(root, out)
    out += struct.pack("<QQ", len(items), root_addr)
    return bytes(out)


def _compile_forced(node: _Node, out: bytearray) -> int:
    """A root with no transitions and no output still needs bytes of its own."""
    out += bytes([0x00, 0x00, 0x40 if node.final else 0x00])  # sizes, ntrans byte 0, state
    return len(out) - 1
