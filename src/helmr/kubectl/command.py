"""The ``kubectl-helmr`` command: the ``helmr`` command groups over a discovered endpoint."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import click

from helmr.cli.main import COMMANDS
from helmr.cli.runtime import Settings
from helmr.client import Client
from helmr.kubectl.discovery import Request, Route, context_namespace, endpoint


def connect(request: Request) -> Client:
    found = endpoint(request)
    return Client(found.url, headers=found.headers, ssl=found.ssl)


@click.group()
@click.option("--kubeconfig", help="The kubeconfig (default: KUBECONFIG, then ~/.kube/config).")
@click.option("--context", help="The kubeconfig context (default: the current one).")
@click.option(
    "-n",
    "--namespace",
    help="Where to look for the Helmr Service first (then every namespace), and the "
    "default namespace of `session start` (default: the context's namespace).",
)
@click.option("--service", metavar="NAMESPACE/NAME", help="The Helmr Service; skips the search.")
@click.option(
    "--as-service-account",
    "service_account",
    metavar="NAMESPACE/NAME",
    help="Call Helmr with a token minted for this service account (TokenRequest): for "
    "kubeconfigs without a bearer token, e.g. client certificates.",
)
@click.option(
    "--route",
    type=click.Choice(["auto", "direct", "apiserver"]),
    default="auto",
    show_default=True,
    help="direct: the Service's ClusterIP; apiserver: the apiserver's Service proxy; "
    "auto: direct when this machine reaches the ClusterIP.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.version_option(package_name="helmr")
@click.pass_context
def main(
    ctx: click.Context,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    service: str | None,
    service_account: str | None,
    route: str,
    as_json: bool,
) -> None:
    """Helmr sessions, with the API found from your kubeconfig."""
    request = Request(kubeconfig, context, namespace, service, service_account, cast(Route, route))
    # As with kubectl, the context's namespace when none is given.
    request = replace(request, namespace=namespace or context_namespace(request))
    ctx.obj = Settings(None, None, as_json, connect=lambda: connect(request))
    if request.namespace:
        ctx.default_map = {"session": {"start": {"namespace": request.namespace}}}


for command in COMMANDS:
    main.add_command(command)
