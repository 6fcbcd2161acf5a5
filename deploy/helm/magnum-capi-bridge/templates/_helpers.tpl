{{- define "mcb.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mcb.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mcb.labels" -}}
{{ include "mcb.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The labels of the RBAC and policy objects, which deploy/kubernetes/ also carries. */}}
{{- define "mcb.staticLabels" -}}
app.kubernetes.io/name: magnum-capi-bridge
{{- end -}}

{{/* The bridge's username in the management cluster. */}}
{{- define "mcb.username" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ .Values.serviceAccount.name }}
{{- end -}}

{{- define "mcb.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* bridge.conf: the [bridge] keys the chart owns, then the operator's. */}}
{{- define "mcb.bridgeConf" -}}
# Rendered by the magnum-capi-bridge Helm chart.
[bridge]
# In-cluster: the pod's ServiceAccount token.
kubeconfig =
metrics_bind = 0.0.0.0:{{ .Values.metrics.port }}
# The replicas' Lease lives in the release namespace, where the chart's Role and the admission
# policies allow it.
leader_election = {{ .Values.leaderElection.enabled }}
leader_election_namespace = {{ .Release.Namespace }}
{{- range $k, $v := .Values.config.bridge }}
{{- if has $k (list "kubeconfig" "metrics_bind" "leader_election" "leader_election_namespace") }}
{{- fail (printf "config.bridge.%s is set by the chart" $k) }}
{{- end }}
{{ $k }} = {{ $v }}
{{- end }}
{{- end -}}
