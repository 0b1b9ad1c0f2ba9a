"""Operator settings: a tree of small typed models, loaded once at start-up."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicySpec
from lattice_operator.api.v1alpha1.sprite import NetworkPolicy, forge_deny_policy
from lattice_operator.leadership import ElectionTimings


class _Settings(BaseModel):
    # No use_attribute_docstrings: no schema is made of these, and reading the docstrings
    # when the class is defined is start-up CPU (see modeling.ApiModel).
    model_config = ConfigDict(extra="forbid", frozen=True)


class LeaderElectionSettings(_Settings):
    """How several operator replicas agree that exactly one reconciles: a coordination.k8s.io
    Lease, as controller-runtime does it (docs/controllers.md, "One active replica")."""

    enabled: bool = True
    """Elect a leader; off (`lattice run --standalone`) the process reconciles at once, alone."""
    lease_name: str = Field(default="lattice-operator", min_length=1, max_length=253)
    """Name of the Lease the replicas share."""
    lease_namespace: str | None = None
    """Namespace of the Lease (default: $POD_NAMESPACE, else the service account's
    namespace when in a Pod, else `default`)."""
    identity: str | None = None
    """This replica's holderIdentity (default: $POD_NAME, else host name and a random suffix)."""
    lease_duration: float = Field(default=15.0, gt=0)
    """Seconds a standby waits, after the Lease last changed, before it takes over."""
    renew_deadline: float = Field(default=10.0, gt=0)
    """Seconds the leader keeps failing to renew before it stops (and exits)."""
    retry_period: float = Field(default=2.0, gt=0)
    """Seconds between attempts to acquire or renew the Lease."""
    pod_label: str | None = Field(default=None, min_length=1, max_length=317)
    """Label the leader puts on its own Pod (value `true`, the Pod named by $POD_NAME in
    $POD_NAMESPACE) and takes off when it steps down, so a Service selecting it reaches the
    one replica that serves the stream and the GitHub webhooks (the Helm chart sets
    `lattice.dev/leader`). None: no Pod is labelled."""
    pod_selector: str = ""
    """Label selector of this installation's Pods: a new leader takes the label off any
    other of them that still carries it (a dead leader's Pod may linger)."""

    @model_validator(mode="after")
    def _timings_ordered(self) -> LeaderElectionSettings:
        self.timings()
        return self

    def timings(self) -> ElectionTimings:
        return ElectionTimings(
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )


class ProbeSettings(_Settings):
    """The liveness endpoint kopf serves."""

    host: str = "127.0.0.1"
    """Address the liveness endpoint binds to."""
    port: int = Field(default=8080, ge=0, le=65535)
    """Port of the liveness endpoint; 0 disables it."""


class WatchSettings(_Settings):
    """Watch-stream behaviour."""

    inactivity_timeout: float = Field(default=70.0, gt=0)
    """Reconnect a watch that has been silent this long (seconds); bookmarks arrive every 60 s."""


class BackendSettings(_Settings):
    """The default Sprites backend."""

    api_url: str | None = None
    """Base URL of the Sprites API (or the local server); default: $SPRITES_API_URL, else Fly.io."""
    token_secret: str | None = None
    """`namespace/name` of a Secret holding the token (key `token`); default: $SPRITES_TOKEN."""
    observe_interval: float = Field(default=30.0, gt=0)
    """Seconds between fleet observations (one paged LIST per interval)."""
    request_timeout: float = Field(default=30.0, gt=0, le=300)
    """Seconds to wait for an answer of the Sprites API (an exec's WebSocket handshake and
    its first frame included; creates, services and streams wait longer). An exec whose
    answer does not come in time is looked for before its attempt counts as failed."""
    page_size: int = Field(default=100, ge=1, le=500)
    """Sprites per LIST page."""
    last_seen_interval: float = Field(default=300.0, gt=0)
    """A Sprite's `status.lastSeenTime` is refreshed at most this often (each refresh is a
    status write: 1,000 Sprites at 300 s cost about 3 writes a second)."""
    resync_per_pass: int = Field(default=10, ge=0)
    """Sprites re-read in full per fleet pass, in turn (network policy, services, URL
    settings), to repair changes made behind the operator's back; each costs a GET of the
    sprite, its policy and its services, plus the writes a repair needs. 0 turns it off."""
    keep_warm_interval: float = Field(default=240.0, gt=0)
    """A Sprite with spec.keepWarm is woken by a light request (a list of its exec sessions)
    when the operator has not seen it running, nor woken it, for this many seconds: keep it
    shorter than the backend's idle time before cold. Each wake costs one request and the
    backend's idle window of running compute (about 30 s at Fly.io). Checked at each fleet
    pass, so at most one wake per Sprite per pass."""


