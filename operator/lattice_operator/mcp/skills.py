"""Skill documents: a document with `skill: true` is offered to Claude as a skill through a
symlink `.claude/skills/<name>.md` to the document (relative, so the checkout can move).

`lattice skills sync` (and `lattice fmt`) create missing links, repoint links whose document
moved or was renamed, and remove links into the project whose document is no longer a
valid skill. Anything else under `.claude/skills/` (files, directories, links leading
outside the project) is the user's and is never touched.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lattice_operator.mcp.documents import MAX_DESCRIPTION, MAX_NAME, Document
from lattice_operator.mcp.index import ProjectIndex
from lattice_operator.mcp.problems import Problem

SKILLS_DIR = ".claude/skills"
RESERVED_WORDS = ("anthropic", "claude")
_XML_TAG = re.compile(r"<\s*/?\s*[A-Za-z_][^<>]*>")
# Claude's own rule for skill names; it also keeps the link a plain file name.
_SKILL_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def is_skill(doc: Document) -> bool:
    return doc.front_matter.get("skill") is True


def skill_problems(doc: Document) -> list[Problem]:
    """The seed's rules for a skill document's name and description."""
    front = doc.front_matter

    def problem(code: str, name: str, message: str) -> Problem:
        return Problem(code, doc.path, message, doc.lattice_id, name)

    found = []
    name = front.get("name")
    if not isinstance(name, str) or not name:
        found.append(problem("MISSING_FIELD", "name", "a skill needs a non-empty 'name'"))
    elif len(name) > MAX_NAME:
        found.append(
            problem(
                "NAME_TOO_LONG",
                "name",
                f"skill name has {len(name)} characters; the maximum is {MAX_NAME}",
            )
        )
    elif _XML_TAG.search(name):
        found.append(
            problem("INVALID_SKILL_NAME", "name", f"skill name {name!r} holds an XML-like tag")
        )
    elif any(word in name.lower() for word in RESERVED_WORDS):
        found.append(
            problem(
                "INVALID_SKILL_NAME",
                "name",
                f"skill name {name!r} contains a reserved word ({' or '.join(RESERVED_WORDS)})",
            )
        )
    elif not _SKILL_NAME.match(name):
        found.append(
            problem(
                "INVALID_SKILL_NAME",
                "name",
                f"skill name {name!r} is not lowercase letters, digits and single hyphens",
            )
        )
    description = front.get("description")
    if not isinstance(description, str) or not description.strip():
        found.append(
            problem("MISSING_FIELD", "description", "a skill needs a non-empty 'description'")
        )
    elif len(description) > MAX_DESCRIPTION:
        found.append(
            problem(
                "DESCRIPTION_TOO_LONG",
                "description",
                f"description has {len(description)} characters; the maximum is {MAX_DESCRIPTION}",
            )
        )
    return found


@dataclass
class SkillPlan:
    """What a sync does: link file name -> target (relative to the skills directory)."""

    create: dict[str, str] = field(default_factory=dict)
    update: dict[str, str] = field(default_factory=dict)
    remove: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def in_sync(self) -> bool:
        return not (self.create or self.update or self.remove)

    def as_json(self) -> dict[str, Any]:
        return {
            "created": sorted(self.create),
            "updated": sorted(self.update),
            "removed": sorted(self.remove),
            "invalid": [p.as_json() for p in self.problems],
        }


def _wanted(index: ProjectIndex) -> tuple[dict[str, str], list[Problem]]:
    """Link file name -> the document's project-relative path, for every valid skill."""
    wanted: dict[str, str] = {}
    problems: list[Problem] = []
    for doc in index.documents:
        if not is_skill(doc):
            continue
        found = skill_problems(doc)
        link = f"{doc.front_matter.get('name')}.md"
        if not found and link in wanted:
            found.append(
                Problem(
                    "DUPLICATE_SKILL_NAME",
                    doc.path,
                    f"skill name is also the name of {wanted[link]}; that one keeps the link",
                    doc.lattice_id,
                    "name",
                )
            )
        problems += found
        if not found:
            wanted[link] = doc.path
    return wanted, problems


def _inside(root: Path, skills: Path, target: str) -> bool:
    full = posixpath.normpath(posixpath.join(skills.as_posix(), target))
    return Path(full) == root or Path(full).is_relative_to(root)


def plan(root: Path, index: ProjectIndex) -> SkillPlan:
    """Compare `.claude/skills/` with the skill documents; changes nothing."""
    skills = root / SKILLS_DIR
    wanted, problems = _wanted(index)
    result = SkillPlan(problems=problems)
    if not _inside(root, root, str(skills.resolve())):
        # A planted `.claude` link out of the project: links are never written through it.
        result.problems.append(
            Problem("SKILL_CONFLICT", SKILLS_DIR, f"{SKILLS_DIR} leads outside the project")
        )
        return result
    current: dict[str, str] = {}
    if skills.is_dir():
        for entry in sorted(skills.iterdir()):
            if entry.is_symlink() and entry.name.endswith(".md"):
                current[entry.name] = os.readlink(entry)
    for link, doc_path in wanted.items():
        target = posixpath.relpath(doc_path, SKILLS_DIR)
        if link not in current:
            entry = skills / link
            if entry.exists() or entry.is_symlink():
                result.problems.append(
                    Problem(
                        "SKILL_CONFLICT",
                        doc_path,
                        f"{SKILLS_DIR}/{link} exists and is not a link; it was left alone",
                        field="name",
                    )
                )
            else:
                result.create[link] = target
        elif current[link] != target:
            result.update[link] = target
    for link, target in current.items():
        if link not in wanted and _inside(root, skills, target):
            result.remove.append(link)
    return result


def apply(root: Path, skill_plan: SkillPlan) -> None:
    """Carry out a plan; each link appears or changes atomically."""
    skills = root / SKILLS_DIR
    if skill_plan.create or skill_plan.update:
        skills.mkdir(parents=True, exist_ok=True)
    for link, target in {**skill_plan.create, **skill_plan.update}.items():
        tmp = skills / f".{link}.tmp"
        tmp.unlink(missing_ok=True)
        os.symlink(target, tmp)
        os.replace(tmp, skills / link)
    for link in skill_plan.remove:
        (skills / link).unlink(missing_ok=True)


__all__ = [
    "RESERVED_WORDS",
    "SKILLS_DIR",
    "SkillPlan",
    "apply",
    "is_skill",
    "plan",
    "skill_problems",
]
