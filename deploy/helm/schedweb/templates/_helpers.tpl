{{/* Names: <release>-schedweb unless the release name already contains "schedweb". */}}
{{- define "schedweb.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "schedweb.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: include "schedweb.selector" (list . "web") */}}
{{- define "schedweb.selector" -}}
{{- $ctx := index . 0 -}}
app.kubernetes.io/name: {{ $ctx.Chart.Name }}
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "schedweb.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "schedweb.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "schedweb.fullname" .) -}}
{{- end -}}

{{- define "schedweb.secretName" -}}
{{- .Values.existingSecret | default (printf "%s-secrets" (include "schedweb.fullname" .)) -}}
{{- end -}}

{{- define "schedweb.tlsSecretName" -}}
{{- .Values.tls.existingSecret | default (printf "%s-extender-tls" (include "schedweb.fullname" .)) -}}
{{- end -}}

{{- define "schedweb.schedulerNamespace" -}}
{{- .Values.scheduler.namespace | default .Release.Namespace -}}
{{- end -}}

{{- define "schedweb.schedulerTlsSecret" -}}
{{- .Values.scheduler.tlsSecret | default (printf "%s-extender-tls" .Values.scheduler.name) -}}
{{- end -}}

{{/* The extender Service's in-cluster DNS name: what kube-scheduler calls, what the server
certificate must name, what SCHEDWEB_EXTENDER_ALLOWED_HOSTS accepts. */}}
{{- define "schedweb.extenderHost" -}}
{{- printf "%s-extender.%s.svc" (include "schedweb.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "schedweb.extenderUrl" -}}
{{- printf "https://%s:%d/extender/" (include "schedweb.extenderHost" .) (int .Values.extender.port) -}}
{{- end -}}

{{- define "schedweb.webHost" -}}
{{- printf "%s-web.%s.svc" (include "schedweb.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* Preferred (or required) anti-affinity across nodes for one component. */}}
{{- define "schedweb.affinity" -}}
{{- $ctx := index . 0 -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (fromYaml (include "schedweb.selector" .))) -}}
podAntiAffinity:
{{- if eq $ctx.Values.antiAffinity "required" }}
  requiredDuringSchedulingIgnoredDuringExecution:
    - {{- toYaml $term | nindent 6 }}
{{- else }}
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm: {{- toYaml $term | nindent 8 }}
{{- end }}
{{- end -}}

{{/* Environment every schedweb container shares: settings and the Secret's values. */}}
{{- define "schedweb.env" -}}
- name: SCHEDWEB_SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ include "schedweb.secretName" . }}, key: secret-key}}
- name: SCHEDWEB_DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ include "schedweb.secretName" . }}, key: database-url}}
- name: SCHEDWEB_REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ include "schedweb.secretName" . }}, key: redis-url}}
- name: SCHEDWEB_DEBUG
  value: "0"
- name: SCHEDWEB_ALLOWED_HOSTS
  value: {{ join "," (append .Values.allowedHosts (include "schedweb.webHost" .)) | quote }}
- name: SCHEDWEB_HTTPS
  value: {{ ternary "1" "0" .Values.https | quote }}
- name: SCHEDWEB_BEHIND_PROXY
  value: {{ ternary "1" "0" .Values.behindProxy | quote }}
- name: SCHEDWEB_CLUSTER_SOURCE
  value: live
- name: SCHEDWEB_CLUSTER_NAME
  value: {{ .Values.clusterName | quote }}
- name: SCHEDWEB_EXTENDER_BIND
  value: {{ ternary "1" "0" .Values.bind | quote }}
- name: SCHEDWEB_EXTENDER_URL
  value: {{ include "schedweb.extenderUrl" . | quote }}
- name: SCHEDWEB_METRICS_DIR
  value: /tmp/metrics
- name: SCHEDWEB_EXTENDER_SCHEDULER_CA
  value: {{ .Values.schedulerTlsFiles.ca | quote }}
- name: SCHEDWEB_EXTENDER_SCHEDULER_CERT
  value: {{ .Values.schedulerTlsFiles.cert | quote }}
- name: SCHEDWEB_EXTENDER_SCHEDULER_KEY
  value: {{ .Values.schedulerTlsFiles.key | quote }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* /tmp: the only writable place (the root filesystem is read-only). */}}
{{- define "schedweb.tmpVolume" -}}
- name: tmp
  emptyDir: {sizeLimit: 256Mi}
{{- end -}}

{{- define "schedweb.podSpecCommon" -}}
securityContext: {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "schedweb.probeSecretName" -}}
{{- .Values.tls.probeSecret | default (printf "%s-extender-probe" (include "schedweb.fullname" .)) -}}
{{- end -}}

{{- define "schedweb.probeHeaders" -}}
[{name: Host, value: {{ include "schedweb.webHost" . }}}, {name: X-Forwarded-Proto, value: https}]
{{- end -}}
