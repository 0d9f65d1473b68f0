"""The Celery worker's broker connection survives Redis going away with a message unacked."""

from __future__ import annotations

import pytest
from kombu.common import ignore_errors

from schedweb.celery import app
from tests.e2e.stack import RedisServer


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def test_a_worker_survives_restoring_unacked_messages_after_the_connection_is_gone(
    redis_server,
):
    """The state kombu 5.7 reaches when Redis drops under a busy worker: a delivered, unacked
    message and a channel whose transport already let go of its connection. Closing the
    channel then restores the message through that connection; the AttributeError it raised
    ended the worker (seen in tests/e2e/test_resilience.py). Now it is logged and Redis
    redelivers the message after the visibility timeout."""
    connection = app.connection_for_read(redis_server.url)
    connection.ensure_connection(max_retries=3)
    channel = connection.default_channel
    queue = app.amqp.queues["celery"]
    queue(channel).declare()
    with app.connection_for_write(redis_server.url) as writer:
        writer.Producer().publish({"x": 1}, exchange=queue.exchange, routing_key=queue.routing_key)
    message = queue(channel).get(no_ack=False)  # delivered, not acknowledged
    assert message is not None and channel.qos._delivered
    redis_server.stop()
    channel._pool = None  # the pool went with the lost connection
    channel.connection.client = None  # what kombu.Connection._do_close_transport leaves
    assert channel.qos.restore_unacked() is None  # raised AttributeError ('hostname') before
    ignore_errors(connection, connection.close)
