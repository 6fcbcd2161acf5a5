{{- define "standin.labels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
capi.stackhpc.com/cluster: {{ .Release.Name }}
cluster.x-k8s.io/cluster-name: {{ .Release.Name }}
{{- end -}}
{{- define "standin.version" -}}
v{{ trimPrefix "v" .Values.kubernetesVersion }}
{{- end -}}
