"""The rules a sprite's branch must pass before the operator pushes it."""

from __future__ import annotations

import pytest

from lattice_operator.forge.bundles import check_bundle
from lattice_operator.ports.forge import BundleFacts

BASE = "a" * 40
HEAD = "b" * 40
REF = "refs/heads/lattice/fix"


def facts(**override: object) -> BundleFacts:
    values: dict[str, object] = {
        "size": 1000,
        "refs": {REF: HEAD},
        "prerequisites": (BASE,),
        "verified": True,
        "descends": {REF: True},
        "commits": {REF: 2},
    }
    values.update(override)
    return BundleFacts.model_validate(values)


def verdict(f: BundleFacts, branch: str = "lattice/fix", **kw: object):  # type: ignore[no-untyped-def]
    return check_bundle(f, branch=branch, base_branch="main", base_sha=BASE, **kw)  # type: ignore[arg-type]


def test_a_good_branch_is_pushed_at_its_commit() -> None:
    result = verdict(facts())
    assert result.ok
    assert result.sha == HEAD


@pytest.mark.parametrize(
    ("bundle", "branch", "rule"),
    [
        (facts(), "main", "base_rewrite"),
        (facts(size=17 * 1024 * 1024), "lattice/fix", "too_large"),
        (facts(verified=False, problem="missing prerequisite"), "lattice/fix", "unreadable"),
        (facts(refs={REF: HEAD, "refs/heads/main": HEAD}), "lattice/fix", "other_refs"),
        (facts(refs={"refs/heads/other": HEAD}), "lattice/fix", "other_refs"),
        (facts(refs={}), "lattice/fix", "branch_missing"),
        (facts(descends={REF: False}), "lattice/fix", "not_based_on_expected"),
        (facts(commits={REF: 0}), "lattice/fix", "no_changes"),
        (facts(commits={REF: 201}), "lattice/fix", "too_many_commits"),
    ],
)
def test_a_branch_breaking_a_rule_is_refused_by_name(
    bundle: BundleFacts, branch: str, rule: str
) -> None:
    result = verdict(bundle, branch)
    assert result.rule == rule
    assert result.sha is None
    assert result.reason


def test_protected_branches_are_never_pushed() -> None:
    assert verdict(facts(), protected=("lattice/fix",)).rule == "base_rewrite"
