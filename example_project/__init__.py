"""The example Dagster project: Lance tables written by Spark, daily partitions, and a CDC aggregate.

``definitions`` is what ``dagster dev`` serves; ``run_example`` runs everything headless;
``demo`` is the plain engine walkthrough (no Dagster).
"""
