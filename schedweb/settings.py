"""schedweb settings, read from the environment (see .env.example for every name).

Local defaults need nothing set: SQLite in the project folder, Redis on 127.0.0.1:6379, and
the bundled demo cluster when no kubeconfig is given.
"""

from pathlib import Path

from .env import database_from_url, env_bool, env_float, env_int, env_list, env_path, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

# DEBUG pages show settings and URL lists: off unless asked for (SCHEDWEB_DEBUG=1; the test
# settings, tests/settings.py, ask for it).
DEBUG = env_bool("SCHEDWEB_DEBUG", False)
# With DEBUG off the key is required: a missing one stops the start, naming the variable.
SECRET_KEY = (
    env_str("SCHEDWEB_SECRET_KEY", "dev-only-insecure-key-change-me")
    if DEBUG
    else env_str("SCHEDWEB_SECRET_KEY")
)
ALLOWED_HOSTS = env_list("SCHEDWEB_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("SCHEDWEB_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "policies",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "policies.security.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "policies.api.errors.BodySizeLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# HTTPS for the pages and the API. SCHEDWEB_HTTPS=1 is the production mode (with DEBUG off): the
# UI is reached over HTTPS, directly or through a TLS-terminating proxy. Cookies are then Secure,
# browsers get HSTS and plain-HTTP requests are redirected; `manage.py check --deploy` is clean
# (tests/web/test_deploy_settings.py). `make run` serves plain HTTP on 127.0.0.1 and leaves it off.
SCHEDWEB_HTTPS = env_bool("SCHEDWEB_HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SCHEDWEB_HTTPS
SECURE_SSL_REDIRECT = SCHEDWEB_HTTPS and env_bool("SCHEDWEB_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = env_int("SCHEDWEB_HSTS_SECONDS", 31_536_000) if SCHEDWEB_HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SCHEDWEB_HSTS_INCLUDE_SUBDOMAINS", True)
# Preloading is a commitment (browsers' built-in list, slow to leave) an operator makes knowingly.
SECURE_HSTS_PRELOAD = env_bool("SCHEDWEB_HSTS_PRELOAD", False)
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
# Hosts that reach the web pods without the TLS proxy: `kubectl port-forward` (127.0.0.1,
# localhost) and the web Service's own names (probes, in-cluster API clients); the Helm chart sets
# them. They are allowed hosts, and production mode does not redirect them to HTTPS
# (schedweb/https_redirect.py takes the redirect over from Django's SecurityMiddleware, which
# cannot tell hosts apart: check --deploy's W008 is then silenced, the redirect being on).
SCHEDWEB_INTERNAL_HOSTS = env_list("SCHEDWEB_INTERNAL_HOSTS", [])
ALLOWED_HOSTS += [host for host in SCHEDWEB_INTERNAL_HOSTS if host not in ALLOWED_HOSTS]
if SECURE_SSL_REDIRECT and SCHEDWEB_INTERNAL_HOSTS:
    SECURE_SSL_REDIRECT = False
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
        "schedweb.https_redirect.HttpsRedirectMiddleware",
    )
    SILENCED_SYSTEM_CHECKS.append("security.W008")
# Behind a proxy that terminates TLS: trust its X-Forwarded-Proto. Only set this when the proxy
# always sets (or strips) that header, or a client could claim HTTPS.
if env_bool("SCHEDWEB_BEHIND_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Content-Security-Policy on every page and API answer (policies/security.py): scripts and styles
# from this origin only. 'unsafe-eval' is for htmx's `hx-vals='js:...'` (the playground's
# revision); 'unsafe-inline' for styles covers style="" attributes (bar widths, layout).
SCHEDWEB_CSP = env_str(
    "SCHEDWEB_CSP",
    "default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
)

ROOT_URLCONF = "schedweb.urls"
CSRF_FAILURE_VIEW = "policies.ui.errors.csrf_failure"  # a 403 inside the app's chrome
WSGI_APPLICATION = "schedweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "policies.ui.context.role",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(
        env_str("SCHEDWEB_DATABASE_URL", "sqlite:///db.sqlite3"), base_dir=BASE_DIR
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
# In development the app server serves static files straight from static/ (no collectstatic needed).
WHITENOISE_USE_FINDERS = DEBUG

# Request bodies are bounded (DESIGN.md section 10). A nodeCacheCapable=false filter call for
# 1000 nodes is about 6.7 MB, so the extender gets its own, larger limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("SCHEDWEB_MAX_BODY_BYTES", 1_048_576)
SCHEDWEB_EXTENDER_MAX_BODY_BYTES = env_int("SCHEDWEB_EXTENDER_MAX_BODY_BYTES", 64 * 1_048_576)
# Bodies up to SCHEDWEB_EXTENDER_INLINE_BODY_BYTES are answered on the listener's event loop (a
# 500-name filter is about 10 KB and takes about a millisecond). Larger filter, prioritize and
# preempt bodies are answered in children forked from the listener (sharing its snapshot), at
# most SCHEDWEB_EXTENDER_OFFLOAD_WORKERS at once and _OFFLOAD_QUEUE more waiting (503 past that),
# streamed to their child as they arrive; a larger bind body is refused (413). Parsing holds
# the GIL: 200000 bare Node objects (6.6 MB) took 120-450 ms in one orjson.loads here, and as long
# again to check, so a thread would still stall the loop (schedweb/asgi.py). 128 KiB keeps
# nodeCacheCapable requests of about 6000 names inline and bounds an inline parse to ~15 ms.
SCHEDWEB_EXTENDER_INLINE_BODY_BYTES = env_int("SCHEDWEB_EXTENDER_INLINE_BODY_BYTES", 128 * 1024)
# Inline is also bounded by work, not bytes alone (issue 27): 130 KB holds 4000 minimal Node
# objects, 40-80 ms of checks, conversion and evaluation. A filter, prioritize or preempt body
# with more than SCHEDWEB_EXTENDER_INLINE_NODES full objects (Nodes.items, nodeCacheCapable
# false, or victim Pods) or more than SCHEDWEB_EXTENDER_INLINE_NAMES node names goes to the pool
# too. kube-scheduler's Node objects are 5-10 KB each, so its node-mode bodies past 20 nodes are
# over the byte limit anyway; 5000 names (Kubernetes' largest cluster) stay inline.
SCHEDWEB_EXTENDER_INLINE_NODES = env_int("SCHEDWEB_EXTENDER_INLINE_NODES", 100)
SCHEDWEB_EXTENDER_INLINE_NAMES = env_int("SCHEDWEB_EXTENDER_INLINE_NAMES", 8192)
SCHEDWEB_EXTENDER_OFFLOAD_WORKERS = env_int("SCHEDWEB_EXTENDER_OFFLOAD_WORKERS", 1)
SCHEDWEB_EXTENDER_OFFLOAD_QUEUE = env_int("SCHEDWEB_EXTENDER_OFFLOAD_QUEUE", 2)
# The shadow lane's process (the one extender process with a snapshot of its own, while a shadow
# is judged) lets go of its copy after this many seconds without a body (issue 28: the copy
# doubled the extender's memory; in a busy cluster the deltas it would need after a minute are
# past the catch-up limit anyway, so its next body loaded the snapshot whole either way).
# 0: keep it.
SCHEDWEB_EXTENDER_OFFLOAD_IDLE_SECONDS = env_float("SCHEDWEB_EXTENDER_OFFLOAD_IDLE_SECONDS", 60.0)
if (
    SCHEDWEB_EXTENDER_OFFLOAD_WORKERS < 1
    or SCHEDWEB_EXTENDER_OFFLOAD_QUEUE < 0
    or not SCHEDWEB_EXTENDER_OFFLOAD_IDLE_SECONDS >= 0
):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "SCHEDWEB_EXTENDER_OFFLOAD_WORKERS must be at least 1, _OFFLOAD_QUEUE and"
        " _OFFLOAD_IDLE_SECONDS at least 0."
    )

# Redis: Celery broker, snapshot store and version counters.
REDIS_URL = env_str("SCHEDWEB_REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_TIME_LIMIT = env_int("SCHEDWEB_TASK_TIME_LIMIT", 600)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = env_bool("SCHEDWEB_CELERY_EAGER", False)

# Failed sign-ins and API-token failures (policies/throttle.py): a fixed window per counter; at
# the limit, attempts are refused (429) until the window ends, and do not extend it.
SCHEDWEB_THROTTLE_WINDOW = env_int("SCHEDWEB_THROTTLE_WINDOW", 900)
SCHEDWEB_LOGIN_FAILURES_PER_USER = env_int("SCHEDWEB_LOGIN_FAILURES_PER_USER", 10)
SCHEDWEB_LOGIN_FAILURES_PER_IP = env_int("SCHEDWEB_LOGIN_FAILURES_PER_IP", 30)
SCHEDWEB_TOKEN_FAILURES_PER_IP = env_int("SCHEDWEB_TOKEN_FAILURES_PER_IP", 30)
# Pods a user's backtests may judge per window (each request charged by its size): 20 000 is
# eight backtests at the largest bound (2000 recorded + 500 pending) every 15 minutes.
SCHEDWEB_BACKTEST_PODS_PER_WINDOW = env_int("SCHEDWEB_BACKTEST_PODS_PER_WINDOW", 20_000)

# Cluster state: `live` (kubeconfig or in-cluster), `file` (kubectl JSON list) or `demo`.
SCHEDWEB_KUBECONFIG = env_path("SCHEDWEB_KUBECONFIG", None)
SCHEDWEB_KUBE_CONTEXT = env_str("SCHEDWEB_KUBE_CONTEXT", "")
SCHEDWEB_CLUSTER_FILE = env_path("SCHEDWEB_CLUSTER_FILE", None)
SCHEDWEB_CLUSTER_SOURCE = env_str(
    "SCHEDWEB_CLUSTER_SOURCE",
    "live" if SCHEDWEB_KUBECONFIG else ("file" if SCHEDWEB_CLUSTER_FILE else "demo"),
)
if SCHEDWEB_CLUSTER_SOURCE not in ("live", "file", "demo"):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        f"SCHEDWEB_CLUSTER_SOURCE={SCHEDWEB_CLUSTER_SOURCE!r} must be live, file or demo."
    )
SCHEDWEB_CLUSTER_NAME = env_str("SCHEDWEB_CLUSTER_NAME", "default")
# Stale after this many seconds without a successful sync or watch event.
SCHEDWEB_SNAPSHOT_STALE_SECONDS = env_float("SCHEDWEB_SNAPSHOT_STALE_SECONDS", 30.0)
# One watch task runs this long, then re-arms itself (bounded memory, visible sync runs).
SCHEDWEB_WATCH_SECONDS = env_float("SCHEDWEB_WATCH_SECONDS", 540.0)

# Extender: its own listener (python -m schedweb.extender_server; schedweb.asgi:extender_application),
# separate from the pages and the API, which do not answer /extender/.
# - TLS: SCHEDWEB_EXTENDER_TLS_CERT and _TLS_KEY (PEM) give the server certificate.
# - Mutual TLS: with SCHEDWEB_EXTENDER_CLIENT_CA (PEM), only clients presenting a certificate
#   issued by that CA complete the handshake (kube-scheduler's extender tlsConfig certFile/keyFile).
# - Plain HTTP (no certificate) is allowed only when bound to a loopback address
#   (127.0.0.1, ::1, localhost): for local use and tests, never across a network.
# - Requests whose Host header is not in SCHEDWEB_EXTENDER_ALLOWED_HOSTS are refused (400).
_LOOPBACK = ("127.0.0.1", "::1", "localhost")
SCHEDWEB_EXTENDER_HOST = env_str("SCHEDWEB_EXTENDER_HOST", "127.0.0.1")
SCHEDWEB_EXTENDER_PORT = env_int("SCHEDWEB_EXTENDER_PORT", 8443)
SCHEDWEB_EXTENDER_TLS_CERT = env_path("SCHEDWEB_EXTENDER_TLS_CERT", None)
SCHEDWEB_EXTENDER_TLS_KEY = env_path("SCHEDWEB_EXTENDER_TLS_KEY", None)
SCHEDWEB_EXTENDER_CLIENT_CA = env_path("SCHEDWEB_EXTENDER_CLIENT_CA", None)
SCHEDWEB_EXTENDER_ALLOWED_HOSTS = env_list(
    "SCHEDWEB_EXTENDER_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"]
)
# uvicorn worker processes of the extender's listener. kube-scheduler calls the extender one pod
# at a time, serially, over one kept-alive connection: one process answers them all, and every
# further one only keeps its own copy of the snapshot current, spending CPU on each cluster
# change that kube-scheduler, on the same cores, does not get (issue 13). Large bodies are
# answered by the offload pool, not by a second worker.
SCHEDWEB_EXTENDER_WORKERS = env_int("SCHEDWEB_EXTENDER_WORKERS", 1)
# Under mutual TLS, each client certificate has one job (issue 27): the extender verbs only for
# kube-scheduler's, POST /admission/queue only for kube-apiserver's (its webhook client
# certificate); /healthz, /readyz and /metrics for any certificate the handshake accepted (the
# in-pod probe's). A certificate is named by its subject's CN and its subjectAltName's DNS and
# URI entries; it is one of a list when any of its names is. "*" accepts every certificate of the
# client CA (the behaviour before issue 27). Without mutual TLS nothing names the caller and
# every path is open to whoever reaches the (loopback) port. Refusals are 403, logged and
# counted (schedweb_extender_refused_total). `make run`'s scripts/extender-certs.sh issues
# CN=kube-scheduler, CN=kube-apiserver and CN=schedweb-probe.
SCHEDWEB_EXTENDER_SCHEDULER_CLIENTS = env_list(
    "SCHEDWEB_EXTENDER_SCHEDULER_CLIENTS", ["kube-scheduler"]
)
SCHEDWEB_EXTENDER_WEBHOOK_CLIENTS = env_list(
    "SCHEDWEB_EXTENDER_WEBHOOK_CLIENTS", ["kube-apiserver"]
)
# Bind never places a pod of these namespaces, whoever asks (the refusal reads like any other).
SCHEDWEB_EXTENDER_BIND_EXCLUDED_NAMESPACES = env_list(
    "SCHEDWEB_EXTENDER_BIND_EXCLUDED_NAMESPACES", ["kube-system", "kube-public", "kube-node-lease"]
)
# A filter or prioritize naming a node the snapshot does not hold yet (or a pod, where the policy
# reads what the cluster's pods use) waits at most this many milliseconds for the snapshot to
# catch up before applying the policy's failurePolicy (policies/extender/catch_up.py); 0: never
# waits. A watch event reaches every extender process in milliseconds (make bench); the wait is
# bounded well inside kube-scheduler's httpTimeout (2 s as schedulerconfig prints it).
SCHEDWEB_EXTENDER_CATCH_UP_MS = env_int("SCHEDWEB_EXTENDER_CATCH_UP_MS", 500)
# Publish, rollback and deactivation return once every live extender process serves the change,
# or after this many seconds, naming those that have not confirmed (policies/publishing.py). A
# process is live when it reported (every half second) within SCHEDWEB_EXTENDER_LIVE_SECONDS.
SCHEDWEB_PUBLISH_CONFIRM_SECONDS = env_float("SCHEDWEB_PUBLISH_CONFIRM_SECONDS", 2.0)
SCHEDWEB_EXTENDER_LIVE_SECONDS = env_float("SCHEDWEB_EXTENDER_LIVE_SECONDS", 10.0)
if SCHEDWEB_EXTENDER_CATCH_UP_MS < 0 or not SCHEDWEB_PUBLISH_CONFIRM_SECONDS >= 0:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "SCHEDWEB_EXTENDER_CATCH_UP_MS and SCHEDWEB_PUBLISH_CONFIRM_SECONDS must not be negative."
    )
