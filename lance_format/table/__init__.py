"""Table format: manifests and their naming, transactions and commits, feature flags, tags,
deletion files and row-id / row-version sequences."""
