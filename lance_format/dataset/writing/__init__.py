"""The write path: ``write_dataset``, and the fragments and commits of distributed writers."""
