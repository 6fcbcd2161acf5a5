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
{{- $owned := list "kubeconfig" "metrics_bind" "leader_election" "leader_election_namespace" }}
{{- if .Values.tenantAPI.enabled }}
{{- $owned = concat $owned (list "tenant_view" "tenant_api" "token_webhook_bind" "token_webhook_cert_file" "token_webhook_key_file") }}
# The tenant API (tenantAPI.enabled) and the tenant view it needs: the token webhook's listener, behind
# the Service {{ include "mcb.fullname" . }}-webhook, also serves the admission webhook of MagnumClusters.
tenant_view = true
tenant_api = true
token_webhook_bind = 0.0.0.0:{{ .Values.tenantAPI.webhook.port }}
token_webhook_cert_file = {{ include "mcb.webhookCertDir" . }}/tls.crt
token_webhook_key_file = {{ include "mcb.webhookCertDir" . }}/tls.key
{{- end }}
{{- range $k, $v := .Values.config.bridge }}
{{- if has $k $owned }}
{{- fail (printf "config.bridge.%s is set by the chart" $k) }}
{{- end }}
{{ $k }} = {{ $v }}
{{- end }}
{{- end -}}

{{/* Where the pod mounts tenantAPI.webhook.tlsSecret. */}}
{{- define "mcb.webhookCertDir" -}}
/etc/magnum-capi-bridge-webhook
{{- end -}}

{{/* tenantAPI.enabled needs its certificate and CA. */}}
{{- define "mcb.checkTenantAPI" -}}
{{- if .Values.tenantAPI.enabled }}
{{- if not .Values.tenantAPI.webhook.tlsSecret }}
{{- fail "tenantAPI.enabled needs tenantAPI.webhook.tlsSecret (a kubernetes.io/tls Secret with the webhook's serving certificate)" }}
{{- end }}
{{- if not .Values.tenantAPI.webhook.caBundle }}
{{- fail "tenantAPI.enabled needs tenantAPI.webhook.caBundle (the base64 PEM of the CA that signed tenantAPI.webhook.tlsSecret)" }}
{{- end }}
{{- end }}
{{- end -}}
