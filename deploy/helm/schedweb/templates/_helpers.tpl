{{/* The chart's name, or nameOverride. */}}
{{- define "schedweb.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* Names: fullnameOverride, or <release>-<name> unless the release name already contains the
name. At most 50 characters, so that "<fullname>-extender-metrics" fits in 63. */}}
{{- define "schedweb.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "schedweb.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "schedweb.labels" -}}
app.kubernetes.io/name: {{ include "schedweb.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: include "schedweb.selector" (list . "web") */}}
{{- define "schedweb.selector" -}}
{{- $ctx := index . 0 -}}
app.kubernetes.io/name: {{ include "schedweb.name" $ctx }}
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* An image reference: repository@digest when a digest is given, else repository:tag. */}}
{{- define "schedweb.imageRef" -}}
{{- $image := index . 0 -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (toString ($image.tag | default (index . 1))) -}}
{{- end -}}
{{- end -}}

{{- define "schedweb.image" -}}
{{- include "schedweb.imageRef" (list .Values.image .Chart.AppVersion) -}}
{{- end -}}

{{/* A component's values: include "schedweb.values" (list . "web") | fromYaml. The migrations
Job's are .Values.migrations. */}}
{{- define "schedweb.componentValues" -}}
{{- $ctx := index . 0 -}}
{{- $component := index . 1 -}}
{{- toYaml (index $ctx.Values (ternary "migrations" $component (eq $component "migrate"))) -}}
{{- end -}}

{{/* A component's ServiceAccount: <fullname>-<component> unless named. */}}
{{- define "schedweb.serviceAccountName" -}}
{{- $ctx := index . 0 -}}
{{- $values := include "schedweb.componentValues" . | fromYaml -}}
{{- $values.serviceAccount.name | default (printf "%s-%s" (include "schedweb.fullname" $ctx) (index . 1)) -}}
{{- end -}}

{{- define "schedweb.secretName" -}}
{{- .Values.existingSecret | default (printf "%s-secrets" (include "schedweb.fullname" .)) -}}
{{- end -}}

{{- define "schedweb.adminSecretName" -}}
{{- .Values.firstAdmin.existingSecret | default (printf "%s-admin" (include "schedweb.fullname" .)) -}}
{{- end -}}

{{- define "schedweb.metricsSecretName" -}}
{{- .Values.metrics.existingSecret | default (printf "%s-metrics" (include "schedweb.fullname" .)) -}}
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

{{/* The hosts that reach the web pods without the TLS proxy (SCHEDWEB_INTERNAL_HOSTS): kubectl
port-forward's, and the web Service's own names (probes, in-cluster clients, helm test). */}}
{{- define "schedweb.internalHosts" -}}
{{- $service := printf "%s-web" (include "schedweb.fullname" .) -}}
{{- $hosts := list "127.0.0.1" "localhost" "[::1]" $service (printf "%s.%s" $service .Release.Namespace) (include "schedweb.webHost" .) (printf "%s.cluster.local" (include "schedweb.webHost" .)) -}}
{{- join "," $hosts -}}
{{- end -}}

{{/* The public host names: allowedHosts, the Ingress's and the HTTPRoute's. */}}
{{- define "schedweb.publicHosts" -}}
{{- $hosts := .Values.allowedHosts -}}
{{- if .Values.ingress.enabled -}}{{- $hosts = concat $hosts .Values.ingress.hosts -}}{{- end -}}
{{- if .Values.gateway.enabled -}}{{- $hosts = concat $hosts .Values.gateway.hostnames -}}{{- end -}}
{{- join "," ($hosts | uniq) -}}
{{- end -}}

