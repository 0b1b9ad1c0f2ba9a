"""One read of a project: its documents by ID and path, their dependencies and references.

Built from `Project.scan()` for each command (no cache on disk: a project's documents are
the truth, and one scan of a few thousand files is well under a second).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from lattice_operator.mcp.documents import Document, Project
from lattice_operator.mcp.errors import DocumentError
from lattice_operator.mcp.links import body_links, front_matter_ids, is_external, target_id
from lattice_operator.mcp.links import target_path as link_path


def _ids(value: object) -> list[str]:
    """A front-matter list of IDs (a single ID is taken as a list of one)."""
    items = value if isinstance(value, list) else [value] if value else []
    return [str(item) for item in items if isinstance(item, str) and item]


@dataclass
class ProjectIndex:
    """The documents of a project and the relations between them."""

    documents: list[Document]
    broken: list[DocumentError]
    by_id: dict[str, Document] = field(default_factory=dict)
    by_path: dict[str, str] = field(default_factory=dict)
    duplicates: dict[str, list[str]] = field(default_factory=dict)
    # blocked ID -> the IDs that block it, from `blocked-by` and the blockers' `blocking`.
    blocked_by: dict[str, list[str]] = field(default_factory=dict)
    # ID -> the IDs of other documents that link to it (body or front matter).
    referenced_by: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, project: Project) -> ProjectIndex:
        documents, broken = project.scan()
        index = cls(documents, broken)
        paths: dict[str, list[str]] = defaultdict(list)
        for doc in documents:  # scan order is sorted by path: the first one wins an ID
            paths[doc.lattice_id].append(doc.path)
            index.by_id.setdefault(doc.lattice_id, doc)
            index.by_path[doc.path] = doc.lattice_id
        index.duplicates = {i: p for i, p in paths.items() if len(p) > 1}
        blocked_by: dict[str, list[str]] = defaultdict(list)
        for doc in documents:
            for blocker in _ids(doc.front_matter.get("blocked-by")):
                if blocker not in blocked_by[doc.lattice_id]:
                    blocked_by[doc.lattice_id].append(blocker)
            for blocked in _ids(doc.front_matter.get("blocking")):
                if doc.lattice_id not in blocked_by[blocked]:
                    blocked_by[blocked].append(doc.lattice_id)
        index.blocked_by = dict(blocked_by)
        referenced: dict[str, set[str]] = defaultdict(set)
        for doc in documents:
            for target in index.outgoing(doc):
                if target != doc.lattice_id:
                    referenced[target].add(doc.lattice_id)
        index.referenced_by = dict(referenced)
        return index

    def outgoing(self, doc: Document) -> list[str]:
        """The IDs a document refers to, in order of first appearance, each once."""
        found = [lattice_id for _, lattice_id in front_matter_ids(doc.front_matter)]
        for link in body_links(doc.body):
            if is_external(link.target):
                continue
            lattice_id = target_id(link.target)
            if lattice_id is None and "#" not in link.target:
                lattice_id = self.by_path.get(link_path(doc.path, link.target))
            if lattice_id is not None:
                found.append(lattice_id)
        return list(dict.fromkeys(found))

    def blockers(self, lattice_id: str) -> list[str]:
        return self.blocked_by.get(lattice_id, [])

    def dependents(self, lattice_id: str) -> list[str]:
        """The IDs this one blocks, in path order."""
        return [d.lattice_id for d in self.documents if lattice_id in self.blockers(d.lattice_id)]

    def is_closed(self, lattice_id: str) -> bool:
        doc = self.by_id.get(lattice_id)
        return doc is not None and doc.is_closed

    def open_blockers(self, lattice_id: str) -> list[str]:
        """Blockers not closed; an ID no document has counts as open (it cannot be closed)."""
        return [b for b in self.blockers(lattice_id) if not self.is_closed(b)]

    def state(self, doc: Document) -> str:
        """`closed`, `blocked` (a blocker is not closed) or `open`; `doc` for a non-task."""
        if not doc.is_task:
            return "doc"
        if doc.is_closed:
            return "closed"
        return "blocked" if self.open_blockers(doc.lattice_id) else "open"

    def parent(self, doc: Document) -> Document | None:
        parent_id = doc.front_matter.get("parent-id")
        return self.by_id.get(parent_id) if isinstance(parent_id, str) else None


__all__ = ["ProjectIndex"]
