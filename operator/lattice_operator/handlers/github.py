"""kopf wiring of GitHub: the operator's forge (its own credential, from a Secret), the
GitHubRepository index and status, and the webhook server."""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kopf
from aiohttp import web
from pydantic import ValidationError

from lattice_operator.api.v1alpha1 import set_condition
from lattice_operator.api.v1alpha1.githubrepository import GitHubRepository
from lattice_operator.api.v1alpha1.healthcheck import HealthCheck
from lattice_operator.api.v1alpha1.resources import GITHUB_REPOSITORIES, HEALTH_CHECKS
from lattice_operator.forge.incidents import incident_step
from lattice_operator.handlers._context import OperatorContext, context_of
from lattice_operator.handlers._parsed import model_of
from lattice_operator.handlers._secrets import read_secret
from lattice_operator.handlers.github_webhooks import WebhookReceiver, serve
from lattice_operator.metrics import FORGE_STEPS
from lattice_operator.ports import ForgeAccess
from lattice_operator.ports.errors import AdapterError, CredentialsMissing
from lattice_operator.settings import ForgeSettings

if TYPE_CHECKING:
    from lattice_adapters.github import TokenSource

log = logging.getLogger(__name__)


@kopf.index(*GITHUB_REPOSITORIES.gvp)
async def github_repositories(body: kopf.Body, **_: Any) -> dict[tuple[str, str], GitHubRepository]:
    try:
        repository = model_of(GitHubRepository, body)
    except ValidationError as exc:
        log.warning("GitHubRepository %s is not used: %s", body.metadata.name, exc)
        return {}
    return {(body.metadata.namespace or "", body.metadata.name or ""): repository}


async def _token_source(ctx: OperatorContext, forge: ForgeSettings) -> TokenSource:
    # Imported here: githubkit and httpx cost ~0.1 s of CPU, for operators without a forge too.
    from lattice_adapters.github import AppInstallationTokens, StaticToken

    if forge.app_id and forge.app_key_secret and forge.installation_id:
        return AppInstallationTokens(
            app_id=forge.app_id,
            private_key=await read_secret(ctx, forge.app_key_secret, "private-key"),
            installation_id=forge.installation_id,
            api_url=forge.api_url,
            clock=ctx.clock,
            refresh_margin=forge.token_refresh_margin,
        )
    if forge.token_secret:
        return StaticToken(await read_secret(ctx, forge.token_secret, "token"))
    raise CredentialsMissing("neither forge.token_secret nor forge.app_id is set")


class GitHubWiring:
    def __init__(self) -> None:
        self.runner: web.AppRunner | None = None
        self.workdir: Path | None = None


@kopf.on.startup()
async def start_github(memo: kopf.Memo, **kwargs: Any) -> None:
    ctx = context_of(memo)
    settings = ctx.settings.forge
    wiring = GitHubWiring()
    memo.lattice_github = wiring
    if settings.configured:
        try:
            source = await _token_source(ctx, settings)
        except CredentialsMissing as exc:
            log.error("GitHub is not available: %s", exc)
            ctx.forge_problem = f"GitHub credential: {exc}"
        else:
            from lattice_adapters.github import GitHubForge

            workdir = Path(settings.workdir or tempfile.mkdtemp(prefix="lattice-git-"))
            wiring.workdir = None if settings.workdir else workdir
            forge = GitHubForge(
                source,
                api_url=settings.api_url,
                git_url=settings.git_url,
                workdir=workdir,
                clock=ctx.clock,
            )
            ctx.forge = ForgeAccess(
                forge=forge,
                max_bundle_bytes=settings.max_bundle_bytes,
                max_commits=settings.max_commits,
                protected_branches=settings.protected_branches,
            )
            log.info("GitHub at %s", settings.api_url)
    if not settings.webhook_port:
        return
    index: kopf.Index[tuple[str, str], GitHubRepository] = kwargs["github_repositories"]

    def repository(namespace: str, name: str) -> GitHubRepository | None:
        entries = index.get((namespace, name))
        return next(iter(entries)) if entries else None

    receiver = WebhookReceiver(
        kube=ctx.require_kube(),
        writer=ctx.require_writer(),
        clock=ctx.clock,
        repositories=repository,
        forge=lambda: ctx.forge.forge if ctx.forge else None,
        max_bytes=settings.max_payload_bytes,
        body_timeout=settings.webhook_body_timeout,
    )
    wiring.runner = await serve(receiver, settings)
    log.info(
        "GitHub webhooks on http://%s:%d/github/<namespace>/<name>",
        settings.webhook_host,
        settings.webhook_port,
    )