if not SCHEDWEB_EXTENDER_LIVE_SECONDS > 0:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("SCHEDWEB_EXTENDER_LIVE_SECONDS must be a positive number.")
# What generated configuration (schedulerconfig, /connect/) tells kube-scheduler to present:
# the CA that signed the extender's server certificate, and kube-scheduler's client certificate
# and key for mutual TLS (paths as kube-scheduler sees them).
SCHEDWEB_EXTENDER_SCHEDULER_CA = env_str("SCHEDWEB_EXTENDER_SCHEDULER_CA", "")
SCHEDWEB_EXTENDER_SCHEDULER_CERT = env_str("SCHEDWEB_EXTENDER_SCHEDULER_CERT", "")
SCHEDWEB_EXTENDER_SCHEDULER_KEY = env_str("SCHEDWEB_EXTENDER_SCHEDULER_KEY", "")
if bool(SCHEDWEB_EXTENDER_TLS_CERT) != bool(SCHEDWEB_EXTENDER_TLS_KEY):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "SCHEDWEB_EXTENDER_TLS_CERT and SCHEDWEB_EXTENDER_TLS_KEY go together."
    )
if SCHEDWEB_EXTENDER_CLIENT_CA and not SCHEDWEB_EXTENDER_TLS_CERT:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "SCHEDWEB_EXTENDER_CLIENT_CA (mutual TLS) needs SCHEDWEB_EXTENDER_TLS_CERT and _TLS_KEY."
    )
