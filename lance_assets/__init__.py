"""lance_assets: Dagster assets stored as Lance tables (IO manager, resources, sensors).

The Dagster integration builds on ``lance_format`` and lands with its own issue.
"""
