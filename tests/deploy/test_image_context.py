"""The image's build context (.dockerignore, Dockerfile): what `make run` and an editor leave in
a checkout (env files, the SQLite database and its WAL, .run/, caches, virtualenvs, keys) never
reaches `docker build`, and everything the Dockerfile copies does. Docker's matching rules are
tests/deploy/dockerignore.py's; the first tests pin them to Docker's documented examples."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.deploy.dockerignore import DockerIgnore, build_context, read_patterns

from .chart import REPO_ROOT

IGNORE = DockerIgnore.from_file(REPO_ROOT / ".dockerignore")

# What a checkout holds after `make run`, `make test` and some editing, beside the sources.
LOCAL_FILES = [
    ".env",
    ".env.local",
    "db.sqlite3",
    "db.sqlite3-wal",
    "db.sqlite3-shm",
    "db.sqlite3-journal",
    ".run/secret-key",
    ".run/admin-login.txt",
    ".run/tls/ca.key",
    ".run/tls/server.key",
    ".run/worker.log",
    ".run/celerybeat-schedule",
    ".venv/bin/python",
    "venv/lib/site.py",
    ".cache/helm/v3.22.0/helm",
    ".cache/pg-25436/postgresql.conf",
    ".pytest_cache/v/cache/nodeids",
    ".ruff_cache/0.17.6/x",
    "artifacts/screenshots/home.png",
    "staticfiles/css/app.css",
    ".git/config",
    ".idea/workspace.xml",
    "notes.txt",
    "policies/__pycache__/models.cpython-311.pyc",
    "policies/engine/policy.pyc",
    "schedweb/.env",
    "schedweb/settings.py~",
    "schedweb/.settings.py.swp",
    "static/css/.env.production",
    "policies/local.sqlite3",
    "policies/local.sqlite3-wal",
    "templates/key.pem",
    "static/debug.log",
]


@pytest.mark.parametrize(
    ("patterns", "path", "excluded"),
    [
        # docs.docker.com/build/concepts/context/#dockerignore-files, the example's rules
        (["*/temp*"], "somedir/temporary.txt", True),
        (["*/temp*"], "temp", False),
        (["*/*/temp*"], "somedir/subdir/temporary.txt", True),
        (["temp?"], "tempa", True),
        (["temp?"], "tempab", False),
        (["**/*.go"], "a/b/c.go", True),
        (["**/*.go"], "c.go", True),
        (["*.md", "!README.md"], "README.md", False),
        (["*.md", "!README.md"], "CHANGES.md", True),
        (["*.md", "!README*.md", "README-secret.md"], "README-secret.md", True),
        (["*.md", "README-secret.md", "!README*.md"], "README-secret.md", False),
        # a directory's pattern covers what is below it; an exception re-includes
        (["*"], "schedweb/settings.py", True),
        (["*", "!schedweb"], "schedweb/settings.py", False),
        (["*", "!schedweb", "**/__pycache__"], "schedweb/__pycache__/x.pyc", True),
        (["/.env"], ".env", True),
        (["build/**"], "build/a/b", True),
    ],
)
def test_the_matcher_follows_dockers_documented_rules(patterns, path, excluded):
    assert DockerIgnore(read_patterns("\n".join(patterns))).excluded(path) is excluded


def test_comments_blank_lines_and_leading_slashes_are_read_as_docker_reads_them():
    assert read_patterns("# a comment\n\n  /.env  \n!/keep/../keep\n.run/\n") == [
        ".env",
        "!keep",
        ".run",
    ]


def _tracked() -> list[str]:
    done = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.split()


def _copied_sources() -> list[str]:
    """The sources of the Dockerfile's COPY instructions."""
    sources = []
    for line in (REPO_ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            assert "--from" not in line
            *paths, _destination = line.split()[1:]
            sources += paths
    return sources


def test_nothing_local_enters_the_build_context_and_every_copied_source_does(tmp_path):
    """A checkout with every tracked file and what local runs leave: the context holds no local
    file, and every tracked file under each COPY source."""
    for relative in [*_tracked(), *LOCAL_FILES]:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    sent = build_context(tmp_path, IGNORE)
    assert sorted(set(LOCAL_FILES) & sent) == []
    sources = _copied_sources()
    assert "." not in sources  # never the whole context
    wanted = {
        path for path in _tracked() for source in sources if re.match(rf"{source}(/|$)", path)
    }
    assert "schedweb/settings.py" in wanted and "templates/base.html" in wanted
    assert sorted(wanted - sent) == []
    # ... and nothing else: tests, docs, the chart, scripts stay out of the image
    assert sorted(sent - wanted - {"Dockerfile"}) == []


def test_this_checkouts_own_leftovers_stay_out(tmp_path):
    """The real working tree (caches and bytecode from the test runs included): every file the
    context would carry is a tracked source."""
    tracked = set(_tracked())
    sent = set()
    for top in ("schedweb", "policies", "templates", "static"):
        for path in (REPO_ROOT / top).rglob("*"):
            relative = path.relative_to(REPO_ROOT).as_posix()
            if path.is_file() and not IGNORE.excluded(relative):
                sent.add(relative)
    for path in REPO_ROOT.iterdir():
        if path.is_file() and not IGNORE.excluded(path.name):
            sent.add(path.name)
    assert sorted(sent - tracked) == []
    assert IGNORE.excluded(".venv/bin/python") and IGNORE.excluded(".cache/helm")
