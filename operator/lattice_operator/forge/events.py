"""The parts of a GitHub webhook delivery that are read, as models (pure).

A delivery is parsed once, from the signed bytes, into `Delivery`; a part of the wrong type
(`issue` a string, `number: "abc"`, `1e400`, JSON nested deeper than pydantic's parser takes)
is a `BadDelivery` naming the field, which the receiver answers with 400 — never an
exception deeper in. Everything not read is ignored, whatever its type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lattice_operator.errors import LatticeError

Id = Annotated[int, Field(ge=0, le=2**63 - 1)]
"""GitHub's ids (comments, reviews, labels, accounts) are 64-bit."""
Number = Annotated[int, Field(ge=0, le=2**31 - 1)]
"""An issue's or a pull request's number (an int32 in the Intents' schema)."""


class BadDelivery(LatticeError):
    """A signed delivery whose payload is not what GitHub sends: `field` names the part."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Account(_Part):
    login: str = ""
    type: str = ""
    id: Id | None = None

    @property
    def bot(self) -> bool:
        return self.type == "Bot" or self.login.endswith("[bot]")


class RepositoryRef(_Part):
    full_name: str = ""


class Label(_Part):
    name: str = ""
    id: Id | None = None


class Issue(_Part):
    number: Number = 0
    id: Id | None = None
    title: str | None = None
    body: str | None = None
    labels: list[Label] = Field(default_factory=list)
    user: Account | None = None
    pull_request: dict[str, Any] | None = None
    updated_at: str | None = None

    @property
    def of_pull_request(self) -> bool:
        """GitHub's issue object of a pull request carries the key (an issue never does)."""
        return "pull_request" in self.model_fields_set


class Comment(_Part):
    id: Id = 0
    body: str | None = None
    html_url: str = ""
    path: str | None = None
    line: int | None = None
    pull_request_review_id: Id | None = None


class Review(_Part):
    id: Id = 0
    state: str = ""
    body: str | None = None


class PullRequest(_Part):
    number: Number = 0
    title: str | None = None


class PushCommit(_Part):
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)


class Delivery(_Part):
    """What the receiver reads of a delivery; the event comes from its header."""

    action: str = ""
    repository: RepositoryRef | None = None
    sender: Account | None = None
    issue: Issue | None = None
    label: Label | None = None
    comment: Comment | None = None
    review: Review | None = None
    pull_request: PullRequest | None = None
    ref: str = ""
    """push: the ref pushed (`refs/heads/<branch>`)."""
    after: str = ""
    """push: the commit the ref points at now."""
    deleted: bool = False
    commits: list[PushCommit] = Field(default_factory=list)
    """push: the commits pushed (GitHub lists at most 2048), with the paths they changed."""

    @property
    def login(self) -> str:
        return self.sender.login if self.sender else ""

    @property
    def by_bot(self) -> bool:
        return self.sender.bot if self.sender else False


def parse_delivery(body: bytes | Mapping[str, Any]) -> Delivery:
    """The delivery's body (JSON bytes, or already decoded) as a `Delivery`."""
    try:
        if isinstance(body, bytes):
            return Delivery.model_validate_json(body)
        return Delivery.model_validate(dict(body))
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False, include_context=False)[0]
        where = ".".join(str(part) for part in error["loc"]) or "the body"
        raise BadDelivery(where, error["msg"][:300]) from None


__all__ = [
    "Account",
    "BadDelivery",
    "Comment",
    "Delivery",
    "Issue",
    "Label",
    "PullRequest",
    "PushCommit",
    "RepositoryRef",
    "Review",
    "parse_delivery",
]
