{{/* The release's name for every object, at most 52 characters (a CronJob's limit). */}}
{{- define "gates.fullname" -}}
{{- printf "%s-gates" .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "gates.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gates.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gates.labels" -}}
app.kubernetes.io/name: gates
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* A ConfigMap key for a gate file's path (keys cannot hold `/`). */}}
{{- define "gates.fileKey" -}}
{{- . | replace "/" "__" -}}
{{- end -}}
