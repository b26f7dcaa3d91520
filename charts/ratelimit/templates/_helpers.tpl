{{- define "ratelimit.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "ratelimit.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
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
