"""What a sprite does with the workspace bundle, done locally: clone it, commit on a branch,
bundle the branch back (only `git`, never a remote with a credential)."""

from __future__ import annotations

from pathlib import Path

from tests.support.github.git_http import git


def sprite_work(
    tmp: Path,
    base_bundle: bytes,
    base_branch: str,
    branch: str,
    files: dict[str, str],
    *,
    base_sha: str,
    extra_refs: tuple[str, ...] = (),
    rewrite: bool = False,
) -> bytes:
    """Clone `base_bundle`, commit `files` on `branch`, return `git bundle` of it (from
    `base_sha`). `rewrite` makes the branch's history not descend from the base."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "base.bundle").write_bytes(base_bundle)
    work = tmp / "repo"
    git("clone", "--quiet", "--branch", base_branch, str(tmp / "base.bundle"), str(work))
    if rewrite:
        git("checkout", "--quiet", "--orphan", branch, cwd=work)
    else:
        git("checkout", "--quiet", "-b", branch, cwd=work)
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    git("add", "-A", cwd=work)
    git("commit", "--quiet", "-m", f"work on {branch}", cwd=work)
    for ref in extra_refs:
        git("branch", "--force", ref, "HEAD", cwd=work)
    out = tmp / "out.bundle"
    refs = [f"refs/heads/{branch}", *[f"refs/heads/{r}" for r in extra_refs]]
    exclude = [] if rewrite else [f"^{base_sha}"]
    git("bundle", "create", "--quiet", str(out), *refs, *exclude, cwd=work)
    return out.read_bytes()
