"""A protocol-only extender for `make bench` (issue 13); not part of the product.

The shipped listener as it is (uvicorn, the direct path of schedweb/extender_http.py, mutual TLS
when the settings say so), but filter passes every candidate and prioritize gives each the same
score: no policy, no evaluation, no snapshot updates after start. kube-scheduler's throughput
with it, over its throughput without an extender, is the most any extender answering from
Python over this wire can reach on the machine: the price of the protocol itself (kube-scheduler
encoding the Pod and names, decoding a 500-entry answer twice per pod; the round trips).

`python -m bench.passthrough` with the extender's settings in the environment.
"""

from __future__ import annotations

import os

SCORE = 5


def _filter(self, body: bytes, attempt=None, *, inline: bool = False):
    from policies.extender import protocol
    from policies.extender.service import Answer

    try:
        args = protocol.parse_extender_args(body)
    except protocol.ProtocolError as exc:
        return Answer(400, protocol.error_body(str(exc)))
    passed = protocol.filter_result(
        passed=args.node_names, failed={}, unresolvable={}, nodes=args.nodes
    )
    return Answer(200, passed, "passthrough")


def _prioritize(self, body: bytes, attempt=None, *, inline: bool = False):
    from policies.extender import protocol
    from policies.extender.service import Answer

    try:
        args = protocol.parse_extender_args(body)
    except protocol.ProtocolError as exc:
        return Answer(400, protocol.error_body(str(exc)))
    scores = [(name, SCORE) for name in args.node_names]
    return Answer(200, protocol.host_priority_list(scores), "passthrough")


def _replace_verbs() -> None:
    from policies.extender.runtime import ExtenderRuntime
    from policies.extender.service import Extender

    Extender.filter = _filter
    Extender.prioritize = _prioritize
    ExtenderRuntime.snapshot_refresh = lambda self: None  # nothing reads the snapshot
    ExtenderRuntime._events_key = lambda self: None  # nor follows its changes


def main() -> None:
    from schedweb.extender_server import main as serve

    os.environ["SCHEDWEB_EXTENDER_WORKERS"] = "1"  # one process: the replacements hold
    serve(prepare=_replace_verbs)


if __name__ == "__main__":
    main()
