{{/* The chart's name, or nameOverride. */}}
{{- define "ratelimit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name: fullnameOverride, else <release>-<name> (just <release> when it contains the name). */}}
{{- define "ratelimit.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "ratelimit.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "ratelimit.labels" -}}
app.kubernetes.io/name: {{ include "ratelimit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ratelimit.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "ratelimit.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "ratelimit.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ratelimit.xdsServerSecret" -}}
{{- default (printf "%s-xds-server-tls" (include "ratelimit.fullname" .)) .Values.xds.tls.serverSecretName -}}
{{- end -}}

{{- define "ratelimit.xdsClientSecret" -}}
{{- default (printf "%s-xds-client-tls" (include "ratelimit.fullname" .)) .Values.xds.tls.clientSecretName -}}
{{- end -}}

{{/* The xDS Service's in-cluster name: what the pods dial and require in the operator's certificate. */}}
{{- define "ratelimit.xdsHost" -}}
{{- printf "%s-xds.%s.svc" (include "ratelimit.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "ratelimit.xdsServerName" -}}
{{- default (include "ratelimit.xdsHost" .) .Values.xds.tls.serverName -}}
{{- end -}}

{{- define "ratelimit.selector" -}}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}


{{/* file: the service reads ConfigMap files and no operator or xDS is rendered; xds: config from the operator. */}}
{{- define "ratelimit.fileMode" -}}
{{- if eq .Values.config.mode "file" -}}true{{- end -}}
{{- end -}}

{{/* REDIS_URL: redis.url, else the chart's own Redis with redis.deploy. */}}
{{- define "ratelimit.redisUrl" -}}
{{- if .Values.redis.url -}}
{{- .Values.redis.url -}}
{{- else if .Values.redis.deploy -}}
{{- printf "%s-redis:%d" (include "ratelimit.fullname" .) (int .Values.redis.deployment.port) -}}
{{- else -}}
{{- fail "redis.url is empty: set it to your Redis (e.g. --set redis.url=redis.example:6379), or set redis.deploy=true for a single trial Redis run by the chart" -}}
{{- end -}}
{{- end -}}

{{/* Whether the chart writes the xDS certificate Secrets itself (xds.tls.generate). */}}
{{- define "ratelimit.xdsGenerate" -}}
{{- if and .Values.xds.tls.enabled .Values.xds.tls.generate (not (include "ratelimit.fileMode" .)) -}}true{{- end -}}
{{- end -}}
