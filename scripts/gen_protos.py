#!/usr/bin/env python3
"""Regenerate the Python protobuf modules in lance_format/proto/ from protos/*.proto.

Usage:
    python scripts/gen_protos.py [--out DIR]

Runs ``python -m grpc_tools.protoc`` (from the grpcio-tools test dependency)
and rewrites protoc's flat imports (``import file_pb2 as file__pb2``) into
package imports (``from lance_format.proto import file_pb2 as file__pb2``) so
the generated modules import cleanly as part of the ``lance_format`` package.
Output is deterministic: running it twice gives byte-identical files.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = REPO_ROOT / "protos"
DEFAULT_OUT = REPO_ROOT / "lance_format" / "proto"
PACKAGE = "lance_format.proto"

PROTO_FILES = [
    "file.proto",
    "file2.proto",
    "rowids.proto",
    "table.proto",
    "transaction.proto",
    "encodings_v2_0.proto",
    "encodings_v2_1.proto",
    "index.proto",
]

INIT_TEXT = '"""Generated protobuf modules for the Lance table and file formats (see scripts/gen_protos.py)."""\n'

# `import file_pb2 as file__pb2` (in .py) / `import file_pb2 as _file_pb2` (in .pyi)
_IMPORT_RE = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)
# `from file_pb2 import X as Y` may appear in .pyi stubs
_FROM_RE = re.compile(r"^from (\w+_pb2) import ", re.MULTILINE)
# module name handed to the builder; it becomes the classes' __module__
_BUILDER_RE = re.compile(r"BuildTopDescriptorsAndMessages\(DESCRIPTOR, '(\w+_pb2)', _globals\)")


def _local_modules() -> set[str]:
    return {Path(p).stem + "_pb2" for p in PROTO_FILES}


def _rewrite_imports(text: str) -> str:
    local = _local_modules()

    def repl_import(m: re.Match[str]) -> str:
        mod, alias = m.group(1), m.group(2)
        if mod not in local:
            return m.group(0)
        return f"from {PACKAGE} import {mod} as {alias}"

    def repl_from(m: re.Match[str]) -> str:
        mod = m.group(1)
        if mod not in local:
            return m.group(0)
        return f"from {PACKAGE}.{mod} import "

    def repl_builder(m: re.Match[str]) -> str:
        return m.group(0).replace(f"'{m.group(1)}'", f"'{PACKAGE}.{m.group(1)}'")

    text = _IMPORT_RE.sub(repl_import, text)
    text = _FROM_RE.sub(repl_from, text)
    return _BUILDER_RE.sub(repl_builder, text)


def _grpc_include_dir() -> Path:
    import grpc_tools  # noqa: PLC0415  (only needed when generating)

    return Path(grpc_tools.__file__).resolve().parent / "_proto"


def generate(out_dir: Path) -> list[Path]:
    """Generate all modules into ``out_dir``; return the written paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"-I{_grpc_include_dir()}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            *PROTO_FILES,
        ]
        res = subprocess.run(cmd, cwd=PROTO_DIR, capture_output=True, text=True)
        if res.returncode != 0 or res.stderr.strip():
            sys.stderr.write(res.stdout + res.stderr)
            if res.returncode != 0:
                raise SystemExit(f"protoc failed with exit code {res.returncode}")
        for proto in PROTO_FILES:
            stem = Path(proto).stem + "_pb2"
            for suffix in (".py", ".pyi"):
                src = Path(tmp) / (stem + suffix)
                text = _rewrite_imports(src.read_text(encoding="utf-8"))
                dst = out_dir / (stem + suffix)
                dst.write_text(text, encoding="utf-8", newline="\n")
                written.append(dst)
    init = out_dir / "__init__.py"
    init.write_text(INIT_TEXT, encoding="utf-8", newline="\n")
    written.append(init)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"output directory (default: {DEFAULT_OUT.relative_to(REPO_ROOT)})",
    )
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
