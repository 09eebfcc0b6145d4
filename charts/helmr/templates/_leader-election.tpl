{{/* The Lease the replicas elect their leader by: namespace/name (HELMR_LEADER_LEASE). */}}
{{- define "helmr.leaderLeaseName" -}}
{{- printf "%s-leader" (include "helmr.fullname" .) }}
{{- end }}

{{- define "helmr.leaderLease" -}}
{{- printf "%s/%s" .Release.Namespace (include "helmr.leaderLeaseName" .) }}
{{- end }}
