"""``python -m lance_format.namespace.serve --root DIR --port N``: a REST namespace over a folder.

Serves a :class:`DirectoryNamespace` (V2 unless ``--v1``) with :mod:`lance_format.namespace.server`
on uvicorn. ``--token`` (or the ``LANCE_NAMESPACE_TOKEN`` environment variable) makes every
request present ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lance_format.namespace.serve", description=__doc__)
    parser.add_argument("--root", required=True, help="the catalog's folder or object-store URI")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=2333)
    parser.add_argument("--v1", action="store_true", help="no __manifest table: <name>.lance folders only")
    parser.add_argument("--token", default=os.environ.get("LANCE_NAMESPACE_TOKEN"),
                        help="require 'Authorization: Bearer TOKEN' (default: $LANCE_NAMESPACE_TOKEN)")
    args = parser.parse_args(argv)

    import uvicorn

    from lance_format.namespace.directory import DirectoryNamespace
    from lance_format.namespace.server import create_app

    namespace = DirectoryNamespace(root=args.root, manifest_enabled="false" if args.v1 else "true")
    uvicorn.run(create_app(namespace, token=args.token), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
