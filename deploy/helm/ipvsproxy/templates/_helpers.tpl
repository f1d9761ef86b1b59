{{/* The name of every object, as in deploy/base. */}}
{{- define "ipvsproxy.name" -}}ipvsproxy{{- end -}}

{{/* The image: by digest when image.digest is set, else by tag (the
chart's appVersion when image.tag is empty). */}}
{{- define "ipvsproxy.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* A flag's value as the ConfigMap string: whole numbers without an
exponent (values arrive as float64, and 1048576 would print as 1.048576e+06). */}}
{{- define "ipvsproxy.flagValue" -}}
{{- if and (kindIs "float64" .) (eq (floor .) .) -}}{{ int64 . }}{{- else -}}{{ . }}{{- end -}}
{{- end -}}

{{/* GOMEMLIMIT: goMemLimit when set, else 90% of resources.limits.memory
written in Mi or Gi, rounded down to a whole MiB. The soft limit must leave
the cgroup room for what is not Go heap (deploy/base/daemonset.yaml). */}}
{{- define "ipvsproxy.goMemLimit" -}}
{{- if .Values.goMemLimit -}}
{{- .Values.goMemLimit -}}
{{- else -}}
{{- $limit := toString (dig "limits" "memory" "" .Values.resources) -}}
{{- if regexMatch "^[0-9]+Mi$" $limit -}}
{{- printf "%dMiB" (div (mul (int64 (trimSuffix "Mi" $limit)) 9) 10) -}}
{{- else if regexMatch "^[0-9]+Gi$" $limit -}}
{{- printf "%dMiB" (div (mul (int64 (trimSuffix "Gi" $limit)) 1024 9) 10) -}}
{{- else -}}
{{- fail (printf "resources.limits.memory %q is not in Mi or Gi: set goMemLimit to at most 90%% of it" $limit) -}}
{{- end -}}
{{- end -}}
{{- end -}}
