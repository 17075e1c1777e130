"""Shredding of one page of a top-level Arrow column into leaf pages with rep/def levels (2.1/2.2).

File versions 2.1+ store one column per *leaf* field; the validity of structs, the offsets and
validity of lists and the validity of the leaf itself are folded into two level streams:

* definition levels: 0 = the item is valid; otherwise the level of the outermost null / empty
  layer. Layers are numbered from the innermost up (``layers`` is innermost first): an
  ``ALL_VALID_*`` layer takes no level, ``NULLABLE_ITEM`` / ``NULLABLE_LIST`` / ``EMPTYABLE_LIST``
  one, ``NULL_AND_EMPTY_LIST`` two (null first, then empty);
* repetition levels (only when there is a list): the number of list levels that start at the
  entry (``max_rep`` = a new top-level row, 0 = continues the innermost list).

Every entry whose def level is at most ``max_visible_def`` (the levels of the layers below the
innermost list) is an *item*: it owns a value slot (a placeholder when it is null). Null and
empty lists, and anything under them, are entries without a slot.

The work happens top-down, vectorized: each layer maps the current entries to the next ones with
``np.repeat``. While building, def levels hold layer-relative codes (``2*layer+1`` = null,
``2*layer+2`` = empty, layers counted from the outermost) and rep levels hold the list depth
(1 = outermost), because the final numbering depends on layers not seen yet; ``_finish`` maps
them to Lance's numbering once the leaf is reached. Garbage under null lists (non-empty offset
ranges of null lists) is skipped naturally: only valid, non-empty lists are expanded.

Maps are lists of their ``entries`` struct, exactly as pylance stores them.

Layer kinds follow the page's data, as in pylance, except on paths that mix structs and lists:
there they follow the schema so that every page of the column agrees (pylance 14's reader
mis-reads ranges spanning pages whose layers differ on such paths; see ``_finish``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_format.encodings.buffers import validity_bools
from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import encodings_v2_1_pb2 as pb
from lance_format.schema import LanceField
from lance_format.schema.fields import marked_packed

ALL_VALID_ITEM = pb.REPDEF_ALL_VALID_ITEM
ALL_VALID_LIST = pb.REPDEF_ALL_VALID_LIST
NULLABLE_ITEM = pb.REPDEF_NULLABLE_ITEM
NULLABLE_LIST = pb.REPDEF_NULLABLE_LIST
EMPTYABLE_LIST = pb.REPDEF_EMPTYABLE_LIST
NULL_AND_EMPTY_LIST = pb.REPDEF_NULL_AND_EMPTY_LIST
_LIST_LAYERS = (ALL_VALID_LIST, NULLABLE_LIST, EMPTYABLE_LIST, NULL_AND_EMPTY_LIST)


@dataclass
class LeafPage:
    """One leaf column's share of a page: its items, levels and layer description."""

    field: LanceField
    name: str
    values: pa.Array | None  # one entry per item (slot); content at null items is arbitrary
    valid: np.ndarray | None  # per item: True when def == 0 (None: all items valid)
    rep: np.ndarray | None  # uint16 per level entry (None: no lists)
    defs: np.ndarray | None  # uint16 per level entry (None: all valid)
    layers: list[pb.RepDefLayer]  # innermost first
    num_rows: int
    max_visible_def: int | None  # None when there is no list layer

    @property
    def num_items(self) -> int:
        return 0 if self.values is None else len(self.values)

    @property
    def num_levels(self) -> int:
        if self.rep is not None:
            return len(self.rep)
        if self.defs is not None:
            return len(self.defs)
        return self.num_items

    @property
    def max_rep(self) -> int:
        return sum(1 for layer in self.layers if layer in _LIST_LAYERS)

    def def_levels_of_layers(self) -> int:
        """The largest def level the layers can express."""
        widths: dict[int, int] = {NULLABLE_ITEM: 1, NULLABLE_LIST: 1, EMPTYABLE_LIST: 1, NULL_AND_EMPTY_LIST: 2}
        return sum(widths.get(layer, 0) for layer in self.layers)

    def visible_mask(self) -> np.ndarray | None:
        """Per level entry: does it own an item slot? (None: every entry does)."""
        if self.max_visible_def is None or self.defs is None:
            return None
        return self.defs <= self.max_visible_def


