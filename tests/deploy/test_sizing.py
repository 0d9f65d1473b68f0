"""The chart's memory check (templates/validate.yaml, README "Sizing"): the defaults fit what
they declare, a limit under what the declared cluster needs fails the install naming the value
and the figure, the figure is exactly the threshold, and at install the chart counts the
cluster's nodes (lookup, against the real test kube-apiserver)."""

from __future__ import annotations

import re

import pytest

from tests.deploy.chart import CHART, VALUE_SETS, chart_render, helm, helm_install_dry_run
from tests.harness.resources import node_create, node_manifest

pytestmark = pytest.mark.cluster

NEEDS = re.compile(r"\((\d+) MiB\) is below the (\d+) MiB each (\w+) pod needs")


def _template(*settings: str):
    args = ["template", "schedweb", str(CHART), "-f", str(VALUE_SETS / "default-values.yaml")]
    for setting in settings:
        args += ["--set", setting]
    return helm(*args)


@pytest.mark.parametrize("value_set", ["default", "tuned"])
def test_the_value_sets_memory_covers_the_size_they_declare(value_set):
    assert chart_render(values=[value_set])


@pytest.mark.parametrize("component", ["extender", "worker", "web"])
def test_a_limit_below_the_declared_clusters_need_fails_naming_it_and_the_figure(component):
    done = _template(f"{component}.resources.limits.memory=256Mi")
    assert done.returncode != 0
    assert f"{component}.resources.limits.memory (256 MiB) is below the" in done.stderr
    assert "sizing.nodes=500 and sizing.pods=10000" in done.stderr
    limit, need, who = NEEDS.search(done.stderr).groups()
    assert (int(limit), who) == (256, component) and int(need) > 256
    # the figure is the threshold: exactly it passes, a MiB less fails
    assert _template(f"{component}.resources.limits.memory={need}Mi").returncode == 0
    less = _template(f"{component}.resources.limits.memory={int(need) - 1}Mi")
    assert less.returncode != 0 and component in less.stderr


def test_the_large_end_of_the_envelope_needs_more_than_the_defaults_and_says_so():
    done = _template("sizing.nodes=5000", "sizing.pods=150000")
    assert done.returncode != 0
    _limit, need, who = NEEDS.search(done.stderr).groups()
    # MiB: README's measured row (the extender pod: 889 MB, plus the check's 10%)
    assert who == "extender" and int(need) >= 978


@pytest.mark.parametrize(
    ("quantity", "mebibytes"),
    [("2Gi", 2048), ("2048Mi", 2048), ("2147483648", 2048), ("2.5Gi", 2560), ("3G", 2861)],
)
def test_memory_quantities_are_read_in_every_kubernetes_spelling(quantity, mebibytes):
    done = _template(
        "sizing.nodes=5000", "sizing.pods=150000", f"web.resources.limits.memory={quantity}"
    )
    found = [m for m in NEEDS.finditer(done.stderr)]
    assert found and found[0].group(3) in ("extender", "web", "worker")
    web = _template("sizing.nodes=5000", "sizing.pods=150000", "extender.resources.limits.memory=64Gi",
                    f"web.resources.limits.memory={quantity}")  # fmt: skip
    assert f"web.resources.limits.memory ({mebibytes} MiB)" in web.stderr


def test_without_a_memory_limit_there_is_nothing_to_check():
    assert _template("extender.resources.limits=null", "sizing.pods=150000",
                     "worker.resources.limits=null", "web.resources.limits=null",
                     "redis.maxmemory=2gb").returncode == 0  # fmt: skip


def test_redis_must_hold_twice_the_declared_clusters_snapshot():
    done = _template("sizing.pods=100000", "extender.resources.limits=null",
                     "worker.resources.limits=null", "web.resources.limits=null")  # fmt: skip
    assert done.returncode != 0 and "redis.maxmemory (512 MiB) is below the" in done.stderr
    assert _template("sizing.pods=100000", "extender.resources.limits=null",
                     "worker.resources.limits=null", "web.resources.limits=null",
                     "redis.maxmemory=1gb").returncode == 0  # fmt: skip


def test_at_install_the_chart_counts_the_clusters_nodes(control_plane, names):
    """`helm install` (here --dry-run=server: lookup reads the real API server) refuses a
    declared size below the cluster's node count; helm template cannot count, and does not."""
    for i in range(2):
        node_create(api=control_plane.api, manifest=node_manifest(name=names(f"n{i}")))
    count = len(control_plane.api.get("/api/v1/nodes")["items"])
    done = helm(
        "install", "schedweb", str(CHART), "-n", "schedweb", "--dry-run=server",
        "--kubeconfig", str(control_plane.kubeconfig), "-f", str(VALUE_SETS / "default-values.yaml"),
        "--set", "sizing.nodes=1",
    )  # fmt: skip
    assert done.returncode != 0
    assert re.search(r"the cluster has (\d+) nodes, sizing.nodes declares 1", done.stderr)
    assert int(re.search(r"the cluster has (\d+) nodes", done.stderr).group(1)) >= count
    objects, _notes = helm_install_dry_run(
        control_plane.kubeconfig,
        values=["default"],
        set_values={"sizing.nodes": "1", "sizing.countNodes": "false"},
    )
    assert objects
    assert _template("sizing.nodes=1").returncode == 0  # no lookup in helm template


FIGURES = CHART.parents[2] / "docs" / "perf" / "issue-28-sizing.txt"
README = CHART.parents[2] / "README.md"


def _fits() -> dict[str, list[float]]:
    """Each process's fit as the benchmark run behind the README printed it."""
    found = re.findall(
        r"^\s+(\w+):\s+\[([-\d.]+), ([-\d.]+), ([-\d.]+)\]$", FIGURES.read_text(), re.M
    )
    return {name: [float(a), float(b), float(c)] for name, a, b, c in found}


def test_the_charts_model_is_the_benchmarks_fit_rounded_up():
    model_text = (CHART / "templates" / "_helpers.tpl").read_text()
    model_text = model_text.split('define "schedweb.sizingModel"', 1)[1].split("{{- end", 1)[0]
    model = {
        name: [float(x) for x in values.split(",")]
        for name, values in re.findall(r"^(\w+): \[([^\]]+)\]$", model_text, re.M)
    }
    fits = _fits()
    assert set(fits) == {"listener", "offload", "watcher", "reader", "redis"}
    for name in ("listener", "offload", "watcher", "reader", "redis"):
        assert all(m >= f for m, f in zip(model[name], fits[name], strict=True)), name
        assert all(m - f <= 2.5 for m, f in zip(model[name], fits[name], strict=True)), name


def test_the_readmes_sizing_table_is_the_benchmarks_measurements():
    measured = re.findall(
        r"^\s+(\d+)\s+(\d+) \|.*\|\s+(\d+)\s+(\d+)\s+(\d+) \|\s+(\d+)\s+\(\d+ s\)$",
        FIGURES.read_text(),
        re.M,
    )
    assert len(measured) == 4
    table = README.read_text()
    for nodes, pods, extender, worker, web, redis in measured:

        def spaced(n: str) -> str:
            return f"{int(n):,}".replace(",", " ")

        row = (
            f"| {spaced(nodes)} | {spaced(pods)} | {spaced(extender)} MB | {spaced(worker)} MB |"
            f" {spaced(web)} MB | {redis} MB |"
        )
        assert row in table, row
