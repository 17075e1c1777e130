"""Refreshing credentials named by strings, so that they travel wherever storage options go.

A ``credential_provider`` storage option is either a callable (usable in this process only) or
a string ``"package.module:factory"``. The string form exists because Spark task options and
Dagster resource config carry strings only: each process that opens the store (a Spark
executor's Python worker, a Dagster run worker) imports the module and calls
``factory(...)`` itself, which returns the provider, a callable giving credentials as storage
options (see :class:`lance_format.io.object_store.ObjectStore`). ``credential_provider_args``
holds the factory's arguments: a JSON object (keyword arguments), a JSON array (positional
ones), another JSON value or a plain string (one argument). A process makes each named
provider once and shares it between its stores, so a provider may cache its credentials.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from lance_format.errors import InvalidInputError

CredentialProvider = Callable[[], Mapping[str, Any]]

CREDENTIAL_PROVIDER = "credential_provider"
CREDENTIAL_PROVIDER_ARGS = "credential_provider_args"

_PROVIDERS: dict[tuple[str, str | None], CredentialProvider] = {}
_PROVIDERS_LOCK = threading.Lock()


def _factory_arguments(args: str | None, table: str | None) -> tuple[list[Any], dict[str, Any]]:
    if args is None:
        return [], {}
    try:
        value = json.loads(args)
    except ValueError:
        return [args], {}  # a plain string
    if isinstance(value, dict):
        return [], value
    if isinstance(value, list):
        return value, {}
    return [value], {}


def named_credential_provider(name: str, args: str | None = None, *, table: str | None = None) -> CredentialProvider:
    """The provider ``factory(*args)`` made for ``"package.module:factory"``, once per process."""
    key = (name, args)
    with _PROVIDERS_LOCK:
        provider = _PROVIDERS.get(key)
        if provider is not None:
            return provider
        module_name, _, attribute = name.strip().partition(":")
        if not module_name or not attribute:
            raise InvalidInputError(f"storage option 'credential_provider' names a provider factory as "
                                    f"'package.module:factory', got {name!r}", table=table)
        try:
            target: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError) as exc:
            raise InvalidInputError(f"storage option 'credential_provider': cannot import {name!r} in this process "
                                    f"({type(exc).__name__}: {exc})", table=table) from None
        if not callable(target):
            raise InvalidInputError(f"storage option 'credential_provider': {name!r} is not callable", table=table)
        positional, keywords = _factory_arguments(args, table)
        try:
            provider = target(*positional, **keywords)
        except TypeError as exc:
            raise InvalidInputError(f"storage option 'credential_provider': {name!r} does not take the arguments "
                                    f"of 'credential_provider_args' ({exc})", table=table) from None
        if not callable(provider):
            raise InvalidInputError(f"storage option 'credential_provider': {name!r} returned "
                                    f"{type(provider).__name__}, not a provider callable", table=table)
        _PROVIDERS[key] = provider
        return provider


def split_credential_provider(
    options: Mapping[str, Any] | None, *, table: str | None = None,
) -> tuple[dict[str, Any], CredentialProvider | None, dict[str, str]]:
    """(the other options, the provider or None, the string options that name the provider:
    they go with the other options wherever the store is opened again)."""
    rest = dict(options or {})
    provider: CredentialProvider | None = None
    named: dict[str, str] = {}
    for key in [k for k in rest if isinstance(k, str) and k.strip().lower() in (CREDENTIAL_PROVIDER,
                                                                                  CREDENTIAL_PROVIDER_ARGS)]:
        named[key.strip().lower()] = rest.pop(key)
    value = named.pop(CREDENTIAL_PROVIDER, None)
    args = named.pop(CREDENTIAL_PROVIDER_ARGS, None)
    if args is not None and not isinstance(args, str):
        args = json.dumps(args)  # a dict given in Python: the same as its JSON
    if value is None:
        if args is not None:
            raise InvalidInputError("storage option 'credential_provider_args' needs 'credential_provider'",
                                    table=table)
        return rest, None, {}
    if isinstance(value, str):
        provider = named_credential_provider(value, args, table=table)
        spec = {CREDENTIAL_PROVIDER: value}
        if args is not None:
            spec[CREDENTIAL_PROVIDER_ARGS] = args
        return rest, provider, spec
    if not callable(value):
        raise InvalidInputError("storage option 'credential_provider' must be a callable that returns credentials "
                                "as storage options, or a 'package.module:factory' string naming one", table=table)
    if args is not None:
        raise InvalidInputError("storage option 'credential_provider_args' goes with a 'package.module:factory' "
                                "string, not with a callable", table=table)
    return rest, value, {}


__all__ = ["CREDENTIAL_PROVIDER", "CREDENTIAL_PROVIDER_ARGS", "CredentialProvider", "named_credential_provider",
           "split_credential_provider"]
