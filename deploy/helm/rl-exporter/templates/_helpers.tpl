{{/* The chart's name: the job label Prometheus gives the series (the ServiceMonitor's jobLabel). */}}
{{- define "rl-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rl-exporter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "rl-exporter.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "rl-exporter.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "rl-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rl-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rl-exporter.labels" -}}
{{ include "rl-exporter.selectorLabels" . }}
app.kubernetes.io/part-of: rl-exporter
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* Whether the cluster serves the prometheus-operator's resources. */}}
{{- define "rl-exporter.operator" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}true{{ end }}
{{- end }}

{{/* Bad values stop the render with the value's name. */}}
{{- define "rl-exporter.validate" -}}
{{- if not (has .Values.store.type (list "memory" "redis")) }}
{{- fail (printf "store.type %q: want memory or redis" .Values.store.type) }}
{{- end }}
{{- if and (eq .Values.store.type "redis") (not .Values.store.redis.url) }}
{{- fail "store.redis.url: required with store.type redis (the credentials go in store.redis.password or store.redis.existingSecret)" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (ne .Values.store.type "redis") }}
{{- fail "autoscaling.enabled: needs store.type redis (with the memory store each pod would enforce the limits on its own)" }}
{{- end }}
{{- if and .Values.store.redis.password .Values.store.redis.existingSecret }}
{{- fail "store.redis.password and store.redis.existingSecret: set one" }}
{{- end }}
{{- end }}

{{- define "rl-exporter.defaultClasses" -}}
default:
  limits:
    free: {algorithm: gcra, rate: 100, period: 1m, burst: 20}
    pro: {algorithm: gcra, rate: 1000, period: 1m, burst: 200}
{{- end }}

{{/* serve's config file. */}}
{{- define "rl-exporter.config" -}}
{{- $p := .Values.server.ports -}}
{{- $server := dict "listen" (printf "0.0.0.0:%v" $p.http) "metrics_listen" (printf "0.0.0.0:%v" $p.metrics) "shutdown_timeout" "15s" "check_api" (dict "allowed_peers" .Values.server.checkAPIAllowedPeers) -}}
{{- if .Values.server.upstream }}{{ $_ := set $server "upstream" .Values.server.upstream }}{{ end -}}
{{- if .Values.rls.enabled }}{{ $_ := set $server "grpc_listen" (printf "0.0.0.0:%v" $p.grpc) }}{{ end -}}
{{- $store := dict "type" .Values.store.type "timeout" .Values.store.timeout "fail_policy" .Values.store.failPolicy -}}
{{- if eq .Values.store.type "redis" }}{{ $_ := set $store "redis" (dict "url" .Values.store.redis.url) }}{{ end -}}
{{- $cfg := dict "server" $server "log" (dict "format" "json" "level" "info") "store" $store "tiers" .Values.tiers "default_class" .Values.defaultClass "classes" (.Values.classes | default (include "rl-exporter.defaultClasses" . | fromYaml)) -}}
{{- if .Values.rls.enabled }}{{ $_ := set $cfg "rls" (dict "config_dir" "ratelimit") }}{{ end -}}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy .Values.config)) }}
{{- end }}
