"""Lattice documents on disk: front matter, IDs, filenames, root documents, safe paths.

A document is a markdown file that starts with a YAML front-matter block between two
`---` lines. Formats the seed leaves open are decided here and documented in docs/mcp.md.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from lattice_operator.mcp.errors import DocumentError, ToolError

# "L" and five letters; I and O are left out so an ID read aloud or by eye is unambiguous.
ID_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ"
ID_LENGTH = 5
ID_PATTERN = re.compile(rf"^L[{ID_ALPHABET}]{{{ID_LENGTH}}}$")
TASK_TYPES = ("bug", "feature", "task", "chore")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_FILENAME_STEM = 40
# Fresh IDs tried before ID_COLLISION: with 24**5 IDs a second collision means a bad generator.
ID_ATTEMPTS = 3
_STOP_WORDS = frozenset(
    {"a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "with", "by"}
    | {"from", "is", "are", "be", "it", "its", "this", "that", "as"}
)

MAX_FRONT_MATTER = 64 * 1024
"""Characters of front matter read at most: an agent's document is a few hundred."""
# A broken document's ID, read from its text, so it still counts as taken and can be named.
_RAW_ID = re.compile(r"^lattice-id:[ \t]*[\"']?(L[A-Z]{5})\b", re.MULTILINE)

# Directories never searched for documents: tooling, not knowledge.
_SKIPPED_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__", ".claude"})


# The looser shape of an ID read from a document: the seed's own IDs also hold digits.
ANY_ID_PATTERN = re.compile(r"^L[A-Z0-9]{3,}$")


def timestamp(now: datetime) -> str:
    """A front-matter time: UTC ISO 8601 with `Z` (`created-at`, `closed-at`)."""
    return now.isoformat().replace("+00:00", "Z")


def jsonable(value: Any) -> Any:
    """Front-matter values as JSON: YAML dates and times become ISO 8601 strings."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def new_lattice_id() -> str:
    """A random Lattice ID, e.g. `LCGWQN`."""
    return "L" + "".join(secrets.choice(ID_ALPHABET) for _ in range(ID_LENGTH))


@dataclass(frozen=True)
class Document:
    """One parsed document: its path relative to the project root, front matter and body."""

    path: str
    front_matter: dict[str, Any]
    body: str

    @property
    def lattice_id(self) -> str:
        return str(self.front_matter.get("lattice-id", ""))

    @property
    def is_task(self) -> bool:
        return "task-type" in self.front_matter

    @property
    def is_closed(self) -> bool:
        return self.front_matter.get("closed-at") is not None

    @property
    def is_root(self) -> bool:
        """A directory's root document: `D/<name of D>.md` (`api/api.md`)."""
        path = PurePosixPath(self.path)
        return path.stem == path.parent.name and path.parent.name != ""


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a value shared by two fields twice, never as an alias (which parse refuses)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(front_matter: dict[str, Any], body: str) -> str:
    """The file text: YAML front matter (safe-dumped, so any characters survive) then the body."""
    header = yaml.dump(
        front_matter, Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True, width=1_000_000
    )
    # The body is kept byte for byte (no newline added), so lattice_show returns what was sent.
    return f"---\n{header}---\n\n{body}"


