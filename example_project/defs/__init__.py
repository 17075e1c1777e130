"""The example's ``dg`` defs folder: ``lake/defs.yaml`` configures the Lance tables."""
