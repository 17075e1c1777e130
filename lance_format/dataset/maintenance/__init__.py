"""Table maintenance: compaction, metadata-only commits (restore, config, metadata) and cleanup."""
