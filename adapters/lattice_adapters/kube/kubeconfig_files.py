"""Which kubeconfig files are read, and how they merge: kubectl's rules.

The `kubernetes` package's KubeConfigMerger differs from kubectl on three points, so the
files are merged here and the merged document goes to its KubeConfigLoader: a later file's
current-context replaced an earlier one's (kubectl: the first file that sets a value wins),
an empty file was an error (kubectl reads it as empty), and a user's relative certificate
paths were resolved against the file of the context's cluster (kubectl: the file that names
them)."""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Any

import yaml

from lattice_adapters.kube.errors import KubeConfigError

SECTIONS = {"clusters": "cluster", "contexts": "context", "users": "user"}
DATA_KEYS = ("certificate-authority-data", "client-certificate-data", "client-key-data")
RELATIVE_KEYS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


def kubeconfig_paths(explicit: str | Path | None) -> list[Path]:
    """The files to read.

    --kubeconfig: that one file, which must exist. $KUBECONFIG: its list, empty entries and
    missing files skipped, each file once. Otherwise ~/.kube/config if it exists."""
    if explicit is not None and str(explicit) != "":
        path = Path(explicit).expanduser()
        if not path.exists():
            raise KubeConfigError(f"kubeconfig {path} does not exist")
        return [path]
    env = os.environ.get("KUBECONFIG", "")
    if env:
        seen: list[Path] = []
        for entry in env.split(os.pathsep):
            path = Path(entry).expanduser()
            if entry and path.exists() and path not in seen:
                seen.append(path)
        return seen
    default = Path.home() / ".kube" / "config"
    return [default] if default.exists() else []


def read_merged(paths: list[Path]) -> dict[str, Any]:
    """One kubeconfig document: the first file that sets a value (or a named entry) wins."""
    merged: dict[str, Any] = {"clusters": [], "contexts": [], "users": []}
    names: dict[str, set[str]] = {section: set() for section in SECTIONS}
    for path in paths:
        doc = _read(path)
        if doc.get("current-context") and not merged.get("current-context"):
            merged["current-context"] = str(doc["current-context"])
        for section, item_key in SECTIONS.items():
            items = doc.get(section)
            if items is None:
                continue
            if not isinstance(items, list):
                raise KubeConfigError(f"kubeconfig {path}: {section} is not a list")
            for item in items:
                if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                    raise KubeConfigError(f"kubeconfig {path}: an entry of {section} has no name")
                body = item.get(item_key) or {}
                if not isinstance(body, dict):
                    raise KubeConfigError(
                        f"kubeconfig {path}: {item_key} {item['name']!r} is not a mapping"
                    )
                if item["name"] in names[section]:
                    continue
                names[section].add(item["name"])
                _check_data(body, path, item_key, item["name"])
                merged[section].append(
                    {"name": item["name"], item_key: _resolved(body, item_key, path.parent)}
                )
    return merged


def _read(path: Path) -> dict[str, Any]:
    try:
        doc: Any = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise KubeConfigError(f"cannot read kubeconfig {path}: {_one_line(exc)}") from exc
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise KubeConfigError(f"kubeconfig {path} is not a mapping")
    return doc


def _check_data(body: dict[str, Any], path: Path, item_key: str, name: str) -> None:
    """Inline certificates and keys must be base64, as kubectl reads them: the loader would
    skip what is not, and a corrupt CA must never mean "the system CAs"."""
    for key in DATA_KEYS:
        if body.get(key):
            try:
                # Line breaks are allowed (as Go's decoder does); no other non-alphabet byte.
                base64.b64decode("".join(str(body[key]).split()), validate=True)
            except (binascii.Error, ValueError):
                raise KubeConfigError(
                    f"kubeconfig {path}: {item_key} {name!r}: {key} is not valid base64"
                ) from None


def _resolved(body: dict[str, Any], item_key: str, base: Path) -> dict[str, Any]:
    """The entry with its file references made absolute against the file that names them."""
    out = dict(body)
    for key in RELATIVE_KEYS.get(item_key, ()):
        value = out.get(key)
        if isinstance(value, str) and value and not os.path.isabs(value):
            out[key] = str(base / value)
    exec_section = out.get("exec")
    if isinstance(exec_section, dict):
        command = exec_section.get("command")
        # kubectl: a command with a path separator is relative to its file; a bare name is
        # looked up on PATH.
        if isinstance(command, str) and os.sep in command and not os.path.isabs(command):
            out["exec"] = {**exec_section, "command": str(base / command)}
    return out


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
