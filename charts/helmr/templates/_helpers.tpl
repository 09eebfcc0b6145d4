{{/* The chart name, overridable. */}}
{{- define "helmr.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's object name: <release>-helmr, or just <release> when the
release name already contains the chart name (release "helmr" -> "helmr").
Truncated to 63 characters because it names a Service (a DNS label).
*/}}
{{- define "helmr.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "helmr.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable for the life of the release (a Deployment's selector is immutable). */}}
{{- define "helmr.selectorLabels" -}}
app.kubernetes.io/name: {{ include "helmr.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: control-plane
{{- end }}

{{- define "helmr.labels" -}}
helm.sh/chart: {{ include "helmr.chart" . }}
{{ include "helmr.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: helmr
{{- end }}

{{- define "helmr.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "helmr.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* What runner pods are told to call (HELMR_URL). */}}
{{- define "helmr.runnerURL" -}}
{{- if .Values.runner.url }}
{{- .Values.runner.url }}
{{- else }}
{{- printf "http://%s.%s.svc:%d" (include "helmr.fullname" .) .Release.Namespace (int .Values.runner.port) }}
{{- end }}
{{- end }}

{{/* Cluster-scoped objects must not collide between releases in different namespaces. */}}
{{- define "helmr.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace (include "helmr.fullname" .) }}
{{- end }}

{{- define "helmr.claimName" -}}
{{- default (printf "%s-data" (include "helmr.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/* Where `helm test` runs its smoke session: a namespace this release serves. */}}
{{- define "helmr.smokeNamespace" -}}
{{- .Values.tests.namespace | default (first .Values.watchNamespaces) | default .Release.Namespace }}
{{- end }}

{{- /*
The NetworkPolicyPeers runner pods reach the runner API at, as JSON: this
release's control-plane pods, unless runner.networkPolicy.controlPlane says.
*/ -}}
{{- define "helmr.controlPlanePeers" -}}
{{- if .Values.runner.networkPolicy.controlPlane -}}
{{- .Values.runner.networkPolicy.controlPlane | toJson -}}
{{- else -}}
{{- $pods := dict "matchLabels" (include "helmr.selectorLabels" . | fromYaml) -}}
{{- $namespace := dict "matchLabels" (dict "kubernetes.io/metadata.name" .Release.Namespace) -}}
{{- list (dict "namespaceSelector" $namespace "podSelector" $pods) | toJson -}}
{{- end -}}
{{- end }}

{{/* The egress proxy (egressProxy): its objects' name, selector labels and labels. */}}
{{- define "helmr.egressProxy.name" -}}
{{- printf "%s-egress-proxy" (include "helmr.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "helmr.egressProxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "helmr.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: egress-proxy
{{- end }}

{{- define "helmr.egressProxy.labels" -}}
helm.sh/chart: {{ include "helmr.chart" . }}
{{ include "helmr.egressProxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: helmr
{{- end }}

{{/* Where runner pods reach the egress proxy (HTTPS_PROXY). */}}
{{- define "helmr.egressProxy.url" -}}
{{- printf "http://%s.%s.svc:%d" (include "helmr.egressProxy.name" .) .Release.Namespace (int .Values.egressProxy.port) }}
{{- end }}

{{/* The egress proxy's pods as NetworkPolicyPeers (JSON), which runner pods may reach. */}}
{{- define "helmr.egressProxy.peers" -}}
{{- $pods := dict "matchLabels" (include "helmr.egressProxy.selectorLabels" . | fromYaml) -}}
{{- $namespace := dict "matchLabels" (dict "kubernetes.io/metadata.name" .Release.Namespace) -}}
{{- list (dict "namespaceSelector" $namespace "podSelector" $pods) | toJson -}}
{{- end }}

{{/* The runner pods of the namespaces this release serves, as a NetworkPolicy's `from`. */}}
{{- define "helmr.runnerPeers" -}}
- podSelector:
    matchLabels:
      helmr.dev/component: runner
  {{- if .Values.watchNamespaces }}
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          {{- toYaml .Values.watchNamespaces | nindent 10 }}
  {{- else }}
  namespaceSelector: {}
  {{- end }}
{{- end }}