class SpriteTimings(_Settings):
    """How hard the Sprite controller tries before it stops and explains."""

    delete_attempts: int = Field(default=5, ge=1)
    """Backend delete attempts before the Sprite reports DeletionBlocked."""
    delete_backoff: float = Field(default=2.0, gt=0)
    """Seconds before the first retry; doubles per attempt."""
    blocked_recheck: float = Field(default=60.0, gt=0)
    """After DeletionBlocked, seconds between further checks (or until deletionPolicy changes)."""
    default_network_policy: NetworkPolicy | None = Field(default_factory=forge_deny_policy)
    """The egress policy of a Sprite whose spec sets none: by default everything but the
    forges (GitHub, GitLab, Bitbucket). null leaves such sprites as the backend has them."""


class RunTimings(_Settings):
    """Cadences of the Run daemons."""

    outbox_interval: float = Field(default=0.5, gt=0)
    """Seconds between outbox reads while a session runs (sooner when stdout shows events)."""
    patch_interval: float = Field(default=1.0, gt=0)
    """At most one status patch per Run per this many seconds (phase changes go at once)."""
    sprite_wait: float = Field(default=1.0, gt=0)
    """Seconds before a Run waiting for its Sprite (Ready, free of other Runs) looks again,
    doubling at each further look up to `sprite_wait_max`: only a safety poll, since a change
    of the Sprite, the end of the Run before it or a change of its own spec wakes it at once."""
    sprite_wait_max: float = Field(default=30.0, gt=0)
    """The longest a waiting Run goes without looking again by itself."""
    reattach_deadline: float = Field(default=60.0, gt=0)
    """How long to keep trying to re-attach a lost session before giving up on it."""
    events_per_second: float = Field(default=5.0, gt=0)
    """Receipt Events refilled per Run per second."""
    events_burst: int = Field(default=100, ge=1)
    """Receipt Events a Run may post in a burst."""
    receipts_per_event: int = Field(default=1, ge=1, le=64)
    """Receipts one Event may carry: the receipts of one status write share Events up to this
    many (a session's start and end: two Events instead of four). 1, an Event per receipt, is
    the only form release 0.1.0 reads: keep it while a rollback to 0.1.0 may happen (see
    docs/install.md, "Rolling back")."""
    waiting_exit_grace: float = Field(default=30.0, gt=0)
    """Seconds a session may keep running after its WAITING before the operator stops it
    (the protocol: once you emit WAITING, stop)."""
    idle_poll: float = Field(default=1.0, gt=0)
    """Seconds between looks at a waiting Run's spec (resume, cancel) and at an idle session."""
    start_retry_wait: float = Field(default=1.0, gt=0)
    """Seconds before another attempt after a start that failed retryably (the adapter has
    already waited out what Retry-After it could within its own deadline)."""
    starting_write_after: float = Field(default=0.25, ge=0)
    """Seconds an exec may take to be confirmed before the attempt and `Starting` are written
    on their own (a cold sprite, say); an exec confirmed sooner costs the Run one status write
    for both, `Running` (0: always write `Starting` beside the exec)."""
    history_limit: int = Field(default=50, ge=0)
    """Finished Runs kept per Sprite (newest first; 0 keeps all). Runs an Intent created are
    not counted: they go with their Intent."""
    retention_interval: float = Field(default=10.0, gt=0)
    """Seconds between passes that delete finished Runs past their TTL or the history limit."""


