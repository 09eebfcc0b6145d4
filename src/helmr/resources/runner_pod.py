"""An Actor's settings of its runner pods: a deliberate subset of a pod's spec.

Not a pod template: a runner pod runs untrusted agent code, so it keeps the
`restricted` Pod Security Standard and its runner identity whatever an Actor
says. What could loosen either (host namespaces, privileged containers,
volumes, another service account, an automounted API token, security
contexts) has no field here: the apiserver prunes it, or refuses it under
strict field validation (kubectl's default) naming the field. What is here
is what a platform needs to place and pull a runner: pull Secrets, a
RuntimeClass (gVisor, Kata), a priority class, placement, labels and
annotations. The operator merges these with the chart's ``runner.*``
defaults (``helmr.operator.runners.pods``).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field

from helmr.resources.base import JsonDict, WireModel, cel, rules
from helmr.resources.fields import DnsLabel, DnsSubdomain

# A label or annotation key: an optional DNS-subdomain prefix and a name of at
# most 63 characters, as Kubernetes validates it (the prefix's own bound of 253
# is left to the apiserver's pod validation).
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$"
)
LABEL_KEY_MAX = 317
_LABEL_KEY = re.compile(LABEL_KEY_PATTERN)
LabelKey = Annotated[str, Field(max_length=LABEL_KEY_MAX, pattern=LABEL_KEY_PATTERN)]
LabelValue = Annotated[
    str, Field(max_length=63, pattern=r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
]

HELMR_PREFIX = "helmr.dev/"
"""Label and annotation keys under it are Helmr's own."""
SECURITY_PROFILE_PREFIXES = (
    "container.apparmor.security.beta.kubernetes.io/",
    "seccomp.security.alpha.kubernetes.io/",
    "container.seccomp.security.alpha.kubernetes.io/",
)
"""Annotations that set a container's AppArmor or seccomp profile: Helmr sets
the runner's in its security context, and an unconfined one breaks `restricted`."""


def _label_key(key: str) -> str:
    # Map keys have no schema in a CRD: Python checks them here, the apiserver by CEL.
    if len(key) > LABEL_KEY_MAX or not _LABEL_KEY.match(key):
        raise ValueError(f"{key!r} is not a label key (an optional DNS prefix and a name)")
    return key


_MapKey = Annotated[str, AfterValidator(_label_key)]


# The apiserver names the map in the message; these say what is wrong with a key.
_KEYS_ARE_LABEL_KEYS = cel(
    f"self.all(k, size(k) <= {LABEL_KEY_MAX} && k.matches(r'{LABEL_KEY_PATTERN}'))",
    "every key must be a label key: an optional DNS prefix and a name of at most 63"
    " characters (for example `example.com/team`)",
)
_KEYS_NOT_HELMRS = cel(
    f"self.all(k, !k.startsWith('{HELMR_PREFIX}'))", f"keys under {HELMR_PREFIX} are Helmr's own"
)

Labels = Annotated[
    dict[_MapKey, LabelValue],
    Field(max_length=32, json_schema_extra=rules(_KEYS_ARE_LABEL_KEYS)),
]
"""Labels to match (a node selector, a label selector's ``matchLabels``)."""
ExtraLabels = Annotated[
    dict[_MapKey, LabelValue],
    Field(max_length=32, json_schema_extra=rules(_KEYS_ARE_LABEL_KEYS, _KEYS_NOT_HELMRS)),
]
ExtraAnnotations = Annotated[
    dict[_MapKey, Annotated[str, Field(max_length=4096)]],
    Field(
        max_length=32,
        json_schema_extra=rules(
            _KEYS_ARE_LABEL_KEYS,
            _KEYS_NOT_HELMRS,
            cel(
                "self.all(k, "
                + " && ".join(f"!k.startsWith('{p}')" for p in SECURITY_PROFILE_PREFIXES)
                + ")",
                "AppArmor and seccomp profile annotations are refused: Helmr sets the runner's"
                " profiles itself",
            ),
        ),
    ),
]
Values = Annotated[
    list[Annotated[LabelValue, Field(description="A label value.")]], Field(max_length=32)
]
LabelKeys = Annotated[
    list[Annotated[LabelKey, Field(description="A label key.")]], Field(max_length=16)
]
Weight = Annotated[int, Field(ge=1, le=100)]