class _State:
    """The entries of one nesting depth while descending towards a leaf."""

    __slots__ = ("n", "rep", "defs", "slot", "src", "kinds", "forced_null", "nullable")

    def __init__(self, n: int) -> None:
        self.n = n  # number of entries
        self.rep: np.ndarray | None = None  # int32 list-depth codes
        self.defs: np.ndarray | None = None  # int32 layer codes
        self.slot: np.ndarray | None = None  # bool per entry: has an item slot here (None: all)
        self.src: tuple[int, int] | np.ndarray = (0, n)  # slot -> index into the current array
        self.kinds: list[str] = []  # per layer, outermost first: "item" or "list"
        self.forced_null: set[int] = set()  # list layers that must be declared nullable
        self.nullable: list[bool] = []  # per layer: the schema field's nullability

    def copy(self) -> _State:
        other = _State(self.n)
        other.rep, other.defs, other.slot, other.src = self.rep, self.defs, self.slot, self.src
        other.kinds = list(self.kinds)
        other.forced_null = set(self.forced_null)
        other.nullable = list(self.nullable)
        return other

    def slot_indices(self) -> np.ndarray:
        return np.arange(self.n) if self.slot is None else np.flatnonzero(self.slot)

    def src_array(self) -> np.ndarray:
        if isinstance(self.src, tuple):
            return np.arange(self.src[0], self.src[1], dtype=np.int64)
        return self.src


