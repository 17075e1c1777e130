"""Schema evolution: adding, dropping, renaming and casting columns, and writes that add columns."""
