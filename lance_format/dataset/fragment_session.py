"""pylance's ``FragmentSession`` (``LanceFragment.open_session``): a fragment opened once for
many small takes of the same columns, by position among its live rows.

Unlike ``LanceFragment.take``, a session's positions must not decrease (pylance reads them in one
forward pass of the files; a repeated position is read again), and ``with_row_address`` adds ``_rowaddr``. The data
files' readers stay open between takes (they are cached on the fragment object).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_format.dataset.arguments import row_positions
from lance_format.errors import InvalidRowSelectionError

if TYPE_CHECKING:
    from lance_format.dataset.fragment import LanceFragment


class OpenFragment:
    """A fragment with its columns planned and its live rows listed, for repeated takes."""

    def __init__(self, fragment: LanceFragment, columns: Any = None, with_row_address: bool = False) -> None:
        self.fragment = fragment
        # planned once: unknown columns are refused when the session opens, as in pylance
        self.scanner = fragment._dataset.scanner(columns=columns, with_row_address=with_row_address)
        self.live = fragment.live_offsets()


class FragmentSession:
    """Takes from one fragment with fixed columns (pylance's ``lance.fragment.FragmentSession``;
    made by :meth:`LanceFragment.open_session`, which hands it the opened fragment)."""

    def __init__(self, session: OpenFragment) -> None:
        self._session = session
        self._fragment, self._scanner, self._live = session.fragment, session.scanner, session.live

    def take(self, indices: Any) -> pa.Table:
        """The rows at these positions among the fragment's live rows (in non-decreasing order).

        Raises
        ------
        InvalidRowSelectionError
            The positions decrease somewhere, or one is out of range.
        """
        context = self._fragment.error_context()
        positions = row_positions(indices, table=context.get("table"))
        if positions.size > 1 and bool(np.any(positions[1:] < positions[:-1])):
            # pylance reports the physical offsets, repeats collapsed, where the order breaks
            offsets = self._live[np.clip(positions, 0, max(len(self._live) - 1, 0))] if len(self._live) else positions
            distinct = offsets[np.concatenate(([True], offsets[1:] != offsets[:-1]))]
            at = int(np.argmax(distinct[1:] < distinct[:-1]))
            raise InvalidRowSelectionError(f"Requested row indices are not strictly increasing at index {at}: "
                                           f"{int(distinct[at])} then {int(distinct[at + 1])}", **context)
        if positions.size and (int(positions[0]) < 0 or int(positions[-1]) >= len(self._live)):
            raise InvalidRowSelectionError(f"take index {int(positions[-1] if positions[0] >= 0 else positions[0])} "
                                           f"is out of range for fragment {self._fragment.fragment_id} with "
                                           f"{len(self._live)} rows", **context)
        batch = self._scanner.take_physical(self._fragment, self._live[positions])
        return pa.Table.from_batches([batch], schema=self._scanner.projected_schema)


__all__ = ["FragmentSession", "OpenFragment"]
