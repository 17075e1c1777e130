"""The example Dagster project: Lance tables written by Spark, daily partitions, and a CDC aggregate.

``definitions`` is what ``dg dev`` serves (its ``defs`` folder holds the component YAML);
``run_example`` runs everything headless;
``demo`` is the plain engine walkthrough (no Dagster).
"""
