"""The local cluster is a real one: pods, limits, RBAC and Services work."""

from __future__ import annotations

import textwrap
import time

from kubernetes import client

from .pods import finished, python_pod, ready, wait_pod


def test_pod_from_local_image_succeeds_and_its_log_is_readable(
    core: client.CoreV1Api, namespace: str
) -> None:
    code = "import platform; print('node', platform.node(), 'kernel', platform.release())"
    core.create_namespaced_pod(namespace, python_pod("smoke", code))

    pod = wait_pod(core, namespace, "smoke", finished)

    assert pod.status.phase == "Succeeded"
    log = core.read_namespaced_pod_log("smoke", namespace)
    assert log.startswith("node smoke kernel ")


def test_memory_limit_is_enforced(core: client.CoreV1Api, namespace: str) -> None:
    hog = "chunks = []\nwhile True: chunks.append(bytearray(8 << 20))"
    core.create_namespaced_pod(namespace, python_pod("hog", hog, memory_limit="48Mi"))

    pod = wait_pod(core, namespace, "hog", finished)

    terminated = pod.status.container_statuses[0].state.terminated
    assert pod.status.phase == "Failed"
    assert terminated.reason == "OOMKilled"


def test_rbac_role_decides_access(api_client: client.ApiClient, namespace: str) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_namespaced_role(
        namespace,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="pod-reader"),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get", "list"])],
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="alice-reads-pods"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="pod-reader"
            ),
            subjects=[
                client.RbacV1Subject(
                    kind="User", name="alice", api_group="rbac.authorization.k8s.io"
                )
            ],
        ),
    )
    authz = client.AuthorizationV1Api(api_client)

    def allowed(user: str, verb: str, ns: str) -> bool:
        review = client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user=user,
                resource_attributes=client.V1ResourceAttributes(
                    namespace=ns, verb=verb, resource="pods"
                ),
            )
        )
        return bool(authz.create_subject_access_review(review).status.allowed)

    # The RBAC authorizer reads roles from the apiserver's watch cache, which
    # learns of the new binding a moment after it was created: wait for it.
    deadline = time.monotonic() + 30
    while not allowed("alice", "list", namespace):
        assert time.monotonic() < deadline, "the new RoleBinding never took effect"
        time.sleep(0.2)
    assert not allowed("alice", "delete", namespace)
    assert not allowed("alice", "list", "default")
    assert not allowed("bob", "list", namespace)


def test_pod_reaches_cluster_ip_services(core: client.CoreV1Api, namespace: str) -> None:
    server = (
        "import http.server as h;"
        " h.ThreadingHTTPServer(('', 8080), h.SimpleHTTPRequestHandler).serve_forever()"
    )
    core.create_namespaced_pod(namespace, python_pod("web", server, labels={"app": "web"}))
    core.create_namespaced_service(
        namespace,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1ServiceSpec(
                selector={"app": "web"}, ports=[client.V1ServicePort(port=80, target_port=8080)]
            ),
        ),
    )
    wait_pod(core, namespace, "web", ready)

    # By DNS name through CoreDNS and kube-proxy, and the apiserver's own
    # Service, which answers 401 to an anonymous caller: reachable.
    probe = textwrap.dedent(
        f"""
        import ssl, time, urllib.request, urllib.error
        url = "http://web.{namespace}.svc.cluster.local/"
        for attempt in range(60):
            try:
                body = urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                time.sleep(1)
        print("web", len(body) > 0)
        try:
            urllib.request.urlopen("https://kubernetes.default.svc/healthz", timeout=5,
                                   context=ssl._create_unverified_context())
        except urllib.error.HTTPError as e:
            print("kubernetes", e.code)
        """
    )
    core.create_namespaced_pod(namespace, python_pod("probe", probe))

    pod = wait_pod(core, namespace, "probe", finished)

    log = core.read_namespaced_pod_log("probe", namespace)
    assert pod.status.phase == "Succeeded", log
    assert log.split() == ["web", "True", "kubernetes", "401"]
