"""`lattice prime|overview|ready|show|claim|close|check|fmt|skills sync` through the CLI,
on project trees the tests write (docs/mcp.md, "The workflow commands")."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lattice_operator.cli import app
from lattice_operator.mcp.documents import parse

ROOT_ID, DESIGN_ID = "LAPIRT", "LDESGN"
TASK_A, TASK_B, TASK_C, TASK_D = "LTASKA", "LTASKB", "LTASKC", "LTASKD"


def write(root: Path, rel: str, front: str, body: str = "body\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front.strip()}\n---\n\n{body}", newline="")
    return path


def task(lattice_id: str, priority: int, extra: str = "") -> str:
    return (
        f"lattice-id: {lattice_id}\nname: task-{lattice_id.lower()}\n"
        f"description: Task {lattice_id}\nparent-id: {ROOT_ID}\ntask-type: task\n"
        f"priority: {priority}\ncreated-at: '2026-01-0{priority + 1}T00:00:00Z'\n{extra}"
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """api/ with a root document, a design document and four tasks: A open, B blocked by A,
    C blocked by the closed D."""
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    write(root, "api/api.md", f"lattice-id: {ROOT_ID}\nname: api\ndescription: The API")
    write(root, f"api/tasks/a_{TASK_A}.md", task(TASK_A, 1))
    write(root, f"api/tasks/b_{TASK_B}.md", task(TASK_B, 0, f"blocked-by: [{TASK_A}]"))
    write(root, f"api/tasks/c_{TASK_C}.md", task(TASK_C, 2, f"blocked-by: [{TASK_D}]"))
    write(root, f"api/tasks/d_{TASK_D}.md", task(TASK_D, 2, "closed-at: '2026-01-05T00:00:00Z'"))
    write(
        root,
        "api/docs/design.md",
        f"lattice-id: {DESIGN_ID}\nname: design\ndescription: Design\nparent-id: {ROOT_ID}",
        f"Work on [task A]({TASK_A}); see [the root](../api.md).\n",
    )
    return root


def run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, (args, result.output)
    return result.output


def run_json(*args: str, code: int = 0) -> Any:
    return json.loads(run(*args, "--json", code=code))


def front_of(path: Path) -> dict[str, Any]:
    doc = parse(path.name, path.read_text())
    assert doc is not None
    return doc.front_matter


# -- prime, overview -----------------------------------------------------------------------------


def test_prime_prints_the_spec_workflow_lists() -> None:
    result = run_json("prime")
    sections = {s["title"]: [c["command"] for c in s["commands"]] for s in result["sections"]}
    assert sections == {
        "Session start": ["lattice prime", "lattice overview", "lattice ready"],
        "Working on a task": [
            "lattice show LXXXXX",
            "lattice claim LXXXXX",
            "lattice close LXXXXX",
        ],
        "Before committing": ["lattice check", "lattice fmt"],
        "Context recovery after compaction": ["lattice prime", "lattice overview"],
    }
    assert "lattice fmt" in run("prime")


def test_overview_ranks_critical_then_roots_then_most_referenced(project: Path) -> None:
    write(project, "api/docs/faq.md", "lattice-id: LFAQDC\nname: faq\ndescription: FAQ")
    write(
        project,
        "api/docs/rules.md",
        "lattice-id: LRULES\nname: rules\ndescription: Rules\nlabels: [critical]",
    )
    # The design document is linked from two others, faq from none.
    write(
        project, "notes.md", "lattice-id: LNOTES\nname: notes\ndescription: N", f"[d]({DESIGN_ID})"
    )
    write(project, "more.md", "lattice-id: LMOREE\nname: more\ndescription: M", f"[d]({DESIGN_ID})")
    result = run_json("overview", "--root", str(project), "--limit", "50")
    ids = [d["lattice_id"] for d in result["documents"]]
    # Critical: the P0 task and the labelled document (by priority); the root; references.
    assert ids[:3] == [TASK_B, "LRULES", ROOT_ID]
    assert ids.index(DESIGN_ID) < ids.index("LFAQDC")
    assert TASK_D not in ids  # closed tasks are left out
    by_id = {d["lattice_id"]: d for d in result["documents"]}
    assert by_id[DESIGN_ID]["references"] == 2
    assert by_id[TASK_A]["references"] == 2  # design's link, B's blocked-by
    assert [d["why"] for d in result["documents"][:3]] == ["critical", "critical", "root"]
    assert run_json("overview", "--root", str(project), "--limit", "2")["count"] == 2


# -- ready, claim, close ---------------------------------------------------------------------


def ready_ids(project: Path, who: str) -> list[str]:
    result = run_json("ready", "--root", str(project), "--as", who)
    return [t["lattice_id"] for t in result["tasks"]]


def test_ready_is_open_unblocked_tasks_by_priority(project: Path) -> None:
    result = run_json("ready", "--root", str(project))
    assert [t["lattice_id"] for t in result["tasks"]] == [TASK_A, TASK_C]
    assert result["blocked"] == 1
    assert result["tasks"][0]["parent"]["lattice_id"] == ROOT_ID
    assert result["tasks"][0]["body"] == "body\n"
    closed = run_json("close", TASK_A, "--root", str(project))
    assert closed["unblocked"] == [TASK_B]
    assert ready_ids(project, "me") == [TASK_B, TASK_C]  # B is P0
    text = run("ready", "--root", str(project))
    assert f"1. [P0] [task] {TASK_B}: Task {TASK_B}" in text


def test_a_blocker_no_document_has_keeps_a_task_blocked(project: Path) -> None:
    write(project, "api/tasks/e_LTASKE.md", task("LTASKE", 1, "blocked-by: [LGHOST]"))
    assert "LTASKE" not in ready_ids(project, "me")


def test_claims_are_local_and_keep_others_off(project: Path) -> None:
    root = str(project)
    claimed = run_json("claim", TASK_A, "--root", root, "--as", "alice")
    assert (claimed["claimed_by"], claimed["already_claimed"]) == ("alice", False)
    assert run_json("claim", TASK_A, "--root", root, "--as", "alice")["already_claimed"] is True
    assert (project / ".lattice" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (
        json.loads((project / ".lattice" / "claims" / f"{TASK_A}.json").read_text())["claimed_by"]
        == "alice"
    )
    assert "alice" not in (project / f"api/tasks/a_{TASK_A}.md").read_text()
    # Ready for alice (marked hers), not for bob.
    assert ready_ids(project, "alice") == [TASK_A, TASK_C]
    assert ready_ids(project, "bob") == [TASK_C]
    refused = run_json("claim", TASK_A, "--root", root, "--as", "bob", code=1)
    assert refused["error"]["code"] == "CLAIMED_BY_OTHER"
    assert "alice" in refused["error"]["message"]


def test_closing_a_task_claimed_by_someone_else_needs_force(project: Path) -> None:
    root, path = str(project), project / f"api/tasks/a_{TASK_A}.md"
    run("claim", TASK_A, "--root", root, "--as", "alice")
    before = path.read_bytes()
    refused = run_json("close", TASK_A, "--root", root, "--as", "bob", code=1)
    assert refused["error"]["code"] == "CLAIMED_BY_OTHER"
    assert path.read_bytes() == before  # nothing written
    assert "--force" in run("close", TASK_A, "--root", root, "--as", "bob", code=1)
    forced = run_json("close", TASK_A, "--root", root, "--as", "bob", "--force")
    assert forced["released_claim"]["claimed_by"] == "alice"
    assert "closed-at" in front_of(path)
    assert not (project / ".lattice" / "claims" / f"{TASK_A}.json").exists()


def test_close_of_ones_own_claim_releases_it(project: Path) -> None:
    root = str(project)
    run("claim", TASK_C, "--root", root, "--as", "alice")
    closed = run_json("close", TASK_C, "--root", root, "--as", "alice", "--reason", "done")
    assert closed["released_claim"]["claimed_by"] == "alice"
    assert closed["already_closed"] is False
    assert front_of(project / f"api/tasks/c_{TASK_C}.md")["closed-reason"] == "done"
    assert run_json("show", TASK_C, "--root", root)["claim"] is None
    again = run_json("close", TASK_C, "--root", root, "--as", "alice")
    assert again["already_closed"] is True


def test_claim_refuses_closed_tasks_documents_and_unknown_ids(project: Path) -> None:
    root = str(project)
    codes = [
        run_json("claim", lattice_id, "--root", root, code=1)["error"]["code"]
        for lattice_id in (TASK_D, DESIGN_ID, "LNOPEZ")
    ]
    assert codes == ["TASK_CLOSED", "NOT_A_TASK", "NOT_FOUND"]
    assert not (project / ".lattice" / "claims").exists() or not any(
        (project / ".lattice" / "claims").iterdir()
    )


def test_release_of_someone_elses_claim_needs_force(project: Path) -> None:
    root = str(project)
    run("claim", TASK_A, "--root", root, "--as", "alice")
    refused = run_json("claim", TASK_A, "--release", "--root", root, "--as", "bob", code=1)
    assert refused["error"]["code"] == "CLAIMED_BY_OTHER"
    released = run_json("claim", TASK_A, "--release", "--force", "--root", root, "--as", "bob")
    assert released["released"]["claimed_by"] == "alice"
    assert ready_ids(project, "bob") == [TASK_A, TASK_C]


def test_close_keeps_every_other_byte_of_the_file(project: Path) -> None:
    head = task("LTASKF", 3, "owner-team: storage  # who to ask\nreviewers: [ann, bo]")
    body = "Line one\r\n\r\n```\n---\nnot: front matter\n```\n"
    path = write(project, "api/tasks/f_LTASKF.md", head, body)
    before = path.read_bytes().decode()
    reason = 'fixed: it\'s "done" # really\nsecond line'
    run("close", "LTASKF", "--root", str(project), "--reason", reason)
    after = path.read_bytes().decode()
    header_end = before.index("\n---\n") + 1
    assert after.startswith(before[:header_end])  # old front matter, comment and all
    assert after.endswith(before[header_end:])  # closing line and body exactly as they were
    doc = parse(path.name, after)
    assert doc is not None
    assert doc.body == body
    assert doc.front_matter["owner-team"] == "storage"
    assert doc.front_matter["closed-reason"] == reason
    assert not [p.name for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp left


# -- show --------------------------------------------------------------------------------------


def test_show_gives_dependencies_both_ways_parent_and_links(project: Path) -> None:
    root = str(project)
    blocked = run_json("show", TASK_B, "--root", root)
    assert blocked["state"] == "blocked"
    assert [(d["lattice_id"], d["state"]) for d in blocked["dependencies"]] == [(TASK_A, "open")]
    assert blocked["parent"]["lattice_id"] == ROOT_ID
    assert blocked["front_matter"]["blocked-by"] == [TASK_A]
    assert blocked["body"] == "body\n"
    blocker = run_json("show", TASK_A, "--root", root)
    assert [d["lattice_id"] for d in blocker["dependents"]] == [TASK_B]
    assert [d["lattice_id"] for d in blocker["linked_from"]] == [DESIGN_ID]
    design = run_json("show", DESIGN_ID, "--root", root)
    assert [d["lattice_id"] for d in design["links"]] == [TASK_A]  # the root is the parent
    text = run("show", TASK_B, "--root", root)
    assert f"Depends on (1):\n  {TASK_A}: task-ltaska - Task {TASK_A} [P1]" in text
    assert f"Parent:\n  {ROOT_ID}: api - The API [doc]" in text
    missing = run_json("show", "LNOPEZ", "--root", root, code=1)
    assert missing["error"]["code"] == "NOT_FOUND"


def test_the_project_root_is_found_above_the_current_directory(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project / "api" / "tasks")
    assert [t["lattice_id"] for t in run_json("ready")["tasks"]] == [TASK_A, TASK_C]


def test_terminal_output_escapes_control_characters(project: Path) -> None:
    write(project, "api/docs/evil.md", 'lattice-id: LEVILD\nname: evil\ndescription: "x\\e]52;"')
    assert "\x1b" not in run("show", "LEVILD", "--root", str(project))


# -- check -------------------------------------------------------------------------------------


def test_check_passes_a_clean_project(project: Path) -> None:
    assert run_json("check", "--root", str(project)) == {"ok": True, "count": 0, "problems": []}
    assert "no problems" in run("check", "--root", str(project))


def test_check_reports_every_problem_with_its_code(project: Path) -> None:
    write(project, "api/tasks/x_LCYCLX.md", task("LCYCLX", 2, "blocked-by: [LCYCLY]"))
    write(project, "api/tasks/y_LCYCLY.md", task("LCYCLY", 2, "blocked-by: [LCYCLX]"))
    write(project, "orphan/tasks/o_LORPHN.md", task("LORPHN", 2))
    write(project, "api/docs/dup.md", f"lattice-id: {DESIGN_ID}\nname: dup\ndescription: D")
    write(project, "api/docs/broken.md", "lattice-id: LBROKN\nname: broken\nx: &a [1]\ny: *a")
    write(project, "api/tasks/p_LPRIOR.md", task("LPRIOR", 9))
    write(
        project,
        "api/tasks/t_LTYPEE.md",
        task("LTYPEE", 2).replace("task-type: task", "task-type: epic"),
    )
    write(project, "api/docs/nodesc.md", "lattice-id: LNODSC\nname: nodesc")
    write(project, "api/tasks/g_LGHOST.md", task("LGHOST", 2, "discovered-from: [LNOWHR]"))
    write(
        project,
        "api/docs/links.md",
        "lattice-id: LLINKS\nname: links\ndescription: L",
        "fine [a](LTASKA)\n\n[gone](LNOWHR) and [file](missing.md)\n`[code](LZZZZZ)`\n",
    )
    result = run_json("check", "--root", str(project), code=1)
    found = {(p["code"], p["path"], p["field"], p["line"]) for p in result["problems"]}
    assert found == {
        ("DEPENDENCY_CYCLE", "api/tasks/x_LCYCLX.md", "blocked-by", None),
        ("MISSING_ROOT", "orphan/tasks/o_LORPHN.md", "parent-id", None),
        ("DUPLICATE_ID", "api/docs/dup.md", "lattice-id", None),
        ("INVALID_DOCUMENT", "api/docs/broken.md", "y", None),
        ("INVALID_PRIORITY", "api/tasks/p_LPRIOR.md", "priority", None),
        ("INVALID_TASK_TYPE", "api/tasks/t_LTYPEE.md", "task-type", None),
        ("MISSING_FIELD", "api/docs/nodesc.md", "description", None),
        ("BROKEN_LINK", "api/tasks/g_LGHOST.md", "discovered-from", None),
        # The body starts on line 7 of the file: "---", 3 fields, "---", a blank line.
        ("BROKEN_LINK", "api/docs/links.md", None, 9),  # twice: LNOWHR and missing.md
    }
    assert result["count"] == len(result["problems"]) == 10
    cycle = next(p for p in result["problems"] if p["code"] == "DEPENDENCY_CYCLE")
    assert cycle["message"].endswith("LCYCLX -> LCYCLY -> LCYCLX")
    text = run("check", "--root", str(project), code=1)
    assert "api/docs/links.md:9: [BROKEN_LINK] link to LNOWHR, which no document has" in text


def test_check_finds_every_cycle_and_survives_long_chains(project: Path) -> None:
    ids = [f"LCH{i // 26:01d}{chr(65 + i % 26)}" for i in range(3)]
    for i, lattice_id in enumerate(ids):  # a three-cycle
        write(
            project,
            f"api/tasks/c_{lattice_id}.md",
            task(lattice_id, 2, f"blocked-by: [{ids[i - 1]}]"),
        )
    write(project, "api/tasks/s_LSELFF.md", task("LSELFF", 2, "blocked-by: [LSELFF]"))
    chain = [f"L{i:05d}" for i in range(1500)]  # deeper than Python's recursion limit
    for i, lattice_id in enumerate(chain[1:], 1):
        write(
            project,
            f"api/tasks/n_{lattice_id}.md",
            task(lattice_id, 2, f"blocked-by: [{chain[i - 1]}]"),
        )
    write(project, f"api/tasks/n_{chain[0]}.md", task(chain[0], 2))
    result = run_json("check", "--root", str(project), code=1)
    cycles = [p["message"] for p in result["problems"] if p["code"] == "DEPENDENCY_CYCLE"]
    assert cycles == [
        f"tasks block each other in a cycle: {' -> '.join([*sorted(ids), sorted(ids)[0]])}",
        "tasks block each other in a cycle: LSELFF -> LSELFF",
    ]
    assert result["count"] == 2


# -- fmt -----------------------------------------------------------------------------------------


def test_fmt_normalises_links_idempotently_and_check_mode_writes_nothing(project: Path) -> None:
    body = (
        f"Short [a]({TASK_A}), path [root](../api.md), stale [b](old/place.md#{TASK_B}).\n"
        "Web [w](https://example.invalid/x) section [s](../api.md#usage) img ![i](LTASKA)\n"
        f"```\n[in code]({TASK_A})\n```\nand `[span]({TASK_A})` [gone](LNOWHR)\n"
    )
    path = write(
        project, "api/docs/guide.md", "lattice-id: LGUIDE\nname: guide\ndescription: G", body
    )
    before = path.read_bytes()
    checked = run_json("fmt", "--check", "--root", str(project), code=1)
    assert {c["path"]: c["links"] for c in checked["changed"]} == {
        "api/docs/guide.md": 3,
        "api/docs/design.md": 2,
    }
    assert path.read_bytes() == before
    assert run_json("fmt", "--root", str(project))["clean"] is False
    text = path.read_text()
    assert text.startswith("---\nlattice-id: LGUIDE\nname: guide\ndescription: G\n---\n\n")
    assert (
        f"Short [a](../tasks/a_{TASK_A}.md#{TASK_A}), path [root](../api.md#{ROOT_ID}), "
        f"stale [b](../tasks/b_{TASK_B}.md#{TASK_B})." in text
    )
    # Untouched: external, other fragments, images, code, unknown IDs.
    assert text.endswith(body[body.index("\nWeb") :])
    once = {p: p.read_bytes() for p in project.rglob("*.md")}
    assert run_json("fmt", "--root", str(project))["clean"] is True
    assert {p: p.read_bytes() for p in project.rglob("*.md")} == once
    run("fmt", "--check", "--root", str(project))
    assert run_json("check", "--root", str(project), code=1)["count"] == 1  # LNOWHR stays


def test_fmt_follows_a_moved_document(project: Path) -> None:
    run("fmt", "--root", str(project))
    (project / "api" / "tasks" / f"a_{TASK_A}.md").rename(project / "api" / f"moved_{TASK_A}.md")
    run("fmt", "--root", str(project))
    assert (
        f"[task A](../moved_{TASK_A}.md#{TASK_A})" in (project / "api/docs/design.md").read_text()
    )


# -- skills --------------------------------------------------------------------------------------


def skill(name: str, description: str = "Reviews code", lattice_id: str = "LSKILL") -> str:
    return (
        f"lattice-id: {lattice_id}\nname: {json.dumps(name)}\n"
        f"description: {json.dumps(description)}\nskill: true"
    )


def test_skill_links_are_created_repointed_and_removed(project: Path) -> None:
    doc = write(project, "api/docs/review_helper.md", skill("review-helper"))
    links = project / ".claude" / "skills"
    links.mkdir(parents=True)
    (links / "mine.md").write_text("a user's own skill file")
    os.symlink("/etc/hostname", links / "outside.md")
    assert run_json("check", "--root", str(project), code=1)["problems"][0]["code"] == (
        "SKILL_OUT_OF_SYNC"
    )
    synced = run_json("skills", "sync", "--root", str(project))
    assert synced["created"] == ["review-helper.md"]
    link = links / "review-helper.md"
    assert os.readlink(link) == "../../api/docs/review_helper.md"  # relative: the checkout can move
    assert link.resolve() == doc.resolve()
    run("check", "--root", str(project))
    run("skills", "sync", "--check", "--root", str(project))
    # Moved: the link follows.
    moved = project / "api" / "review_helper.md"
    doc.rename(moved)
    assert run_json("skills", "sync", "--check", "--root", str(project), code=1)["updated"] == [
        "review-helper.md"
    ]
    assert run_json("fmt", "--root", str(project))["skills"]["updated"] == ["review-helper.md"]
    assert link.resolve() == moved.resolve()
    # No longer a skill: the link goes; the user's file and outside link stay.
    moved.write_text(moved.read_text().replace("skill: true", "skill: false"))
    assert run_json("skills", "sync", "--root", str(project))["removed"] == ["review-helper.md"]
    assert not link.is_symlink()
    assert sorted(p.name for p in links.iterdir()) == ["mine.md", "outside.md"]


@pytest.mark.parametrize(
    ("name", "description", "code"),
    [
        ("claude-helper", "d", "INVALID_SKILL_NAME"),
        ("my-Anthropic-tool", "d", "INVALID_SKILL_NAME"),
        ("<b>bold</b>", "d", "INVALID_SKILL_NAME"),
        ("Upper_Case", "d", "INVALID_SKILL_NAME"),
        ("x" * 65, "d", "NAME_TOO_LONG"),
        ("fine", "", "MISSING_FIELD"),
        ("fine", "d" * 1025, "DESCRIPTION_TOO_LONG"),
    ],
)
def test_invalid_skills_get_no_link_and_are_reported(
    project: Path, name: str, description: str, code: str
) -> None:
    write(project, "api/docs/skill.md", skill(name, description))
    write(project, "api/docs/ok.md", skill("good-skill", lattice_id="LGOODS"))
    synced = run_json("skills", "sync", "--root", str(project), code=1)
    assert synced["created"] == ["good-skill.md"]
    assert [(p["code"], p["path"]) for p in synced["invalid"]] == [(code, "api/docs/skill.md")]
    assert sorted(p.name for p in (project / ".claude" / "skills").iterdir()) == ["good-skill.md"]
    problems = run_json("check", "--root", str(project), code=1)["problems"]
    assert code in {p["code"] for p in problems if p["path"] == "api/docs/skill.md"}


def test_a_skills_directory_leading_outside_is_never_written(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (project / ".claude").symlink_to(outside)
    write(project, "api/docs/s.md", skill("helper"))
    synced = run_json("skills", "sync", "--root", str(project), code=1)
    assert [p["code"] for p in synced["invalid"]] == ["SKILL_CONFLICT"]
    assert list(outside.iterdir()) == []