def _values_fit_the_operator(*, comparisons: bool) -> JsonDict:
    """A requirement's ``values``: some for In/NotIn, none for Exists/DoesNotExist
    and, for a node's labels (``comparisons``), one integer for Gt/Lt."""
    count = "(has(self.values) ? size(self.values) : 0)"
    gt_lt = f"self.operator in ['Gt', 'Lt'] ? {count} == 1 : " if comparisons else ""
    return cel(
        f"self.operator in ['In', 'NotIn'] ? {count} > 0 : {gt_lt}{count} == 0",
        "values: some for In and NotIn, none for Exists and DoesNotExist"
        + (", one integer for Gt and Lt" if comparisons else ""),
        field_path=".values",
    )


class LocalObjectReference(WireModel):
    """An object in the Actor's namespace, by name."""

    name: DnsSubdomain = Field(description="Its name.")


class Toleration(WireModel):
    """A taint runner pods tolerate, as in a pod's `tolerations`."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            cel(
                "!has(self.operator) || self.operator != 'Exists' || !has(self.value)"
                " || self.value == ''",
                "value must be empty when operator is Exists",
                field_path=".value",
            ),
            cel(
                "has(self.key) || (has(self.operator) && self.operator == 'Exists')",
                "operator must be Exists when key is empty (a toleration of every taint)",
                field_path=".operator",
            ),
            cel(
                "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
                "tolerationSeconds is only for effect NoExecute",
                field_path=".tolerationSeconds",
            ),
        )
    )

    key: LabelKey | None = Field(
        default=None, description="The taint's key; empty with `Exists`: every taint."
    )
    operator: Literal["Exists", "Equal"] | None = Field(
        default=None, description="`Equal` (the default) matches `value`; `Exists` any value."
    )
    value: LabelValue | None = Field(default=None, description="The taint's value, for `Equal`.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="The taint effect it tolerates; empty: every effect."
    )
    toleration_seconds: int | None = Field(
        default=None,
        ge=0,
        le=31_536_000,
        description="With `NoExecute`: how long the pod stays bound after the taint appears.",
    )


class NodeSelectorRequirement(WireModel):
    """A requirement on a node's labels."""

    model_config = ConfigDict(json_schema_extra=rules(_values_fit_the_operator(comparisons=True)))

    key: LabelKey = Field(description="The node label's key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] = Field(
        description="How the label's value relates to `values`."
    )
    values: Values | None = Field(default=None, description="The values `operator` compares.")


class NodeSelectorTerm(WireModel):
    """Node requirements that must all hold."""

    match_expressions: list[NodeSelectorRequirement] = Field(
        min_length=1, max_length=16, description="Requirements on the node's labels, ANDed."
    )


class NodeSelector(WireModel):
    """Node selector terms, any of which may hold."""

    node_selector_terms: list[NodeSelectorTerm] = Field(
        min_length=1, max_length=8, description="Terms, ORed."
    )


class PreferredSchedulingTerm(WireModel):
    """A weighted node preference."""

    weight: Weight = Field(description="Its weight, 1 to 100, in the scheduler's scoring.")
    preference: NodeSelectorTerm = Field(description="The nodes preferred.")


