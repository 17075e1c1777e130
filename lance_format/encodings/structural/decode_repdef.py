"""Repetition/definition levels of 2.1/2.2 pages back into Arrow validity and list offsets.

A page's ``layers`` describe the levels innermost first: the leaf item, then each struct (item
layer) and list (list layer) above it. Definition levels count up from the innermost layer
(``ALL_VALID_*`` take none, ``NULLABLE_ITEM``/``NULLABLE_LIST``/``EMPTYABLE_LIST`` one,
``NULL_AND_EMPTY_LIST`` two: null, then empty). A repetition level is the number of list levels
that start at an entry (0 continues the innermost list). Null or empty lists are entries without
a value; null items and null structs still have a (placeholder) value.

:func:`unravel` mirrors Lance's ``RepDefUnraveler`` but works on whole arrays: each list layer
keeps only the entries that start a list (decrementing their repetition), so the next layer sees
one entry per list. The result is a :class:`LeafData`: per-layer validity and offsets (outermost
first) plus the leaf values, which can be sliced, gathered and concatenated by rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural import accel
from lance_format.encodings.structural.decoded_blocks import ranges_index

ALL_VALID_ITEM, ALL_VALID_LIST, NULLABLE_ITEM, NULLABLE_LIST, EMPTYABLE_LIST, NULL_AND_EMPTY_LIST = range(1, 7)
_DEF_LEVELS = {ALL_VALID_ITEM: 0, ALL_VALID_LIST: 0, NULLABLE_ITEM: 1, NULLABLE_LIST: 1, EMPTYABLE_LIST: 1,
               NULL_AND_EMPTY_LIST: 2}
_LISTS = {ALL_VALID_LIST, NULLABLE_LIST, EMPTYABLE_LIST, NULL_AND_EMPTY_LIST}


def is_list(meaning: int) -> bool:
    return meaning in _LISTS


def check_layers(meanings: list[int], ctx: DecodeContext) -> None:
    if not meanings:
        raise ctx.corrupt("page has no rep/def layers")
    bad = [m for m in meanings if m not in _DEF_LEVELS]
    if bad:
        raise ctx.corrupt(f"page has an unknown rep/def layer {bad[0]}")
    if is_list(meanings[0]):
        raise ctx.corrupt("the innermost rep/def layer of a page is a list")


def max_rep(meanings: list[int]) -> int:
    return sum(1 for m in meanings if is_list(m))


def max_visible_def(meanings: list[int]) -> int:
    """Highest definition level that still has a value (levels of the layers below the first list)."""
    total = 0
    for m in meanings:
        if is_list(m):
            break
        total += _DEF_LEVELS[m]
    return total


@dataclass
class Layer:
    is_list: bool
    validity: np.ndarray | None  # bools, one per entry of this layer; None = all valid
    offsets: np.ndarray | None  # lists: int64, entries + 1 (not necessarily starting at 0)

    @property
    def n(self) -> int:
        if not self.is_list:
            return -1
        assert self.offsets is not None  # list layers always carry offsets
        return len(self.offsets) - 1


def unravel(rep: np.ndarray | None, defs: np.ndarray | None, meanings: list[int], n_items: int,
            ctx: DecodeContext) -> tuple[list[Layer], int]:
    """Layers (outermost first) and the number of rows described by the levels."""
    check_layers(meanings, ctx)
    levels_to_rep, rep_counter = [0], 0
    for m in meanings:
        if m == NULLABLE_ITEM:
            levels_to_rep.append(rep_counter)
        elif m in (NULLABLE_LIST, EMPTYABLE_LIST):
            rep_counter += 1
            levels_to_rep.append(rep_counter)
        elif m == NULL_AND_EMPTY_LIST:
            rep_counter += 1
            levels_to_rep += [rep_counter, rep_counter]
        elif m == ALL_VALID_LIST:
            rep_counter += 1
    lut = np.asarray(levels_to_rep, np.int64)
    if rep is not None and rep_counter == 0:
        raise ctx.corrupt("page has repetition levels but no list layer")
    if rep is None and rep_counter:
        raise ctx.corrupt("page has list layers but no repetition levels")
    if defs is not None:
        if len(defs) and int(defs.max()) >= len(lut):
            raise ctx.corrupt(f"definition level {int(defs.max())} is beyond the page's {len(lut) - 1} levels")
        if rep is not None and len(rep) != len(defs):
            raise ctx.corrupt(f"page has {len(rep)} repetition and {len(defs)} definition levels")
        visible = int(np.count_nonzero(defs <= max_visible_def(meanings)))
    else:
        visible = len(rep) if rep is not None else n_items
    if rep is not None and len(rep) and int(rep.max()) > rep_counter:
        raise ctx.corrupt(f"repetition level {int(rep.max())} is beyond the page's {rep_counter} list levels")
    if visible != n_items:
        raise ctx.corrupt(f"rep/def levels describe {visible} values but the page has {n_items}")

    # each list layer in one compiled pass (see list_layer and list_starts)
    compiled = accel.read_kernels(len(rep) * 4) if rep is not None and len(rep) >= 64 else None
    layers: list[Layer] = []
    cur_rep, cur_def = rep, defs
    def_cmp = rep_cmp = 0
    count = n_items  # entries of the layer below
    for i, m in enumerate(meanings):
        if not is_list(m):
            validity = None
            if cur_def is not None and m == NULLABLE_ITEM:
                d = cur_def
                # levels_to_rep never decreases with the level: "visible at this depth" is a
                # threshold on the level, no lookup needed
                highest = int(np.searchsorted(lut, rep_cmp, side="right")) - 1
                if len(d) and int(d.max()) > highest:
                    d = d[d <= highest]
                if len(d) != count:
                    raise ctx.corrupt(f"struct layer has {len(d)} entries instead of {count}")
                validity = d <= def_cmp
            def_cmp += _DEF_LEVELS[m]
            layers.append(Layer(False, validity, None))
            continue
        valid_level = def_cmp
        own = _DEF_LEVELS[m]
        null_level = valid_level + 1 if m in (NULLABLE_LIST, NULL_AND_EMPTY_LIST) else -1
        empty_level = valid_level + (1 if m == EMPTYABLE_LIST else 2 if m == NULL_AND_EMPTY_LIST else 0)
        if m not in (EMPTYABLE_LIST, NULL_AND_EMPTY_LIST):
            empty_level = -1
        upper_null = valid_level + own
        max_level = upper_null
        for above in meanings[i + 1 :]:
            if above == NULLABLE_ITEM:
                max_level += 1
            elif above != ALL_VALID_ITEM:
                break
        def_cmp += own
        assert cur_rep is not None  # a list layer means repetition levels (checked above)
        next_rep = None
        if compiled is None:
            start_idx = np.flatnonzero(cur_rep)
        if cur_def is None:
            if compiled is not None:
                offsets, next_rep = compiled.list_starts(cur_rep, i == len(meanings) - 1)
            else:
                offsets = np.append(start_idx, len(cur_rep)).astype(np.int64)
            total = len(cur_rep)
            validity = None
            new_def = None
        elif compiled is not None:
            offsets, valid, next_rep, new_def, total = compiled.list_layer(
                cur_rep, cur_def, max_level, valid_level, null_level, empty_level, upper_null,
                i == len(meanings) - 1)
            validity = valid if m in (NULLABLE_LIST, NULL_AND_EMPTY_LIST) else None
        else:
            sd = cur_def[start_idx]
            invisible = sd > max_level
            null = ~invisible & (sd > valid_level) & ((sd == null_level) | (sd > upper_null))
            empty = ~invisible & ~null & (sd == empty_level)
            # every entry but a start without an item (null/empty/invisible list) is an item, so
            # the items before start k are its position minus the item-less starts before it
            no_item = invisible | null | empty
            skipped = np.cumsum(no_item) - no_item
            created = ~invisible
            total = len(cur_rep) - int(np.count_nonzero(no_item))
            offsets = np.append(start_idx[created] - skipped[created], total).astype(np.int64)
            validity = ~null[created] if m in (NULLABLE_LIST, NULL_AND_EMPTY_LIST) else None
            new_def = sd
        if total != count:
            raise ctx.corrupt(f"list layer holds {total} items but the layer below has {count}")
        layers.append(Layer(True, validity, offsets))
        count = len(offsets) - 1
        cur_rep = cur_rep[start_idx] - 1 if next_rep is None else next_rep
        cur_def = new_def
        rep_cmp += 1
    layers.reverse()
    return layers, count


@dataclass
class LeafData:
    """One leaf column's rows: ancestor layers (outermost first, ending with the leaf) and values."""

    layers: list[Layer]
    values: pa.Array
    rows: int

    def slice(self, start: int, stop: int) -> LeafData:
        layers, lo, hi = slice_layers(self.layers, start, stop)
        values = self.values if (lo, hi) == (0, len(self.values)) else self.values.slice(lo, hi - lo)
        return LeafData(layers, values, stop - start)

    def take(self, rows: np.ndarray) -> LeafData:
        layers, index = take_layers(self.layers, rows)
        return LeafData(layers, self.values.take(pa.array(index)), len(rows))