if not SCHEDWEB_EXTENDER_TLS_CERT and SCHEDWEB_EXTENDER_HOST not in _LOOPBACK:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        f"SCHEDWEB_EXTENDER_HOST={SCHEDWEB_EXTENDER_HOST!r} without TLS: plain HTTP is for "
        "loopback only; set SCHEDWEB_EXTENDER_TLS_CERT and SCHEDWEB_EXTENDER_TLS_KEY."
    )
# The extender listener's per-process metrics files (policies/extender/metrics.py): one directory
# per listener, emptied at its start by `python -m schedweb.extender_server`, which makes a private
# temporary one when this is unset. Unset in a process not started that way: /metrics then shows
# that process alone.
SCHEDWEB_METRICS_DIR = env_path("SCHEDWEB_METRICS_DIR", None)

# Stalled connections, on both listeners (schedweb/http_timeouts.py): a client must send a
# request's whole header block within SCHEDWEB_HEADER_TIMEOUT_SECONDS of connecting (or of the
# first byte of a further request on a kept-alive connection; for the extender's TLS this also
# bounds the handshake), some of its body at least every SCHEDWEB_BODY_TIMEOUT_SECONDS and the
# whole body within SCHEDWEB_BODY_DEADLINE_SECONDS of its headers (a byte every 5 s is never idle
# for long, issue 27), or the connection is closed. Idle kept-alive connections close after
# uvicorn's timeout_keep_alive. Each listener process keeps at most SCHEDWEB_MAX_CONNECTIONS open
# connections; one past that is answered 503 and closed at once.
SCHEDWEB_HEADER_TIMEOUT_SECONDS = env_float("SCHEDWEB_HEADER_TIMEOUT_SECONDS", 10.0)
SCHEDWEB_BODY_TIMEOUT_SECONDS = env_float("SCHEDWEB_BODY_TIMEOUT_SECONDS", 30.0)
SCHEDWEB_BODY_DEADLINE_SECONDS = env_float("SCHEDWEB_BODY_DEADLINE_SECONDS", 60.0)
for _name in (
    "SCHEDWEB_HEADER_TIMEOUT_SECONDS",
    "SCHEDWEB_BODY_TIMEOUT_SECONDS",
    "SCHEDWEB_BODY_DEADLINE_SECONDS",
):
    if not globals()[_name] > 0:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"{_name} must be a positive number of seconds.")