class WebhookCertificateSettings(_Settings):
    """The webhook serving certificate kept in a Secret: made and rotated by the operator
    (the default in the Helm chart), or by another tool (cert-manager) and only read here."""

    secret: str | None = None
    """`namespace/name` of the Secret (`tls.crt`, `tls.key`, `ca.crt`; `ca.key` when the
    operator manages it). None: `cert_file`/`key_file`, else a throwaway CA per process."""
    manage: bool = True
    """The operator creates the Secret, keeps `caBundle` current in the webhook configurations
    and rotates CA and certificate before they expire. False: another tool does (cert-manager),
    and the operator only reloads the certificate when the Secret changes."""
    validity: float = Field(default=365 * 86400.0, gt=0)
    """Seconds a new CA and its serving certificate are valid."""
    rotate_before: float = Field(default=30 * 86400.0, gt=0)
    """A rotation starts when the serving certificate has less than this many seconds left."""
    propagation: float = Field(default=10.0, gt=0)
    """Seconds allowed for a changed `caBundle` to reach the API servers before the serving
    certificate switches to the new CA (and again before the old CA is dropped)."""
    reload_interval: float = Field(default=10.0, gt=0)
    """Seconds between each replica's reads of the Secret (a changed certificate is loaded
    into the running server, without a restart)."""

    @model_validator(mode="after")
    def _rotation_fits(self) -> WebhookCertificateSettings:
        if self.rotate_before >= self.validity:
            raise ValueError("rotate_before must be shorter than validity")
        needed = 2 * self.propagation + self.reload_interval
        if self.rotate_before <= needed:
            raise ValueError(
                f"rotate_before must exceed 2 x propagation + reload_interval ({needed:g} s): "
                "a rotation must finish before the certificate expires"
            )
        if self.secret is not None and self.secret.count("/") != 1:
            raise ValueError("secret must be `namespace/name`")
        return self


class WebhookSettings(_Settings):
    """The admission webhooks the operator serves (approvals, IntentPolicy checks)."""

    host: str = "127.0.0.1"
    """Address the webhook server binds to."""
    port: int = Field(default=9443, ge=0, le=65535)
    """Port of the webhook server; 0 picks a free one."""
    url_host: str | None = None
    """Host name the API server uses to reach it (default: `host`)."""
    cert_file: str | None = None
    """Serving certificate (PEM); without one a self-signed CA and certificate are made."""
    key_file: str | None = None
    """Its private key (PEM)."""
    ca_file: str | None = None
    """The CA bundle the API server verifies the certificate with."""
    managed: str | None = "lattice.dev"
    """Name of the Validating/MutatingWebhookConfiguration the operator keeps up to date
    (None: the installation provides them, e.g. the Helm chart)."""
    configuration: str | None = None
    """Name of the webhook configurations whose `caBundle` the operator keeps current when
    it manages the certificate (default: `managed`)."""
    certificate: WebhookCertificateSettings = WebhookCertificateSettings()
    """The serving certificate kept in a Secret."""
    client_ca_file: str | None = None
    """CA bundle (PEM) of the client certificate every caller must present: the one the API
    server presents to webhooks when its AdmissionConfiguration gives it a `kubeConfigFile`
    with one. None (the default: most managed clusters cannot be told to send one): no
    certificate is asked for, and only the network (the chart's NetworkPolicy) limits who
    reaches the port."""
    client_names: tuple[str, ...] = ()
    """With `client_ca_file`: the certificate's subject common name or a DNS name in it must
    be one of these (needed when the CA also signs other clients). Empty: any certificate
    the CA signed."""
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=64 * 1024, le=16 * 1024 * 1024)
    """A larger admission request is refused (413) before it is read. The default holds an
    UPDATE's review of the largest object etcd stores by default (1.5 MiB), which carries
    it twice (object and oldObject): any Intent the API server stores can be approved."""
    request_timeout: float = Field(default=10.0, gt=0, le=30)
    """Seconds one request may take, reading included; then it is answered 503 (the API
    server waits `timeoutSeconds`, 10, for an answer)."""

    @model_validator(mode="after")
    def _names_need_a_ca(self) -> WebhookSettings:
        if self.client_names and not self.client_ca_file:
            raise ValueError("client_names needs client_ca_file")
        return self


