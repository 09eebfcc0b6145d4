"""The release both replica tests run on (one per test module): the chart, 2
replicas, on a durable PostgreSQL server of this host (release.node_database)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from kubernetes import client

from helmr.client import Client
from tests.postgres import PostgresServer

from .release import Release, installed_release, node_database


@pytest.fixture(scope="module")
def database() -> Iterator[tuple[PostgresServer, str]]:
    """The server, and the store database's URL as the pods reach it."""
    with node_database() as server_and_url:
        yield server_and_url


@pytest.fixture(scope="module")
def release(
    kubeconfig: str,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    crds: None,
    runner_image: str,
    database: tuple[PostgresServer, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Release]:
    helm_dir = tmp_path_factory.mktemp("helm")
    with installed_release(kubeconfig, api_client, core, database[1], helm_dir) as release:
        yield release


@pytest.fixture
async def helmr(release: Release) -> AsyncIterator[Client]:
    async with Client(release.base_url, headers=release.headers, ssl=release.ssl) as c:
        yield c
