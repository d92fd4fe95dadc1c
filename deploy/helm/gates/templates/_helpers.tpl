{{/* The release's name for every object, at most 52 characters (a CronJob's limit). */}}
{{- define "gates.fullname" -}}
{{- printf "%s-gates" .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/* A table the values may drop with a null (`watch: ~` drops the chart's defaults): read
as empty, so what it turns on is off and what it must name is asked for, never a nil. */}}
{{- define "gates.serviceAccountName" -}}
{{- $account := .Values.serviceAccount | default dict -}}
{{- if $account.create -}}
{{- default (include "gates.fullname" .) $account.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" $account.name -}}
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

{{/* The image, which gates does not ship: required. */}}
{{- define "gates.image" -}}
{{- $image := .Values.image | default dict -}}
{{ printf "%s:%s" (required "image.repository is required: gates ships no image" $image.repository) (toString (required "image.tag is required" $image.tag)) | quote }}
{{- end -}}

{{/* The pod's security context, the same for the CronJob's and the watch's pods. */}}
{{- define "gates.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* What the gates container needs besides its arguments: secrets as variables, its
     security context and its mounts. */}}
{{- define "gates.containerCommon" -}}
{{- with .Values.secretEnv }}
env:
  {{- range . }}
  - name: {{ .name }}
    valueFrom:
      secretKeyRef: {name: {{ .secretName }}, key: {{ .key }}}
  {{- end }}
{{- end }}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
volumeMounts:
  - {name: config, mountPath: /etc/gates, readOnly: true}
  - {name: reports, mountPath: /reports}
  {{- range $i, $m := .Values.secretMounts }}
  - {name: {{ printf "secret-%d" $i }}, mountPath: {{ $m.mountPath }}, readOnly: true}
  {{- end }}
{{- end -}}

{{/* The configuration (environment and gate files from the ConfigMap), the reports'
     scratch directory, and the secrets. */}}
{{- define "gates.volumes" -}}
- name: config
  configMap:
    name: {{ include "gates.fullname" . }}
    items:
      {{- range $name, $_ := .Values.environmentFiles }}
      - key: {{ printf "environments__%s.yaml" $name }}
        path: {{ printf "environments/%s.yaml" $name }}
      {{- end }}
      {{- range $path, $_ := .Values.gateFiles }}
      - key: {{ include "gates.fileKey" $path }}
        path: {{ $path }}
      {{- end }}
- name: reports
  emptyDir: {}
{{- range $i, $m := .Values.secretMounts }}
- name: {{ printf "secret-%d" $i }}
  secret: {secretName: {{ $m.secretName }}}
{{- end }}
{{- end -}}

{{/* The labels that select the watch's pod (the Deployment's selector, the Service's). */}}
{{- define "gates.watchSelector" -}}
app.kubernetes.io/name: gates
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: watch
{{- end -}}