class ConnectionLimits(_Settings):
    """Bounds of an HTTP door the operator serves itself (the stream, /metrics)."""

    header_timeout: float = Field(default=10.0, gt=0, le=300)
    """Seconds a new connection has to send its first request's headers; then it is closed."""
    idle_timeout: float = Field(default=30.0, gt=0, le=3600)
    """Seconds a connection may wait for its next request (or that request's headers) after
    a response; then it is closed. A stream being written to is never idle."""
    max_connections: int = Field(default=1000, ge=1, le=100_000)
    """Connections open at once; one more is answered 503 and closed."""


class StreamSettings(_Settings):
    """The real-time stream (Server-Sent Events) and the live page."""

    host: str = "127.0.0.1"
    """Address the stream server binds to."""
    port: int = Field(default=0, ge=0, le=65535)
    """Port of the stream server (/events, the live page at /); 0 (the default) disables it
    (the Helm chart turns it on; `lattice dev` too)."""
    buffer: int = Field(default=10_000, ge=1, le=1_000_000)
    """Events kept for subscribers that resume with Last-Event-ID."""
    subscriber_queue: int = Field(default=1_000, ge=1, le=100_000)
    """Events waiting for one subscriber before it is cut off as not reading."""
    access_ttl: float = Field(default=10.0, gt=0, le=3600)
    """Seconds a TokenReview or SubjectAccessReview answer is reused."""
    keepalive: float = Field(default=15.0, gt=0)
    """Seconds between keep-alive comments on an idle stream."""
    write_timeout: float = Field(default=10.0, gt=0)
    """A subscriber whose socket takes longer than this to accept a write is cut off."""
    connections: ConnectionLimits = ConnectionLimits()
    """Header and idle timeouts, and open connections at most (each subscriber holds one)."""
    refused_token_ttl: float = Field(default=5.0, gt=0, le=3600)
    """Seconds a token the API server refused is answered 401 without asking it again."""
    token_reviews_per_minute: float = Field(default=30.0, gt=0, le=60_000)
    """TokenReviews one client address may cause (tokens not in the cache); more: 429."""
    token_reviews_burst: int = Field(default=10, ge=1, le=10_000)
    """TokenReviews one client address may cause at once before the rate applies."""


class ForgeSettings(_Settings):
    """GitHub: the operator's own credential (sprites never get one) and its webhook server."""

    api_url: str = "https://api.github.com"
    """GitHub's REST API (GitHub Enterprise Server: https://HOST/api/v3)."""
    git_url: str = "https://github.com/{repo}.git"
    """Where the operator fetches and pushes `{repo}` (owner/name)."""
    token_secret: str | None = None
    """`namespace/name` of a Secret whose key `token` holds a fine-grained token."""
    app_id: str | None = None
    """A GitHub App's id (instead of a token): the operator makes installation tokens."""
    installation_id: int | None = Field(default=None, ge=1)
    """The App's installation on the repositories' owner."""
    app_key_secret: str | None = None
    """`namespace/name` of a Secret whose key `private-key` holds the App's key (PEM)."""
    token_refresh_margin: float = Field(default=300.0, ge=0, le=3000)
    """An installation token is replaced this many seconds before it expires."""
    workdir: str | None = None
    """Where the operator keeps its git mirrors (default: a directory of its own in TMPDIR)."""
    webhook_host: str = "127.0.0.1"
    """Address the GitHub webhook server binds to."""
    webhook_port: int = Field(default=0, ge=0, le=65535)
    """Port of the webhook server (POST /github/<namespace>/<name>); 0 disables it."""
    max_payload_bytes: int = Field(default=5 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    """A larger delivery is refused with 413 (at most this + 1 bytes of it read)."""
    webhook_idle_timeout: float = Field(default=15.0, gt=0, le=3600)
    """A connection to the webhook server that has not sent a whole request line and headers
    this many seconds after it opened or after its previous answer (a half-sent request, an
    idle keep-alive) is closed."""
    webhook_body_timeout: float = Field(default=15.0, gt=0, le=600)
    """Seconds a delivery's body may take once its headers are in: then 408."""
    webhook_max_connections: int = Field(default=128, ge=1, le=10_000)
    """Connections the webhook server holds at once; one more is answered 503 and closed."""
    max_bundle_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, le=16 * 1024 * 1024)
    """A sprite's bundle larger than this is refused (the Sprites file API's limit too)."""
    max_commits: int = Field(default=200, ge=1, le=10_000)
    """A sprite's branch with more new commits than this is refused."""
    protected_branches: tuple[str, ...] = ("main", "master")
    """Branches a sprite's work is never pushed to (besides each workspace's base)."""

    @property
    def configured(self) -> bool:
        return bool(self.token_secret or (self.app_id and self.app_key_secret))