SCHEDWEB_MAX_CONNECTIONS = env_int("SCHEDWEB_MAX_CONNECTIONS", 256)
if SCHEDWEB_MAX_CONNECTIONS < 1:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("SCHEDWEB_MAX_CONNECTIONS must be at least 1.")
# The URL prefix kube-scheduler calls (for generated configuration and /connect/).
SCHEDWEB_EXTENDER_URL = env_str(
    "SCHEDWEB_EXTENDER_URL",
    f"{'https' if SCHEDWEB_EXTENDER_TLS_CERT else 'http'}://127.0.0.1:{SCHEDWEB_EXTENDER_PORT}/extender/",
)

# Extender: sampled decisions recorded per second per web process (a Celery task stores them).
# Each costs about a millisecond per 500 nodes to build and more to queue and store: at 20 a
# second kube-scheduler's throughput through the extender fell by a quarter on 2 cores (make bench).
SCHEDWEB_DECISIONS_PER_SECOND = env_float("SCHEDWEB_DECISIONS_PER_SECOND", 2.0)
# A shadow version (issue 25) is judged after each filter answer, off its path, bounded: one
# evaluation stops after SCHEDWEB_SHADOW_SLICE_MS of CPU (recorded as a shadow error), and shadows may
# take at most SCHEDWEB_SHADOW_SHARE of a process's time (CPU seconds per second; past it pods
# are skipped, counted and shown as not judged; the shadow lane's whole process is paced to it). Every judgement is counted; pods the shadow
# judged differently are listed as records at most SCHEDWEB_SHADOW_RECORDS_PER_SECOND a second
# per process (the others only counted), and at most SCHEDWEB_SHADOW_DETAILS_PER_SECOND of those
# keep both versions' node breakdowns (about 2.5 ms to build at 500 nodes; the model's pick is
# added to 10 every 30 s, policies/rollout/services.py). At 20 breakdowns and a record per pod a
# second kube-scheduler's throughput with a shadow fell to 0.77-0.84 of the run without. A
# share of 0.25 (the shadow lane's whole process held to it, offload.lane_pace) kept a median
# of 0.85-0.95, 0.1 kept 0.88-0.91 (and judged 40% of the pods), 0.05 kept 0.93-1.01 (judged 11-17%:
# under that churn most of the lane's time goes to following the snapshot; bench shadow, 250
# pods a second over 500 nodes on 2 cores).
SCHEDWEB_SHADOW_SLICE_MS = env_float("SCHEDWEB_SHADOW_SLICE_MS", 25.0)
SCHEDWEB_SHADOW_SHARE = env_float("SCHEDWEB_SHADOW_SHARE", 0.05)
SCHEDWEB_SHADOW_RECORDS_PER_SECOND = env_float("SCHEDWEB_SHADOW_RECORDS_PER_SECOND", 20.0)
SCHEDWEB_SHADOW_DETAILS_PER_SECOND = env_float("SCHEDWEB_SHADOW_DETAILS_PER_SECOND", 2.0)
# The shadow is judged in the offload pool's shadow lane, a process started with the first
# shadow: SCHEDWEB_SHADOW_QUEUE filter bodies wait for it per listener process; past it (the lane
# starved of CPU) pods are skipped, counted. SCHEDWEB_SHADOW_LANE_CLASS: "idle", Linux's idle
# scheduling class (a core only when nothing else in the container wants it), or "nice" (nice
# 19: a small share even of a core kept busy).
SCHEDWEB_SHADOW_QUEUE = env_int("SCHEDWEB_SHADOW_QUEUE", 256)
SCHEDWEB_SHADOW_LANE_CLASS = env_str("SCHEDWEB_SHADOW_LANE_CLASS", "idle")
if (
    not SCHEDWEB_SHADOW_SLICE_MS > 0
    or not 0 <= SCHEDWEB_SHADOW_SHARE <= 1
    or SCHEDWEB_SHADOW_QUEUE < 0
    or SCHEDWEB_SHADOW_LANE_CLASS not in ("idle", "nice")
):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "SCHEDWEB_SHADOW_SLICE_MS must be positive, SCHEDWEB_SHADOW_SHARE between 0 and 1,"
        " SCHEDWEB_SHADOW_QUEUE at least 0 and SCHEDWEB_SHADOW_LANE_CLASS idle or nice."
    )