class _NoAliasLoader(yaml.SafeLoader):
    """Refuses YAML aliases: ten lines of `&a [*b, *b, ...]` expand to gigabytes (billion
    laughs), and documents written by these tools never contain one."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, f"aliases are not allowed (found *{event.anchor})", event.start_mark
            )
        return super().compose_node(parent, index)


def _load(path: str, raw: str) -> dict[str, Any]:
    """The front matter as a mapping, or DocumentError naming the field that cannot be read."""
    if len(raw) > MAX_FRONT_MATTER:
        raise DocumentError(
            path, "", f"front matter has {len(raw)} characters; the maximum is {MAX_FRONT_MATTER}"
        )
    loader = _NoAliasLoader(raw)
    try:
        node = loader.get_single_node()
        if not isinstance(node, yaml.MappingNode):
            raise DocumentError(path, "", "front matter is not a mapping of fields")
        try:
            front = loader.construct_document(node)
        except (ValueError, TypeError, yaml.YAMLError):
            # Which field: a bad value (a date such as 2026-13-45) fails on its own.
            for key_node, value_node in node.value:
                try:
                    yaml.SafeLoader("").construct_object(value_node, deep=True)
                except (ValueError, TypeError, yaml.YAMLError) as err:
                    marked = isinstance(err, yaml.MarkedYAMLError)  # it has its own line
                    line = "" if marked else f" (line {value_node.start_mark.line + 2})"
                    raise DocumentError(path, str(key_node.value), _reason(err) + line) from None
            raise
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        field = _field_at(raw, mark.line) if mark is not None else ""
        raise DocumentError(path, field, _reason(err)) from None
    except (ValueError, TypeError, yaml.YAMLError) as err:
        raise DocumentError(path, "", _reason(err)) from None
    except RecursionError:
        raise DocumentError(path, "", "front matter is nested too deeply") from None
    finally:
        loader.dispose()
    if not isinstance(front, dict):
        raise DocumentError(path, "", "front matter is not a mapping of fields")
    return front


_TOP_KEY = re.compile(r"^([^\s#'\"\[{-][^:]*):")


def _field_at(raw: str, line: int) -> str:
    """The top-level field whose value holds `line` of the front matter ('' if none)."""
    for text in reversed(raw.splitlines()[: line + 1]):
        found = _TOP_KEY.match(text)
        if found:
            return found.group(1).strip()
    return ""


def _reason(err: Exception) -> str:
    """The YAML library's complaint, with the line of the file (the `---` is line 1)."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem:
        mark = err.problem_mark
        return err.problem + (f" (line {mark.line + 2})" if mark is not None else "")
    return " ".join(str(err).split())


def _header_end(text: str) -> int:
    """Where the body starts (after the closing `---` line), or -1 without front matter."""
    if not text.startswith("---\n"):
        return -1
    end = text.find("\n---\n", 3)
    return -1 if end < 0 else end + 5


def with_body(text: str, body: str) -> str:
    """The file text with its body replaced; the front matter is kept byte for byte."""
    end = _header_end(text)
    if end < 0:
        raise ValueError("the text has no front matter")
    blank = "\n" if text[end:].startswith("\n") else ""
    return text[:end] + blank + body


def with_fields(text: str, fields: dict[str, Any]) -> str:
    """The file text with new front-matter fields appended after the others; every other
    byte (comments, quoting, unknown keys, the body) is kept as it was."""
    end = _header_end(text)
    if end < 0:
        raise ValueError("the text has no front matter")
    lines = yaml.dump(
        fields, Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True, width=1_000_000
    )
    return text[: end - 4] + lines + text[end - 4 :]


def parse(path: str, text: str) -> Document | None:
    """A document from file text, or None when the text has no front matter (not one of
    ours). Front matter that cannot be read raises DocumentError when it holds a
    `lattice-id` line, else the file is not ours either and is None."""
    end = _header_end(text)
    if end < 0:
        return None
    raw = text[4 : end - 4]
    try:
        front = _load(path, raw)
    except DocumentError as err:
        found = _RAW_ID.search(raw)
        if found is None:
            return None
        err.lattice_id = found.group(1)
        raise
    body = text[end:]
    return Document(path=path, front_matter=front, body=body.removeprefix("\n"))


def _read(path: Path) -> str:
    # newline="": a body's "\r\n" comes back as it was written.
    with path.open(encoding="utf-8", newline="") as handle:
        return handle.read()


