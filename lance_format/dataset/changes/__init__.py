"""The change feed: which rows changed between two versions, and those rows as Arrow batches."""