class FlySettings(_Settings):
    """Fly (optional): the Machines API for fly_machines Intents, with the operator's own
    token (sprites never get it)."""

    api_url: str = "https://api.machines.dev/v1"
    """Base URL of the Machines API (inside Fly's private network: http://_api.internal:4280/v1)."""
    token_secret: str | None = None
    """`namespace/name` of a Secret whose key `token` holds a Fly API token (`fly tokens
    create deploy`, sent as given when it names its scheme, else as a bearer token). Unset:
    Fly is off, and fly_machines Intents wait with reason NoFlyConfigured."""
    timeout: float = Field(default=30.0, gt=0, le=300)
    """Seconds to wait for an answer (a wait for a machine's state adds its own seconds)."""
    max_attempts: int = Field(default=3, ge=1, le=10)
    """Tries of a request answered 429 or 5xx, or whose connection failed (a create only
    when it provably was not made), with a doubling pause from `backoff`."""
    backoff: float = Field(default=0.5, ge=0, le=30)
    """Seconds before the first retry."""

    @property
    def configured(self) -> bool:
        return bool(self.token_secret)


class OperatorSettings(_Settings):
    """Everything `lattice run` needs to know."""

    namespaces: tuple[str, ...] = ()
    """Namespaces (globs) to serve; empty means the whole cluster."""
    leader_election: LeaderElectionSettings = LeaderElectionSettings()
    """Which replica reconciles (the others stand by, serving admission only)."""
    probe: ProbeSettings = ProbeSettings()
    """Liveness endpoint."""
    watch: WatchSettings = WatchSettings()
    """Watch streams."""
    component: str = "lattice-operator"
    """reportingComponent of the Events the operator posts."""
    finalizer: str = "lattice.dev/finalizer"
    """Finalizer the operator puts on the objects it must clean up after."""
    backend: BackendSettings = BackendSettings()
    """The default Sprites backend."""
    sprites: SpriteTimings = SpriteTimings()
    """Sprite controller retries."""
    runs: RunTimings = RunTimings()
    """Run daemon cadences."""
    default_policy: IntentPolicySpec | None = None
    """Cluster-wide IntentPolicy rules, tried after those of an Intent's namespace."""
    webhook: WebhookSettings = WebhookSettings()
    """Admission webhooks."""
    metrics_host: str = "127.0.0.1"
    """Address of the /metrics endpoint."""
    metrics_port: int = Field(default=9090, ge=0, le=65535)
    """Port of the /metrics endpoint; 0 disables it."""
    metrics_connections: ConnectionLimits = ConnectionLimits(max_connections=32)
    """Header and idle timeouts and open connections at most of the /metrics endpoint."""
    stream: StreamSettings = StreamSettings()
    """The real-time stream and the live page."""
    forge: ForgeSettings = ForgeSettings()
    """GitHub: credential, webhooks, the limits on a sprite's branch."""
    fly: FlySettings = FlySettings()
    """Fly (optional): the Machines API for fly_machines Intents."""


__all__ = [
    "BackendSettings",
    "ConnectionLimits",
    "FlySettings",
    "ForgeSettings",
    "LeaderElectionSettings",
    "OperatorSettings",
    "ProbeSettings",
    "RunTimings",
    "SpriteTimings",
    "StreamSettings",
    "WatchSettings",
    "WebhookCertificateSettings",
    "WebhookSettings",
]