{{/* The scheduling fields of one component's pods: its own nodeSelector, tolerations, affinity
(default: anti-affinity across nodes), topology spread (default: across zones, zoneSpread),
priority class; the chart-wide nodeSelector and tolerations when it sets none. */}}
{{- define "schedweb.scheduling" -}}
{{- $ctx := index . 0 -}}
{{- $component := index . 1 -}}
{{- $values := include "schedweb.componentValues" . | fromYaml -}}
{{- with ($values.nodeSelector | default $ctx.Values.nodeSelector) }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with ($values.tolerations | default $ctx.Values.tolerations) }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $values.affinity }}
affinity: {{- toYaml $values.affinity | nindent 2 }}
{{- else if has $component (list "web" "extender" "worker") }}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "schedweb.selector" . | fromYaml)) }}
affinity:
  podAntiAffinity:
  {{- if eq $ctx.Values.antiAffinity "required" }}
    requiredDuringSchedulingIgnoredDuringExecution:
      - {{- toYaml $term | nindent 8 }}
  {{- else }}
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm: {{- toYaml $term | nindent 10 }}
  {{- end }}
{{- end }}
{{- if $values.topologySpreadConstraints }}
topologySpreadConstraints: {{- toYaml $values.topologySpreadConstraints | nindent 2 }}
{{- else if and $ctx.Values.zoneSpread (has $component (list "web" "extender" "worker")) }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: {{ $ctx.Values.zoneSpread }}
    labelSelector:
      matchLabels: {{- include "schedweb.selector" . | nindent 8 }}
{{- end }}
{{- $priority := $values.priorityClassName }}
{{- if and (not $priority) (eq $component "extender") $ctx.Values.extender.priorityClass.create }}
{{- $priority = printf "%s-extender" (include "schedweb.fullname" $ctx) }}
{{- end }}
{{- with $priority }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* The pod spec fields every schedweb pod shares: its ServiceAccount (a token mounted only when
`token` is true), security context, pull secrets, scheduling. include "schedweb.podSpecCommon"
(list . "web" false) */}}
{{- define "schedweb.podSpecCommon" -}}
{{- $ctx := index . 0 -}}
{{- $component := index . 1 -}}
serviceAccountName: {{ include "schedweb.serviceAccountName" (list $ctx $component) }}
automountServiceAccountToken: {{ index . 2 }}
securityContext: {{- toYaml $ctx.Values.podSecurityContext | nindent 2 }}
{{- with $ctx.Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- include "schedweb.scheduling" (list $ctx $component) }}
{{- end -}}

