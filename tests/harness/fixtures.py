"""pytest plugin: the session-wide `control_plane` fixture. It builds nothing; without the
binaries it fails with the command that builds them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.binaries import BinariesMissing, binaries_find
from tests.harness.controlplane import ControlPlane


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A started etcd + kube-apiserver shared by the whole session; tests use unique names."""
    try:
        bin_dir = binaries_find()
    except BinariesMissing as err:
        pytest.fail(str(err), pytrace=False)
    with ControlPlane(tmp_path_factory.mktemp("control-plane"), bin_dir=bin_dir) as plane:
        yield plane
