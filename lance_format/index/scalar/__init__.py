"""Scalar index types: the interface (:mod:`.base`), query values (:mod:`.queries`) and the types."""
