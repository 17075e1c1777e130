"""Datasets: opening table versions, scanning, taking rows, and writing new versions."""