# Decision records older than this are deleted (beat, hourly).
SCHEDWEB_DECISIONS_KEEP_DAYS = env_int("SCHEDWEB_DECISIONS_KEEP_DAYS", 7)
# Share links of the playground (/s/<token>/) open for this long, then are deleted (hourly).
SCHEDWEB_SHARE_DAYS = env_int("SCHEDWEB_SHARE_DAYS", 30)

# Extender bind: off unless asked. On, the extender creates pods/binding with schedweb's own
# Kubernetes credentials, for pods an active policy targets, to nodes of the snapshot only
# (policies/extender/service.py); kube-scheduler must then be configured with bindVerb.
SCHEDWEB_EXTENDER_BIND = env_bool("SCHEDWEB_EXTENDER_BIND", False)
if (
    SCHEDWEB_EXTENDER_BIND
    and not SCHEDWEB_EXTENDER_CLIENT_CA
    and SCHEDWEB_EXTENDER_HOST not in _LOOPBACK
):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "SCHEDWEB_EXTENDER_BIND off a loopback address needs mutual TLS "
        "(SCHEDWEB_EXTENDER_CLIENT_CA): bind uses schedweb's own Kubernetes credentials."
    )

# CEL: per-expression cost budget (compile-time estimate and run-time limit).
SCHEDWEB_CEL_COST_LIMIT = env_int("SCHEDWEB_CEL_COST_LIMIT", 1_000_000)
# Wall-clock limit of one preview or validation request (REST and playground); 0 = none.
# The extender has no such limit: its bound is the cost budget above.
SCHEDWEB_PREVIEW_SECONDS = env_float("SCHEDWEB_PREVIEW_SECONDS", 10.0)

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "policies.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["policies.api.permissions.RolePermission"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "policies.api.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "policies.api.errors.schema_common_errors",
    ],
    "TITLE": "schedweb API",
    "DESCRIPTION": "Author, preview and publish CEL scheduling policies for kube-scheduler.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "APPEND_COMPONENTS": {
        "securitySchemes": {
            "bearerAuth": {
                "type": "http",
                "scheme": "bearer",
                "description": "A schedweb API token (swt_...).",
            }
        }
    },
    "SECURITY": [{"bearerAuth": []}],
    # `verdict` and `policyVerdict` share one choice set: one name for it.
    "ENUM_NAME_OVERRIDES": {"VerdictEnum": ["pass", "reject"]},
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"no_422": {"()": "schedweb.logfilters.ValidationAnswersAreNotWarnings"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"django.request": {"filters": ["no_422"]}},
    "root": {"handlers": ["console"], "level": env_str("SCHEDWEB_LOG_LEVEL", "INFO")},
}