def array_validity(array: pa.Array) -> np.ndarray | None:
    """Per-element validity of ``array`` (dictionary nulls included), None when all valid."""
    if pa.types.is_dictionary(array.type):
        valid = validity_bools(array.indices) if array.indices.null_count else None
        if array.dictionary.null_count:
            keys = np.asarray(array.indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
            dict_valid = validity_bools(array.dictionary)
            assert dict_valid is not None  # the dictionary has nulls
            valid = dict_valid[keys] if valid is None else valid & dict_valid[keys]
        return valid
    return validity_bools(array)


def _apply_validity(state: _State, array: pa.Array) -> None:
    """An item layer (struct or leaf): alive slots whose element is null get its code."""
    layer = len(state.kinds)
    state.kinds.append("item")
    valid = array_validity(array)
    if valid is None:
        return
    src = state.src
    slot_valid = valid[src[0] : src[1]] if isinstance(src, tuple) else valid[src]
    null_slots = ~slot_valid
    if not null_slots.any():
        return
    if state.slot is None and state.defs is None:
        # every entry has a slot and none is decided yet (a flat nullable column): one pass
        state.defs = null_slots.astype(np.int32) * (2 * layer + 1)
        return
    slots = state.slot_indices()
    defs = np.zeros(state.n, np.int32) if state.defs is None else state.defs.copy()
    hit = slots[null_slots]
    hit = hit[defs[hit] == 0]  # an outer null already decided these entries
    defs[hit] = 2 * layer + 1
    state.defs = defs


def _apply_list(state: _State, array: pa.Array) -> pa.Array:
    """A list layer: valid non-empty lists expand into their items, the rest become entries without slots."""
    layer = len(state.kinds)
    state.kinds.append("list")
    depth = state.kinds.count("list")
    offsets = np.asarray(array.offsets)
    valid = validity_bools(array)
    if valid is None and state.slot is None and state.defs is None and isinstance(state.src, tuple):
        # the common case, valid non-empty lists under valid parents: a few passes instead of
        # the general bookkeeping below (which would compute the same levels)
        window = offsets[state.src[0] : state.src[1] + 1].astype(np.int64)
        if len(window) > 1 and int(np.diff(window).min()) > 0:
            new_rep = np.zeros(int(window[-1] - window[0]), np.int32)
            new_rep[window[:-1] - window[0]] = depth if state.rep is None else np.where(state.rep == 0, depth, state.rep)
            state.n = len(new_rep)
            state.rep = new_rep
            state.src = (int(window[0]), int(window[-1]))
            return array.values
    slots = state.slot_indices()
    src = state.src_array()
    starts = offsets[src].astype(np.int64)
    lens = offsets[src + 1].astype(np.int64) - starts
    alive = np.ones(len(slots), np.bool_) if state.defs is None else state.defs[slots] == 0
    if not alive.all():
        # Items already null above (e.g. a null struct) reach this list without a list of their
        # own. pylance's reader only copes with that when the list layer is declared nullable.
        state.forced_null.add(layer)
    list_valid = np.ones(len(slots), np.bool_) if valid is None else valid[src]
    expand = alive & list_valid & (lens > 0)
    defs = np.zeros(state.n, np.int32) if state.defs is None else state.defs.copy()
    defs[slots[alive & ~list_valid]] = 2 * layer + 1
    defs[slots[alive & list_valid & (lens == 0)]] = 2 * layer + 2
    rep = np.zeros(state.n, np.int32) if state.rep is None else state.rep.copy()
    slot_rep = rep[slots]
    rep[slots] = np.where(slot_rep == 0, depth, slot_rep)

    counts = np.ones(state.n, np.int64)
    counts[slots[expand]] = lens[expand]
    total = int(counts.sum())
    firsts = np.cumsum(counts) - counts
    new_rep = np.zeros(total, np.int32)
    new_rep[firsts] = rep
    expanded = np.zeros(state.n, np.bool_)
    expanded[slots[expand]] = True
    new_slot = np.repeat(expanded, counts)
    new_defs = np.repeat(defs, counts) if defs.any() else None

    exp_starts, exp_lens = starts[expand], lens[expand]
    n_children = int(exp_lens.sum())
    if not len(exp_starts):
        new_src: tuple[int, int] | np.ndarray = (0, 0)
    elif np.array_equal(exp_starts[1:], exp_starts[:-1] + exp_lens[:-1]):
        new_src = (int(exp_starts[0]), int(exp_starts[0]) + n_children)
    else:
        shift = exp_starts - (np.cumsum(exp_lens) - exp_lens)
        new_src = np.repeat(shift, exp_lens) + np.arange(n_children, dtype=np.int64)

    state.n = total
    state.rep = new_rep
    state.defs = new_defs
    state.slot = None if new_slot.all() else new_slot
    state.src = new_src
    return array.values


def _select(leaf: pa.Array, positions: np.ndarray) -> pa.Array:
    """The items at ``positions``; a filter when they ascend, as pylance's garbage filter: unlike
    a take, it keeps the bytes under null items (pylance writes them)."""
    if len(positions) and bool((np.diff(positions) > 0).all()):
        keep = np.zeros(len(leaf), np.bool_)
        keep[positions] = True
        return leaf.filter(pa.array(keep))
    return leaf.take(pa.array(positions))


def _finish(state: _State, leaf: pa.Array, lance_field: LanceField, name: str, num_rows: int) -> LeafPage:
    kinds = state.kinds
    n_codes = 2 * len(kinds) + 3
    present = (
        np.bincount(state.defs, minlength=n_codes) > 0 if state.defs is not None else np.zeros(n_codes, np.bool_)
    )
    # pylance 14's reader mis-counts rows when a read spans pages whose layers differ on a path
    # that mixes structs and lists (e.g. a struct above a list that is all-valid in one page and
    # nullable in the next; pylance's own files fail the same way). On such paths the struct and
    # list layers follow the schema instead of the page's data, so every page agrees: structs
    # are nullable iff their field is, lists may always be empty (and null iff nullable).
    # Plain list-only or struct-only paths keep pylance's data-driven choice.
    schema_driven = "list" in kinds and kinds.count("item") > 1
    layers_outer_first: list[pb.RepDefLayer] = []
    for index, kind in enumerate(kinds):
        has_null = bool(present[2 * index + 1]) or index in state.forced_null
        has_empty = bool(present[2 * index + 2])
        if schema_driven and index < len(kinds) - 1:
            has_null = has_null or state.nullable[index]
            has_empty = has_empty or kind == "list"
        if kind == "item":
            layers_outer_first.append(NULLABLE_ITEM if has_null else ALL_VALID_ITEM)
        elif has_null and has_empty:
            layers_outer_first.append(NULL_AND_EMPTY_LIST)
        elif has_null:
            layers_outer_first.append(NULLABLE_LIST)
        elif has_empty:
            layers_outer_first.append(EMPTYABLE_LIST)
        else:
            layers_outer_first.append(ALL_VALID_LIST)
    # Lance numbers def levels from the innermost layer up.
    lut = np.zeros(n_codes, np.uint16)
    level = 0
    max_visible: int | None = None
    for index in range(len(kinds) - 1, -1, -1):
        layer_kind = layers_outer_first[index]
        if layer_kind in _LIST_LAYERS and max_visible is None:
            max_visible = level
        if layer_kind in (NULLABLE_ITEM, NULLABLE_LIST):
            level += 1
            lut[2 * index + 1] = level
        elif layer_kind == EMPTYABLE_LIST:
            level += 1
            lut[2 * index + 2] = level
        elif layer_kind == NULL_AND_EMPTY_LIST:
            lut[2 * index + 1] = level + 1
            lut[2 * index + 2] = level + 2
            level += 2
    if level >= 1 << 15:
        raise UnsupportedFeatureError("too many nesting levels for file versions 2.1+", column=name)
    defs = lut[state.defs] if state.defs is not None else None
    if defs is None and level > 0:
        # layers declared nullable (from the schema) need their (all-zero) def levels written
        defs = np.zeros(state.n, np.uint16)
    rep = None
    if state.rep is not None:
        max_rep = kinds.count("list")
        rep = np.where(state.rep > 0, max_rep + 1 - state.rep, 0).astype(np.uint16)
    src = state.src
    values = leaf.slice(src[0], src[1] - src[0]) if isinstance(src, tuple) else _select(leaf, src)
    valid = None
    if defs is not None:
        slot_defs = defs if state.slot is None else defs[state.slot]
        if slot_defs.any():
            valid = slot_defs == 0
    return LeafPage(
        field=lance_field,
        name=name,
        values=values,
        valid=valid,
        rep=rep,
        defs=defs,
        layers=layers_outer_first[::-1],
        num_rows=num_rows,
        max_visible_def=max_visible,
    )


def _empty_struct_leaf(state: _State, lance_field: LanceField, name: str, num_rows: int) -> LeafPage:
    """A struct without fields: pylance 14 writes an all-null page with the one layer
    NULLABLE_ITEM (whatever the depth) and refuses it under nulls or lists."""
    if "list" in state.kinds or (state.defs is not None and bool(state.defs.any())):
        raise UnsupportedFeatureError(
            f"Empty structs with rep/def information are not yet supported. The field {lance_field.name} is an "
            "empty struct that either has nulls or is in a list (pylance 14 cannot write it either)",
            column=name,
        )
    return LeafPage(field=lance_field, name=name, values=None, valid=None, rep=None, defs=None,
                    layers=[NULLABLE_ITEM], num_rows=num_rows, max_visible_def=None)


def _walk(array: pa.Array, lance_field: LanceField, name: str, state: _State, num_rows: int, out: list[LeafPage],
          path: tuple[int, ...] | None = None, pruned: bool = False) -> None:
    """Shred ``array`` into ``out``; ``path`` (child indices at each struct) walks one leaf only,
    of an array whose structs hold only the path's child when ``pruned``."""
    data_type = array.type
    state.nullable.append(lance_field.nullable)
    if pa.types.is_struct(data_type):
        _apply_validity(state, array)
        if not lance_field.children:
            out.append(_empty_struct_leaf(state, lance_field, name, num_rows))
            return
        if marked_packed(lance_field.metadata):
            # a packed struct is one leaf column whose items are whole rows
            out.append(_finish(state, array, lance_field, name, num_rows))
            return
        if path is not None:
            child = lance_field.children[path[0]]
            _walk(array.field(0 if pruned else path[0]), child, f"{name}.{child.name}", state, num_rows, out,
                  path[1:], pruned)
            return
        for index, child in enumerate(lance_field.children):
            _walk(array.field(index), child, f"{name}.{child.name}", state.copy(), num_rows, out)
        return
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_map(data_type):
        # a map is stored exactly like a list of its "entries" struct (as pylance does)
        child = lance_field.children[0]
        values = _apply_list(state, array)
        _walk(values, child, f"{name}.{child.name}", state, num_rows, out, path, pruned)
        return
    if pa.types.is_fixed_size_list(data_type) and lance_field.children:
        # pylance 14 writes such columns with a page length of rows x dimension and then cannot
        # read them next to any other column, so we refuse them (see check_structural_field).
        raise UnsupportedFeatureError(
            f"fixed-size lists of {data_type.value_type} cannot be written in file versions 2.1+", column=name
        )
    if pa.types.is_list_view(data_type) or pa.types.is_union(data_type):
        raise UnsupportedFeatureError(f"type {data_type} cannot be written in file versions 2.1+", column=name)
    _apply_validity(state, array)
    out.append(_finish(state, array, lance_field, name, num_rows))


def shred(array: pa.Array, lance_field: LanceField, name: str | None = None) -> list[LeafPage]:
    """Split one page of a top-level column into its leaf pages (depth-first leaf order)."""
    out: list[LeafPage] = []
    _walk(array, lance_field, name or lance_field.name, _State(len(array)), len(array), out)
    return out


def leaf_paths(lance_field: LanceField) -> list[tuple[int, ...]]:
    """Per leaf column of a top-level field (depth-first, as ``shred`` yields them), the child
    index taken at each struct on the way to it."""
    if pa.types.is_struct(lance_field.data_type) and lance_field.children and not marked_packed(
            lance_field.metadata):
        return [(index, *rest) for index, child in enumerate(lance_field.children) for rest in leaf_paths(child)]
    if lance_field.children and not pa.types.is_struct(lance_field.data_type):  # a list's (or map's) item
        return leaf_paths(lance_field.children[0])
    return [()]


def shred_leaf(array: pa.Array, lance_field: LanceField, path: tuple[int, ...], pruned: bool = False) -> LeafPage:
    """The page of the one leaf column ``path`` (see ``leaf_paths``) of a top-level column
    (``pruned``: its structs hold only the path's child)."""
    out: list[LeafPage] = []
    _walk(array, lance_field, lance_field.name, _State(len(array)), len(array), out, path, pruned)
    return out[0]
