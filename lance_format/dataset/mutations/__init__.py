"""Row mutations (delete, update, merge_insert, replace_where) and their prepare-commit-retry machinery."""