{{/* A pod template's metadata: selector labels and podLabels; the checksum of the Secret the
chart makes (a change rolls the pods) and podAnnotations. */}}
{{- define "schedweb.podMetadata" -}}
{{- $ctx := index . 0 -}}
{{- $values := include "schedweb.componentValues" . | fromYaml -}}
labels:
  {{- include "schedweb.selector" . | nindent 2 }}
  {{- with $values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  checksum/secret: {{ include "schedweb.secretData" $ctx | sha256sum | quote }}
  {{- with $values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
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
  value: {{ include "schedweb.publicHosts" . | quote }}
- name: SCHEDWEB_INTERNAL_HOSTS
  value: {{ include "schedweb.internalHosts" . | quote }}
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

{{/* Web, worker and beat start once the migrations Job has migrated the database for this
release's image: no pod runs new code on the old schema (the extender reads no table). */}}
{{- define "schedweb.waitForMigrations" -}}
- name: wait-for-migrations
  image: {{ include "schedweb.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: [sh, -c, "until python manage.py migrate --check >/dev/null 2>&1; do echo waiting for the migrations Job; sleep 5; done"]
  env: {{- include "schedweb.env" . | nindent 4 }}
  resources: {{- toYaml .Values.migrations.resources | nindent 4 }}
  securityContext: {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    - {name: tmp, mountPath: /tmp}
{{- end -}}

{{/* A value of a Secret this chart made before (helm upgrade; lookup is empty in helm template
and in a first install): include "schedweb.kept" (list . "<secret name>" "<key>") */}}
{{- define "schedweb.kept" -}}
{{- $ctx := index . 0 -}}
{{- $found := lookup "v1" "Secret" $ctx.Release.Namespace (index . 1) -}}
{{- if and $found $found.data (hasKey $found.data (index . 2)) -}}
{{- index $found.data (index . 2) | b64dec -}}
{{- end -}}
{{- end -}}

{{/* The secret key: secretKey, else the one the installed Secret holds; "" when the Secret
template generates one (a first install, or helm template without secretKey). */}}
{{- define "schedweb.secretKey" -}}
{{- .Values.secretKey | default (include "schedweb.kept" (list . (printf "%s-secrets" (include "schedweb.fullname" .)) "secret-key")) -}}
{{- end -}}

{{- define "schedweb.redisUrl" -}}
{{- if .Values.redis.bundled -}}
{{- printf "redis://%s-redis:6379/0" (include "schedweb.fullname" .) -}}
{{- else -}}
{{- .Values.redis.url -}}
{{- end -}}
{{- end -}}

{{/* What the pods' checksum/secret covers: the chart's Secret's content as the values give it (a
generated key as "generated": it never changes once made), or the name of the operator's Secret
(its content is not the chart's to read: change a podAnnotation to roll the pods after changing
it). */}}
{{- define "schedweb.secretData" -}}
{{- if .Values.existingSecret -}}
existing: {{ .Values.existingSecret }}
{{- else -}}
secret-key: {{ .Values.secretKey | default "generated" | quote }}
database-url: {{ .Values.database.url | quote }}
redis-url: {{ include "schedweb.redisUrl" . | quote }}
{{- end }}
{{- if .Values.metrics.enabled }}
metrics: {{ .Values.metrics.existingSecret | default "generated" | quote }}
{{- end -}}
{{- end -}}

{{- define "schedweb.probeSecretName" -}}
{{- .Values.tls.probeSecret | default (printf "%s-extender-probe" (include "schedweb.fullname" .)) -}}
{{- end -}}

{{/* The web pods' probes name the web Service (an internal host: allowed, answered over plain
HTTP). */}}
{{- define "schedweb.probeHeaders" -}}
[{name: Host, value: {{ include "schedweb.webHost" . }}}]
{{- end -}}

{{/* A memory quantity (512Mi, 3Gi, 2.5G, 1e9, 1073741824) in MiB; "" for none. */}}
{{- define "schedweb.mebibytes" -}}
{{- $q := toString . -}}
{{- if $q -}}
{{- $units := dict "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1000.0 "K" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 -}}
{{- $suffix := regexFind "(Ki|Mi|Gi|Ti|k|K|M|G|T)$" $q -}}
{{- $number := trimSuffix $suffix $q | float64 -}}
{{- $bytes := mulf $number (get $units $suffix | default 1.0) -}}
{{- divf $bytes 1048576.0 | floor | int -}}
{{- end -}}
{{- end -}}

{{/* The helm test's check, standard library only: GET /readyz and /login/ from the web Service
(an answer other than 2xx raises, and the pod fails). */}}
{{- define "schedweb.testScript" -}}
import urllib.request
base = "http://{{ include "schedweb.webHost" . }}:{{ .Values.web.service.port }}"
for path in ("/readyz", "/login/"):
    with urllib.request.urlopen(base + path, timeout=30) as answer:
        print(path, answer.status)
{{- end -}}

{{/* Each snapshot-holding process's peak, MB = [base, per 1000 nodes, per 1000 pods], as `make
bench` fitted them (bench/sizing.py, docs/perf/issue-28-sizing.txt; README "Sizing"), rounded
up: the extender's listener (it holds the lean snapshot, issue 28), what a child it forks for a
large body adds (it shares the listener's pages), the worker's watcher, a process reading the snapshot (a worker task, a web
worker), an idle one, and Redis's copy of the snapshot. */}}
{{- define "schedweb.sizingModel" -}}
listener: [173.0, 50.5, 3.0]
offload: [9.5, 9.0, 0.5]
watcher: [102.5, 12.5, 31.5]
reader: [149.5, 15.0, 34.5]
idle: [62.0, 0.0, 0.0]
redis: [5.0, 2.5, 4.0]
{{- end -}}

{{/* Redis's maxmemory (512mb, 1gb, 600000000) in MiB (Redis reads mb as MiB). */}}
{{- define "schedweb.redisMebibytes" -}}
{{- $q := lower (toString .) -}}
{{- $units := dict "k" 1024.0 "kb" 1024.0 "m" 1048576.0 "mb" 1048576.0 "g" 1073741824.0 "gb" 1073741824.0 -}}
{{- $suffix := regexFind "(kb|mb|gb|k|m|g|b)$" $q -}}
{{- $number := trimSuffix $suffix $q | float64 -}}
{{- divf (mulf $number (get $units $suffix | default 1.0)) 1048576.0 | floor | int -}}
{{- end -}}