@kopf.on.cleanup()
async def stop_github(memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    wiring = getattr(memo, "lattice_github", None)
    if isinstance(wiring, GitHubWiring):
        if wiring.runner is not None:
            await wiring.runner.cleanup()
        if wiring.workdir is not None:
            shutil.rmtree(wiring.workdir, ignore_errors=True)
    if ctx.forge is not None:
        try:
            await ctx.forge.forge.aclose()
        except AdapterError as exc:
            log.warning("closing GitHub: %s", exc)


@kopf.on.create(*GITHUB_REPOSITORIES.gvp)
@kopf.on.update(*GITHUB_REPOSITORIES.gvp, field="spec")
@kopf.on.resume(*GITHUB_REPOSITORIES.gvp)
async def repository_status(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    repository = model_of(GitHubRepository, body)
    ref = repository.spec.webhook_secret_ref
    namespace = repository.metadata.namespace or ""
    status, reason, message = "True", "SecretReadable", f"webhook secret {ref.name} is readable"
    try:
        await read_secret(ctx, f"{namespace}/{ref.name}", ref.key)
    except CredentialsMissing as exc:
        status, reason, message = "False", "SecretMissing", str(exc)
    if ctx.forge is None:
        message += f"; {ctx.forge_problem}"
    conditions = set_condition(
        repository.status.conditions,
        type="Ready",
        status="True" if status == "True" else "False",
        reason=reason,
        message=message[:1024],
        observed_generation=repository.metadata.generation,
        now=ctx.clock.now(),
    )
    patch.status["conditions"] = [c.to_wire() for c in conditions]
    patch.status["observedGeneration"] = repository.metadata.generation


@kopf.on.field(*HEALTH_CHECKS.gvp, field="status.incident")
async def incident_issue(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Loop 5: a failing HealthCheck's incident as one GitHub issue."""
    ctx = context_of(memo)
    try:
        check = model_of(HealthCheck, body)
    except ValidationError:
        return
    spec = check.spec.issue
    incident = check.status.incident
    if spec is None or incident is None:
        return
    if ctx.forge is None:
        log.warning("HealthCheck %s: %s", check.metadata.name, ctx.forge_problem)
        return
    step = incident_step(check.metadata.name, check.metadata.uid or "", incident, spec)
    if step.action == "none":
        return
    forge = ctx.forge.forge
    current = incident.issue
    try:
        if step.action == "open":
            issue = await forge.create_issue(
                spec.repo, step.title, step.body, labels=spec.labels, key=step.key
            )
            recorded = {
                "number": issue.number,
                "url": issue.html_url,
                "reportedFailures": step.failures,
                "closed": False,
            }
        else:
            assert current is not None
            await forge.create_comment(spec.repo, current.number, step.body, key=step.key)
            recorded = {"reportedFailures": step.failures}
            if step.action == "close":
                await forge.update_issue(spec.repo, current.number, state="closed")
                recorded["closed"] = True
    except AdapterError as exc:
        FORGE_STEPS.labels(step="incident_issue", outcome=exc.failure_class.value).inc()
        raise kopf.TemporaryError(f"GitHub: {exc}", delay=10) from exc
    FORGE_STEPS.labels(step="incident_issue", outcome="done").inc()
    await ctx.require_writer().patch_status(
        HEALTH_CHECKS.gvp,
        check.metadata.namespace or "",
        check.metadata.name,
        {"incident": {"issue": recorded}},
    )
