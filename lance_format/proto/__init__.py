"""Generated protobuf modules for the Lance table and file formats (see scripts/gen_protos.py)."""