def filename_stem(description: str) -> str:
    """Lowercase significant words joined by underscores, cut at a word boundary (~40 chars)."""
    every: list[str] = re.findall(r"[a-z0-9]+", description.lower())
    words = [w for w in every if w not in _STOP_WORDS] or every or ["task"]
    stem = words[0][:MAX_FILENAME_STEM]
    for word in words[1:]:
        if len(stem) + 1 + len(word) > MAX_FILENAME_STEM:
            break
        stem = f"{stem}_{word}"
    return stem


def name_from_filename(filename: str) -> str:
    """The `name` field: the filename without `.md`, lowercased, underscores as hyphens."""
    return filename.removesuffix(".md").lower().replace("_", "-")


class Project:
    """A project root and the operations on the documents below it; never leaves the root."""

    def __init__(self, root: Path, new_id: Callable[[], str] = new_lattice_id) -> None:
        self.root = root.resolve()
        self._new_id = new_id
        # path -> ((mtime_ns, size), lattice-id): a file is read again only when it changed.
        self._id_cache: dict[str, tuple[tuple[int, int], str]] = {}

    # -- paths ------------------------------------------------------------------------------

    def directory(self, directory: str) -> Path:
        """The absolute directory for a caller's relative path, refusing any escape."""
        if not directory.strip():
            raise ToolError(
                "INVALID_DIRECTORY",
                "Directory must not be empty",
                "Pass a directory relative to the project root, e.g. 'api/'",
            )
        if "\x00" in directory or os.path.isabs(directory) or directory.startswith("~"):
            raise ToolError(
                "INVALID_DIRECTORY",
                f"Directory '{directory}' is not a path relative to the project root",
                "Pass a relative path such as 'api/' without a leading '/' or '~'",
            )
        target = self.inside(self.root / directory, shown=directory)
        if not target.is_dir():
            raise ToolError(
                "INVALID_DIRECTORY",
                f"Directory '{directory}' does not exist",
                "Create the directory or use an existing path",
            )
        return target

    def inside(self, path: Path, shown: str) -> Path:
        """`path` with symlinks resolved, if it stays inside the project root."""
        resolved = path.resolve()
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolError(
                "INVALID_DIRECTORY",
                f"Path '{shown}' leads outside the project root",
                "Use a directory inside the project; '..', absolute paths and symlinks "
                "that leave the project are refused",
            )
        return resolved

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # -- documents --------------------------------------------------------------------------

    def _markdown_files(self) -> Iterator[Path]:
        """Every regular `*.md` file under the root; symlinks are never followed."""
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
            for filename in sorted(filenames):
                full = Path(dirpath) / filename
                if filename.endswith(".md") and not full.is_symlink():
                    yield full

    def scan(self) -> tuple[list[Document], list[DocumentError]]:
        """Every document under the root (a `*.md` with a `lattice-id` in its front matter),
        and every document whose front matter cannot be read: one bad file hides no other."""
        found, broken = [], []
        for full in self._markdown_files():
            try:
                text = _read(full)
            except (OSError, UnicodeDecodeError):
                continue
            try:
                doc = parse(self.relative(full), text)
            except DocumentError as err:
                broken.append(err)
                continue
            if doc is not None and doc.lattice_id:
                found.append(doc)
        return found, broken

    def documents(self) -> Iterator[Document]:
        """Every readable document under the root."""
        yield from self.scan()[0]

    def taken_ids(self) -> set[str]:
        """Every document's ID; only files changed since the last call are parsed again."""
        cache, fresh = self._id_cache, {}
        for full in self._markdown_files():
            try:
                info = full.stat()
            except OSError:
                continue
            key, stamp = str(full), (info.st_mtime_ns, info.st_size)
            known = cache.get(key)
            if known is None or known[0] != stamp:
                try:
                    doc = parse(key, _read(full))
                    lattice_id = doc.lattice_id if doc is not None else ""
                except (OSError, UnicodeDecodeError):
                    lattice_id = ""
                except DocumentError as err:
                    lattice_id = err.lattice_id
                known = (stamp, lattice_id)
            fresh[key] = known
        self._id_cache = fresh
        return {lattice_id for _, lattice_id in fresh.values() if lattice_id}

    def find(self, lattice_id: str) -> Document:
        found, broken = self.scan()
        for doc in found:
            if doc.lattice_id == lattice_id:
                return doc
        for err in broken:
            if err.lattice_id == lattice_id:
                raise err.as_tool_error()
        raise ToolError(
            "NOT_FOUND",
            f"No document has Lattice ID '{lattice_id}'",
            "Check the ID with lattice_list",
        )

    def root_document(self, directory: Path, shown: str) -> Document:
        """The directory's root document: `<dir>/<dir name>.md` with a `lattice-id`."""
        path = directory / f"{directory.name}.md"
        rel = self.relative(path) if path.exists() else f"{shown.rstrip('/')}/{directory.name}.md"
        if path.is_file():
            self.inside(path, shown=rel)
            try:
                doc = parse(rel, _read(path))
            except DocumentError as err:
                raise err.as_tool_error() from None
            if doc is not None and doc.lattice_id:
                return doc
        raise ToolError(
            "MISSING_ROOT",
            f"Directory '{shown}' has no root document '{rel}' with a lattice-id",
            f"Create '{rel}' with front matter containing 'lattice-id' before adding documents",
        )

    def fresh_id(self) -> str:
        taken = self.taken_ids()
        for _ in range(ID_ATTEMPTS):
            candidate = self._new_id()
            if candidate not in taken:
                return candidate
        raise ToolError(
            "ID_COLLISION",
            f"Generated Lattice ID collided with an existing document {ID_ATTEMPTS} times",
            "Retry the call; if it keeps failing, report it",
        )

    def write_new(self, folder: Path, filename: str, text: str) -> str:
        """Create `folder/filename` exclusively (never overwrites); returns the relative path."""
        # Resolved before it is created: a (dangling) symlink out of the project is refused.
        folder = self.inside(folder, shown=f"{folder.name}/{filename}")
        folder.mkdir(exist_ok=True)
        target = folder / filename
        rel = self.relative(target)
        try:
            with target.open("x", encoding="utf-8", newline="") as handle:
                handle.write(text)
        except FileExistsError:
            raise ToolError(
                "FILE_EXISTS",
                f"File '{rel}' already exists",
                "Choose a different name or update the existing document",
            ) from None
        return rel

    def rewrite(self, doc: Document, front_matter: dict[str, Any]) -> None:
        self.write(doc.path, render(front_matter, doc.body))

    def read(self, rel: str) -> str:
        """The text of the file at `rel` (inside the root), line endings as they are."""
        return _read(self.inside(self.root / rel, shown=rel))

    def write(self, rel: str, text: str) -> None:
        """Replace the file at `rel` atomically: readers see the old text or the new."""
        path = self.inside(self.root / rel, shown=rel)
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
        # mkstemp creates a new file (never follows a planted symlink); replace is atomic.
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def add_fields(self, doc: Document, fields: dict[str, Any]) -> None:
        """Add front-matter fields the document lacks, touching nothing else in the file."""
        text = self.read(doc.path)
        current = parse(doc.path, text)
        if current is None or any(key in current.front_matter for key in fields):
            # Replacing a key (or a file changed under us): the whole front matter is written.
            base = current or doc
            self.rewrite(base, {**base.front_matter, **fields})
            return
        self.write(doc.path, with_fields(text, fields))


__all__ = [
    "ANY_ID_PATTERN",
    "ID_ALPHABET",
    "ID_LENGTH",
    "MAX_DESCRIPTION",
    "MAX_FRONT_MATTER",
    "MAX_NAME",
    "TASK_TYPES",
    "Document",
    "Project",
    "filename_stem",
    "jsonable",
    "name_from_filename",
    "new_lattice_id",
    "parse",
    "render",
    "timestamp",
    "with_body",
    "with_fields",
]
