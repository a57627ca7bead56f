{{/* Names and labels shared by every template. */}}

{{- define "kvops.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kvops.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "kvops.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "kvops.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kvops.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kvops.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kvops.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "kvops.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: exporter
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "kvops.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kvops.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* https when the web config serves TLS. */}}
{{- define "kvops.scheme" -}}
{{- if and .Values.webConfig.enabled (or .Values.webConfig.tlsSecretName (hasKey .Values.webConfig.config "tls_server_config")) -}}
https
{{- else -}}
http
{{- end -}}
{{- end -}}

{{/* The exporter's --config file: only what flags do not carry. */}}
{{- define "kvops.exporterConfig" -}}
targets:
{{- if .Values.targets }}
{{ toYaml .Values.targets }}
{{- else }} []
{{- end }}
{{- end -}}
