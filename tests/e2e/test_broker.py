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


def _delivered_then_lost(redis_server):
    """(connection, channel, message): a message delivered on the channel and not acknowledged,
    then Redis stopped and the channel left as kombu leaves it once the connection is lost."""
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
    return connection, channel, message


def test_a_worker_survives_restoring_unacked_messages_after_the_connection_is_gone(
    redis_server,
):
    """The state kombu 5.7 reaches when Redis drops under a busy worker: a delivered, unacked
    message and a channel whose transport already let go of its connection. Closing the
    channel then restores the message through that connection; the AttributeError it raised
    ended the worker (seen in tests/e2e/test_resilience.py). Now it is logged and Redis
    redelivers the message after the visibility timeout."""
    connection, channel, _message = _delivered_then_lost(redis_server)
    assert channel.qos.restore_unacked() is None  # raised AttributeError ('hostname') before
    ignore_errors(connection, connection.close)


def test_a_task_finished_after_the_connection_is_gone_acks_without_ending_the_worker(
    redis_server, caplog
):
    """A task delivered before Redis went away and finished after the worker reconnected is
    acked (acks_late) through the closed channel: its connection is None and the ack raised
    AttributeError ('client'), which ended the worker: it received tasks and ran none (seen in
    tests/e2e/test_resilience.py under load). Now the ack is logged and skipped."""
    connection, channel, message = _delivered_then_lost(redis_server)
    ignore_errors(connection, channel.close)  # the consumer closes the channel of the lost link
    assert channel.connection is None  # kombu's close_channel let go of it
    caplog.set_level("WARNING", logger="schedweb.celery")
    message.ack()  # raised AttributeError ('NoneType' object has no attribute 'client') before
    assert "a finished task's ack not sent" in caplog.text
    ignore_errors(connection, connection.close)


def test_an_ack_failing_for_another_reason_still_raises(redis_server):
    """The guard is for the lost connection only: a live channel's errors are not hidden."""
    from kombu.transport import redis as transport

    connection = app.connection_for_read(redis_server.url)
    connection.ensure_connection(max_retries=3)
    channel = connection.default_channel
    qos = channel.qos
    assert isinstance(qos, transport.QoS) and channel.connection is not None
    try:
        qos._remove_from_indices = None  # an AttributeError-free bug would be a TypeError
        with pytest.raises(TypeError):
            qos.ack("no-such-tag")
    finally:
        del qos._remove_from_indices
        ignore_errors(connection, connection.close)
