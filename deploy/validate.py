"""Validate Kubernetes manifests offline: core kinds against the Kubernetes OpenAPI schemas
(kubernetes-validate, strict: unknown fields are errors), Prometheus Operator kinds against the
CRDs vendored in deploy/schemas/.

    python deploy/validate.py deploy/kubernetes/*.yaml [--kubernetes-version 1.25.0 ...]

A CRD's structural schema makes the API server drop unknown fields silently; kubectl's default
`--validate=strict` turns them into errors. So every object schema here gets
`additionalProperties: false` unless it says `x-kubernetes-preserve-unknown-fields`: a
misspelt ServiceMonitor key fails here instead of being pruned without a word in the cluster.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml

SCHEMAS = Path(__file__).resolve().parent / "schemas"
# The oldest the chart supports (Chart.yaml kubeVersion) and the newest kubernetes-validate knows.
DEFAULT_VERSIONS = ("1.25.0", "1.37.0")


def documents(text: str) -> Iterator[dict[str, Any]]:
    """The objects in a multi-document YAML text (empty documents skipped)."""
    for doc in yaml.safe_load_all(text):
        if doc is not None:
            yield doc


def _strict(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            out.get("type") == "object"
            and "properties" in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
            and "additionalProperties" not in out
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → strict JSON schema, from every CRD in deploy/schemas/."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(SCHEMAS.glob("*.yaml")):
        for crd in documents(path.read_text(encoding="utf-8")):
            spec = crd["spec"]
            for version in spec["versions"]:
                schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
                out[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = _strict(schema)
    return out


def problems(obj: dict[str, Any], versions: Iterable[str] = DEFAULT_VERSIONS) -> list[str]:
    """Why `obj` would be refused; [] when it validates."""
    import jsonschema
    import kubernetes_validate

    api, kind = obj.get("apiVersion"), obj.get("kind")
    name = (obj.get("metadata") or {}).get("name", "?")
    where = f"{kind}/{name}"
    if not isinstance(api, str) or not isinstance(kind, str):
        return [f"{where}: no apiVersion or kind"]
    schema = crd_schemas().get((api, kind))
    if schema is not None:
        validator = jsonschema.Draft7Validator(schema)
        return [
            f"{where}: {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
        ]
    found = []
    for version in versions:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = "/".join(map(str, exc.path)) or "(top)"
            found.append(f"{where} (Kubernetes {version}): {path}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError:
            found.append(f"{where}: no schema for {api} {kind} in Kubernetes {version}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument(
        "--kubernetes-version",
        action="append",
        metavar="X.Y.Z",
        help=f"default {' and '.join(DEFAULT_VERSIONS)}",
    )
    args = parser.parse_args(argv)
    versions = args.kubernetes_version or DEFAULT_VERSIONS
    failed = 0
    for path in args.files:
        try:
            objs = list(documents(path.read_text(encoding="utf-8")))
        except (OSError, yaml.YAMLError) as exc:
            print(f"{path}: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 2
        for obj in objs:
            for line in problems(obj, versions):
                print(f"{path}: {line}", file=sys.stderr)
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