def slice_layers(layers: list[Layer], start: int, stop: int) -> tuple[list[Layer], int, int]:
    """The layers of rows ``[start, stop)`` and the range of leaf items they cover."""
    out = []
    lo, hi = start, stop
    for layer in layers:
        validity = None if layer.validity is None else layer.validity[lo:hi]
        offsets = None
        if layer.is_list:
            assert layer.offsets is not None  # list layers always carry offsets
            window = layer.offsets[lo : hi + 1]
            lo, hi = int(window[0]), int(window[-1])
            offsets = window if lo == 0 else window - lo  # a view when already rebased
        out.append(Layer(layer.is_list, validity, offsets))
    return out, lo, hi


def take_layers(layers: list[Layer], rows: np.ndarray) -> tuple[list[Layer], np.ndarray]:
    """The layers of the given rows and the leaf items they cover."""
    out = []
    index = np.asarray(rows, np.int64)
    for layer in layers:
        validity = None if layer.validity is None else layer.validity[index]
        offsets = None
        if layer.is_list:
            assert layer.offsets is not None  # list layers always carry offsets
            starts = layer.offsets[index]
            lengths = layer.offsets[index + 1] - starts
            offsets = np.zeros(len(index) + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
            index = ranges_index(starts, lengths)
        out.append(Layer(layer.is_list, validity, offsets))
    return out, index


def concat_leaves(pieces: list[LeafData]) -> LeafData:
    if len(pieces) == 1:
        return pieces[0]
    layers = []
    for depth, first in enumerate(pieces[0].layers):
        same = [p.layers[depth] for p in pieces]
        validity = None
        if any(layer.validity is not None for layer in same):
            validity = np.concatenate([
                layer.validity if layer.validity is not None else np.ones(_entries(pieces[k], depth), np.bool_)
                for k, layer in enumerate(same)
            ])
        offsets = None
        if first.is_list:
            parts, base = [np.zeros(1, np.int64)], 0
            for layer in same:
                assert layer.offsets is not None  # list layers always carry offsets
                rel = layer.offsets - layer.offsets[0]
                parts.append(rel[1:] + base)
                base += int(rel[-1])
            offsets = np.concatenate(parts)
        layers.append(replace(first, validity=validity, offsets=offsets))
    values = pa.concat_arrays([p.values for p in pieces])
    return LeafData(layers, values, sum(p.rows for p in pieces))


def _entries(leaf: LeafData, depth: int) -> int:
    """Number of entries of layer ``depth`` (rows at the top, items below a list)."""
    n = leaf.rows
    for layer in leaf.layers[:depth]:
        if layer.is_list:
            assert layer.offsets is not None  # list layers always carry offsets
            n = int(layer.offsets[-1] - layer.offsets[0])
    return n