class NodeAffinity(WireModel):
    """Which nodes runner pods must, or would rather, run on."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = Field(
        default=None, description="Nodes a runner pod may only be scheduled on."
    )
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = (
        Field(default=None, max_length=8, description="Nodes the scheduler prefers.")
    )


class LabelSelectorRequirement(WireModel):
    """A requirement on a pod's or namespace's labels."""

    model_config = ConfigDict(json_schema_extra=rules(_values_fit_the_operator(comparisons=False)))

    key: LabelKey = Field(description="The label's key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="How the label's value relates to `values`."
    )
    values: Values | None = Field(default=None, description="The values `operator` compares.")


class LabelSelector(WireModel):
    """Labels to select by: all of `matchLabels` and `matchExpressions` hold."""

    match_labels: Labels | None = Field(default=None, description="Labels that must equal.")
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None, max_length=16, description="Requirements, ANDed."
    )


class PodAffinityTerm(WireModel):
    """Pods (by labels) a runner pod must, or must not, share a topology domain with."""

    label_selector: LabelSelector | None = Field(default=None, description="The pods.")
    namespaces: list[Annotated[DnsLabel, Field(description="A namespace.")]] | None = Field(
        default=None,
        max_length=16,
        description="Their namespaces; empty, with no `namespaceSelector`: the runner pod's.",
    )
    namespace_selector: LabelSelector | None = Field(
        default=None, description="Their namespaces, by label; `{}`: every namespace."
    )
    topology_key: LabelKey = Field(
        description="The node label whose value is the domain (`kubernetes.io/hostname`: a node)."
    )


class WeightedPodAffinityTerm(WireModel):
    """A weighted pod (anti-)affinity preference."""

    weight: Weight = Field(description="Its weight, 1 to 100, in the scheduler's scoring.")
    pod_affinity_term: PodAffinityTerm = Field(description="The term.")


class PodAffinity(WireModel):
    """Pods that runner pods must, or would rather, be near (or, as anti-affinity, away from)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = Field(
        default=None, max_length=8, description="Terms that must hold, ANDed."
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = (
        Field(default=None, max_length=8, description="Terms the scheduler prefers.")
    )


class Affinity(WireModel):
    """Scheduling constraints of runner pods, as in a pod's `affinity`."""

    node_affinity: NodeAffinity | None = Field(default=None, description="Node affinity.")
    pod_affinity: PodAffinity | None = Field(default=None, description="Pod affinity.")
    pod_anti_affinity: PodAffinity | None = Field(default=None, description="Pod anti-affinity.")


class TopologySpreadConstraint(WireModel):
    """How runner pods spread over topology domains, as in a pod's `topologySpreadConstraints`."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            cel(
                "!has(self.minDomains) || self.whenUnsatisfiable == 'DoNotSchedule'",
                "minDomains is only for whenUnsatisfiable DoNotSchedule",
                field_path=".minDomains",
            )
        )
    )

    max_skew: int = Field(ge=1, le=1000, description="Largest difference of matching pods.")
    topology_key: LabelKey = Field(description="The node label whose value is the domain.")
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = Field(
        description="Whether a pod that would exceed `maxSkew` waits or is scheduled anyway."
    )
    label_selector: LabelSelector | None = Field(
        default=None, description="The pods counted (for example `helmr.dev/component: runner`)."
    )
    min_domains: int | None = Field(
        default=None, ge=1, le=1000, description="Least number of eligible domains."
    )
    match_label_keys: LabelKeys | None = Field(
        default=None,
        description="Label keys whose values, taken from the pod, narrow `labelSelector`.",
    )
    node_affinity_policy: Literal["Honor", "Ignore"] | None = Field(
        default=None, description="Whether the pod's node affinity limits the domains counted."
    )
    node_taints_policy: Literal["Honor", "Ignore"] | None = Field(
        default=None, description="Whether nodes' taints limit the domains counted."
    )


class RunnerPodSettings(WireModel):
    """Settings of an Actor's runner pods, merged with the chart's `runner.*` defaults.

    Only these fields exist: host namespaces, privilege, volumes, security
    contexts, the service account and its token stay Helmr's.
    """

    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None,
        max_length=16,
        description="Secrets (`kubernetes.io/dockerconfigjson`) to pull the runner image with.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    runtime_class_name: DnsSubdomain | None = Field(
        default=None,
        description="The RuntimeClass runner pods run under (a sandbox such as gVisor or Kata).",
    )
    priority_class_name: DnsSubdomain | None = Field(
        default=None,
        description="The PriorityClass of runner pods; the `system-` classes are refused.",
        json_schema_extra=rules(
            cel(
                "!self.startsWith('system-')",
                "the system- priority classes are for the cluster's own components",
            )
        ),
    )
    node_selector: Labels | None = Field(
        default=None,
        description="Node labels runner pods require; the chart's `runner.nodeSelector` wins"
        " for a key both set.",
    )
    tolerations: list[Toleration] | None = Field(
        default=None,
        max_length=16,
        description="Taints runner pods tolerate, after the chart's `runner.tolerations`.",
    )
    affinity: Affinity | None = Field(default=None, description="Node and pod (anti-)affinity.")
    topology_spread_constraints: list[TopologySpreadConstraint] | None = Field(
        default=None, max_length=8, description="How runner pods spread over topology domains."
    )
    labels: ExtraLabels | None = Field(
        default=None,
        description="Extra labels of runner pods; keys under `helmr.dev/` are Helmr's own.",
    )
    annotations: ExtraAnnotations | None = Field(
        default=None,
        description="Extra annotations of runner pods; keys under `helmr.dev/` and AppArmor or"
        " seccomp profile annotations are refused.",
    )
