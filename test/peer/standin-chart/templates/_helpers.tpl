{{- /* Names and labels as the real chart makes them (projectPrefix capi.stackhpc.com). */ -}}
{{- define "standin.chart" -}}
{{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
{{- define "standin.selectorLabels" -}}
{{ .Values.projectPrefix }}/cluster: {{ .Release.Name }}
{{- end -}}
{{- define "standin.labels" -}}
helm.sh/chart: {{ include "standin.chart" . }}
{{ .Values.projectPrefix }}/managed-by: {{ .Release.Service }}
{{ .Values.projectPrefix }}/infrastructure-provider: openstack
{{ include "standin.selectorLabels" . }}
{{- end -}}
{{- /* (list $ "component") */ -}}
{{- define "standin.componentSelectorLabels" -}}
{{ include "standin.selectorLabels" (index . 0) }}
{{ (index . 0).Values.projectPrefix }}/component: {{ index . 1 }}
{{- end -}}
{{- define "standin.componentLabels" -}}
helm.sh/chart: {{ include "standin.chart" (index . 0) }}
{{ (index . 0).Values.projectPrefix }}/managed-by: {{ (index . 0).Release.Service }}
{{ (index . 0).Values.projectPrefix }}/infrastructure-provider: openstack
{{ include "standin.componentSelectorLabels" . }}
{{- end -}}
{{- define "standin.version" -}}
v{{ trimPrefix "v" .Values.kubernetesVersion }}
{{- end -}}
{{- define "standin.cloudCredentials" -}}
identityRef:
  name: {{ .Values.cloudCredentialsSecretName | default (printf "%s-cloud-credentials" .Release.Name) }}
  cloudName: {{ .Values.cloudName }}
{{- end -}}
{{- /* The real chart names machine and kubeadm config templates after a checksum of their spec
(templates are immutable: a changed spec is a new template, which rolls the machines). */ -}}
{{- define "standin.checksummed" -}}
{{ index . 0 }}-{{ index . 1 | sha256sum | trunc 8 }}
{{- end -}}
