{{/* The name of every object, as in deploy/base. */}}
{{- define "ipvsproxy.name" -}}ipvsproxy{{- end -}}

{{/* A flag's value as the ConfigMap string: whole numbers without an
exponent (values arrive as float64, and 1048576 would print as 1.048576e+06). */}}
{{- define "ipvsproxy.flagValue" -}}
{{- if and (kindIs "float64" .) (eq (floor .) .) -}}{{ int64 . }}{{- else -}}{{ . }}{{- end -}}
{{- end -}}
