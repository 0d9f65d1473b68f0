"""kube-scheduler's throughput as the extender benchmarks measure it (bench/extender.py, bench/shadow.py):
pods created beforehand and bound by a scheduler started for the run, the rate from the first bind to
the last, the CPU of the extender's process tree and of every program on the machine per pod, and
alternated rounds of configurations (other listeners paused, the order turning, each run from the
same cluster when asked).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

# Without/with pairs, alternated: this VM's speed drifts over minutes, so one pair can land in
# different phases; the median of the pairs' ratios is reported.
ROUNDS = int(os.environ.get("SCHEDWEB_BENCH_ROUNDS", "3"))


def _pod(name: str, scheduler: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench"}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        },
    }


class _BindWatch:
    """Times the binds of one run's pods from a watch on kube-apiserver.

    Earlier versions polled kube-scheduler's /metrics every 50 ms over a new TLS connection
    each time. Its CPU profile showed that serving those scrapes took about a tenth of the
    scheduler's CPU, and more the longer a run took, so it penalised the slower configuration.
    A watch, parsed with orjson, costs the same small amount per pod in both runs. Like any
    watch client it resumes from the last resourceVersion when the server ends the stream (it
    closes watchers that fall behind).
    """

    def __init__(self, plane, selector: str, expected: int) -> None:
        import ssl
        import threading

        host, port = plane.url.removeprefix("https://").rsplit(":", 1)
        self._address = (host, int(port))
        self._tls = ssl.create_default_context(cafile=str(plane.ca_file))
        self._token = plane.admin_token
        self._selector = selector
        self._connection: http.client.HTTPSConnection | None = None
        self.expected = expected
        self.bound: set[str] = set()
        self.first: float | None = None
        self.last: float | None = None
        self.error = ""
        self.done = threading.Event()
        self._stopping = False
        self._response = self._open("")
        threading.Thread(target=self._read, daemon=True).start()

    def _open(self, resource_version: str) -> http.client.HTTPResponse:
        import urllib.parse

        self._connection = http.client.HTTPSConnection(*self._address, context=self._tls)
        query = {"watch": "1", "labelSelector": self._selector}
        if resource_version:
            query["resourceVersion"] = resource_version
        self._connection.request(
            "GET",
            f"/api/v1/namespaces/default/pods?{urllib.parse.urlencode(query)}",
            headers={"Authorization": f"Bearer {self._token}"},
        )
        response = self._connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"watch: HTTP {response.status}")
        return response

    def _read(self) -> None:
        resource_version = ""
        reconnects = 0
        try:
            while len(self.bound) < self.expected and not self._stopping:
                line = self._response.readline()
                if not line:
                    reconnects += 1
                    if reconnects > 20:
                        self.error = "the watch ended 20 times"
                        return
                    self._response = self._open(resource_version)
                    continue
                event = orjson.loads(line)
                pod = event.get("object", {})
                if event.get("type") == "ERROR":
                    self.error = f"watch error: {pod.get('message')}"
                    return
                resource_version = pod.get("metadata", {}).get("resourceVersion", "")
                if pod.get("spec", {}).get("nodeName"):
                    now = time.monotonic()
                    name = pod["metadata"]["name"]
                    if name not in self.bound:
                        self.bound.add(name)
                        self.first = self.first or now
                        self.last = now
        except Exception as exc:  # reported by _throughput
            self.error = repr(exc)
        finally:
            self.done.set()

    def close(self) -> None:
        self._stopping = True
        if self._connection is not None:
            self._connection.close()


# -- the extender's processes: CPU, memory, pausing -------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK")


def _process_tree(root: int) -> list[int]:
    """`root` and every process descending from it (uvicorn's workers, children for bodies)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(entry.path, "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def _machine_cpu_seconds() -> float:
    """User + system CPU seconds so far of every process on the machine (/proc/stat: the
    first line's user, nice, system, irq and softirq)."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _machine_cpu_by_process() -> dict[int, tuple[str, float]]:
    """CPU seconds so far of every live process on the machine, with its program (its
    command's first two words, shortened): where a run's CPU went, beyond the extender's."""
    spent: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            comm, _, rest = (entry / "stat").read_text().partition(" (")[2].rpartition(")")
            fields = rest.split()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            words = [Path(a.decode(errors="replace")).name for a in argv[:3] if a]
            if words and words[0].startswith("python"):
                words = words[1:]  # the script or module, not the interpreter
            if words[:1] == ["-c"]:  # multiprocessing's children: the spawn line says little
                words = ["python -c"]
            program = " ".join(words[:2])[:40] or comm
            seconds = (int(fields[11]) + int(fields[12])) / _TICKS
            spent[int(entry.name)] = (program, seconds)
    return spent


def _by_program(before: dict, after: dict) -> list[tuple[float, str]]:
    """The CPU seconds spent between two _machine_cpu_by_process, by program, most first
    (keyed by pid: a kernel worker's name changes with its work item)."""
    spent: dict[str, float] = {}
    for pid, (program, seconds) in after.items():
        spent[program] = spent.get(program, 0.0) + seconds - before.get(pid, ("", 0.0))[1]
    return sorted(((seconds, program) for program, seconds in spent.items()), reverse=True)


def _cpu_seconds(root: int) -> dict[int, float]:
    """User + system CPU seconds so far of each process of the tree under `root`."""
    spent = {}
    for pid in _process_tree(root):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            spent[pid] = (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
    return spent


@contextlib.contextmanager
def _paused(roots: list[int]):
    """SIGSTOP the process trees under `roots` for the duration (an idle listener's processes
    still apply every snapshot change: CPU the run under measurement would not get)."""
    pids = [pid for root in roots for pid in _process_tree(root)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def nodes_create(plane, count: int) -> list[str]:
    """`count` nodes bench-node-NNN of 32 CPUs and 128 GiB, in zones a, b, c by turn."""
    from tests.harness import resources

    names = [f"bench-node-{i:03d}" for i in range(count)]
    zones = ["zone-a", "zone-b", "zone-c"]
    for i, name in enumerate(names):
        labels = {"topology.kubernetes.io/zone": zones[i % 3]}
        resources.node_create(
            api=plane.api,
            manifest=resources.node_manifest(name=name, cpu="32", memory="128Gi", labels=labels),
        )
    return names


def _pods_create(plane, tag: str, scheduler_name: str, count: int) -> None:
    """`count` pending pods labelled run=<tag>, created by 8 threads (not timed)."""
    from tests.harness import resources

    def create(i: int) -> None:
        manifest = _pod(f"{tag}-{i:05d}", scheduler_name)
        manifest["metadata"]["labels"]["run"] = tag
        resources.pod_create(api=plane.api, manifest=manifest)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(create, range(count)))


def _throughput(
    plane,
    config: str,
    scheduler_name: str,
    label: str,
    run: int,
    *,
    pods: int,
    extender: int | None = None,
    machine_cpu: bool = False,
) -> tuple[float, float | None]:
    """Pods per second for `pods` pods created beforehand, from the first bind to the last; and
    the CPU milliseconds per pod bound of the process tree under `extender`, if given (printed
    with the whole machine's, every process's, with `machine_cpu`: where a cost lands outside
    the extender, in kube-apiserver, Redis or the Celery worker)."""
    tag = f"{scheduler_name}-{run}"
    _pods_create(plane, tag, scheduler_name, pods)
    watch = _BindWatch(plane, f"run={tag}", pods)
    cpu_before = _cpu_seconds(extender) if extender else {}
    machine_before = _machine_cpu_seconds()
    programs_before = _machine_cpu_by_process() if machine_cpu else {}
    process = plane.start_scheduler(config)
    try:
        if not watch.done.wait(900) or len(watch.bound) < pods:
            raise RuntimeError(
                f"{label}: only {len(watch.bound)} of {pods} pods bound ({watch.error})"
            )
        cpu_after = _cpu_seconds(extender) if extender else {}
        machine = (_machine_cpu_seconds() - machine_before) * 1e3 / pods
        programs_after = _machine_cpu_by_process() if machine_cpu else {}
    finally:
        process.stop()
        watch.close()
    assert watch.first is not None and watch.last is not None
    elapsed = watch.last - watch.first
    rate = pods / elapsed
    cpu_ms = None
    cpu = ""
    if extender:
        # Per process, largest first: the one answering kube-scheduler, then those that only
        # keep their snapshot current (uvicorn's other workers).
        spent = sorted(
            (cpu_after[pid] - cpu_before.get(pid, 0.0) for pid in cpu_after), reverse=True
        )
        cpu_ms = sum(spent) * 1e3 / pods
        split = " + ".join(f"{s * 1e3 / pods:.2f}" for s in spent)
        cpu = f"; extender CPU {cpu_ms:.3f} ms/pod ({split} over {len(spent)} processes)"
    if machine_cpu:
        cpu += f"; machine CPU {machine:.2f} ms/pod"
    print(f"  {label:26s} {pods} pods in {elapsed:6.2f} s = {rate:7.1f} pods/s{cpu}")
    if machine_cpu:
        by_program = _by_program(programs_before, programs_after)
        top = ", ".join(f"{name} {seconds * 1e3 / pods:.2f}" for seconds, name in by_program[:7])
        print(f"  {'':26s} machine CPU ms/pod by program: {top}")
    return rate, cpu_ms


QUIET_CORES = 0.35  # a machine below this much CPU over QUIET_WINDOW seconds is quiet
QUIET_WINDOW = 1.0
QUIET_TIMEOUT = 90.0


def _machine_quiet(label: str) -> None:
    """Waits until the whole machine spends less than QUIET_CORES cores over QUIET_WINDOW
    seconds (at most QUIET_TIMEOUT), and prints how long that took and the CPU spent meanwhile:
    what one run leaves to do after its last bind (a shadow lane's queued bodies, the Celery
    worker's records, the API server's deletions) lands there, not in the next run, whichever
    configuration that is."""
    started = time.monotonic()
    spent_before = _machine_cpu_seconds()
    while True:
        before = _machine_cpu_seconds()
        time.sleep(QUIET_WINDOW)
        cores = (_machine_cpu_seconds() - before) / QUIET_WINDOW
        waited = time.monotonic() - started
        if cores < QUIET_CORES or waited >= QUIET_TIMEOUT:
            break
    spent = _machine_cpu_seconds() - spent_before
    state = "quiet" if cores < QUIET_CORES else f"still at {cores:.2f} cores"
    print(f"  {'':26s} before {label}: {state} after {waited:.1f} s ({spent:.2f} CPU s meanwhile)")


def _pods_delete(plane, tag: str, settled: Callable[[], bool] | None = None) -> None:
    """Removes run `tag`'s pods at once (no kubelet confirms a graceful delete) and the
    namespace's events, and waits until the API server lists no pod and `settled()` holds (the
    extender's snapshot has let go of them), so that the next run starts from the cluster this
    one started from."""
    selector = f"labelSelector=run%3D{tag}"
    plane.api.delete(f"/api/v1/namespaces/default/pods?{selector}", grace_period_seconds=0)
    # and kube-scheduler's events about them (a "Scheduled" one per pod, kept an hour)
    plane.api.delete("/api/v1/namespaces/default/events")
    deadline = time.monotonic() + 300
    while plane.api.get(f"/api/v1/namespaces/default/pods?{selector}&limit=1")["items"] or (
        settled is not None and not settled()
    ):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the pods of run {tag} were not gone within 300 s")
        time.sleep(0.2)


def _rounds(
    plane,
    runs: dict,
    *,
    pods: int,
    first_run: int,
    listeners: dict[str, int],
    extender: int | None = None,
    fresh: Callable[[], bool] | None = None,
    quiet: bool = False,
    count: int = ROUNDS,
):
    """ROUNDS alternated rounds of `runs` (name -> (config, schedulerName, label)); "without"
    first, the others in an order that turns each round. Listeners (name -> pid) not under
    measurement are paused; `extender`: the one listener every run uses, measured in each. Every
    run prints the machine's CPU per pod by program: this 2-core machine is saturated in these
    runs (issue 28: at 5000 nodes 1.9-2.0 cores busy with schedweb and with the protocol-only
    extender alike), so a cost anywhere slows kube-scheduler. Returns [{name: (rate, cpu ms per
    pod)}].

    With `fresh` (a check that the extender's snapshot holds no bench pods), each run's pods
    are deleted after it and every run starts from the same cluster; the others' order rotates
    each round and "without" comes first in odd rounds, last in even ones. Otherwise pods
    accumulate: each run schedules into a cluster 1000 pods fuller than the one before, a
    little slower, and the run that always comes second (as the one other run after "without"
    did) pays for it in its ratio.

    With `quiet`, each run starts on a quiet machine (_machine_quiet): a configuration whose
    work outlasts its run (a shadow's) would otherwise slow whichever run comes next, and the
    rounds' ratios alternated between 0.8 and 1.0 with the order."""
    others = [name for name in runs if name != "without"]
    rounds = []
    for number in range(count):
        if fresh is None:
            order = ["without", *(others if number % 2 == 0 else list(reversed(others)))]
        else:  # the others rotated (reversing them and the whole order too left them as they were)
            turn = number % len(others)
            order = ["without", *others[turn:], *others[:turn]]
            if number % 2 == 1:
                order = [*order[1:], "without"]
        rates = {}
        for name in order:
            config, scheduler_name, label = runs[name]
            idle = [pid for listener, pid in listeners.items() if listener != name]
            if quiet:
                _machine_quiet(label)
            with _paused(idle):
                rates[name] = _throughput(
                    plane,
                    config,
                    scheduler_name,
                    label,
                    first_run + number,
                    pods=pods,
                    extender=listeners.get(name, extender),
                    machine_cpu=True,
                )
            if fresh is not None:
                _pods_delete(plane, f"{scheduler_name}-{first_run + number}", fresh)
        rounds.append(rates)
        ratios = ", ".join(f"{name} {rates[name][0] / rates['without'][0]:.2f}" for name in others)
        print(f"  round {number + 1}: with/without {ratios}")
    return rounds
