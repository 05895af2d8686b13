{{/* Object names: the release name when it contains the chart name, else "<release>-<chart>". */}}
{{- define "vapcheck.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "vapcheck.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object (the ones `kubectl apply -k manifests/` always set). */}}
{{- define "vapcheck.labels" -}}
app.kubernetes.io/name: {{ include "vapcheck.name" . }}
app.kubernetes.io/part-of: vapcheck
{{- end -}}

{{/* Labels that select the controller's pods. */}}
{{- define "vapcheck.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vapcheck.name" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{/*
The configuration file: files/vapcheck.yaml (a copy of config/vapcheck.yaml) as it is when
.Values.config is empty, else the defaults with .Values.config merged over them.
*/}}
{{- define "vapcheck.configFile" -}}
{{- $default := .Files.Get "files/vapcheck.yaml" -}}
{{- if .Values.config -}}
{{- mergeOverwrite (fromYaml $default) (deepCopy .Values.config) | toYaml -}}
{{- else -}}
{{- $default -}}
{{- end -}}
{{- end -}}

{{/* The effective configuration as a dict. */}}
{{- define "vapcheck.configJSON" -}}
{{- mergeOverwrite (fromYaml (.Files.Get "files/vapcheck.yaml")) (deepCopy .Values.config) | toJson -}}
{{- end -}}

{{/* The port of metrics.bindAddress and of health.bindAddress. */}}
{{- define "vapcheck.metricsPort" -}}
{{- $cfg := include "vapcheck.configJSON" . | fromJson -}}
{{- regexFind "[0-9]+$" $cfg.metrics.bindAddress -}}
{{- end -}}
{{- define "vapcheck.healthPort" -}}
{{- $cfg := include "vapcheck.configJSON" . | fromJson -}}
{{- regexFind "[0-9]+$" $cfg.health.bindAddress -}}
{{- end -}}
