{{/*
The config file's text (depwatch.config) with the chart's placement and pull-secret values
given to the Jobs too: imagePullSecrets, nodeSelector, tolerations, affinity and
priorityClassName place the coordinator (deployment.yaml) and, unless the config's
jobTemplate sets the field itself (even to [] or {}), every Job it launches, so that a
private registry or a dedicated node pool is said once; values.jobTemplate's fields are
added the same way (and win over the placement values), but for its env, whose variables
are added after the config's own (a name the config sets keeps the config's value). The coordinator's default
anti-affinity is its own and is not given to the Jobs. With none of these values set the
config is the text as given, comments and all (and equal to manifests/base's); with one set
it is rewritten from its parsed form.
*/}}
{{- define "depwatch.configText" -}}
{{- $placement := dict }}
{{- with .Values.imagePullSecrets }}{{ $_ := set $placement "imagePullSecrets" . }}{{ end }}
{{- with .Values.nodeSelector }}{{ $_ := set $placement "nodeSelector" . }}{{ end }}
{{- with .Values.tolerations }}{{ $_ := set $placement "tolerations" . }}{{ end }}
{{- with .Values.affinity }}{{ $_ := set $placement "affinity" . }}{{ end }}
{{- with .Values.priorityClassName }}{{ $_ := set $placement "priorityClassName" . }}{{ end }}
{{- range $k, $v := .Values.jobTemplate }}{{ $_ := set $placement $k $v }}{{ end }}
{{- if not $placement }}
{{- include "depwatch.config" . }}
{{- else }}
{{- $cfg := include "depwatch.asMap" (list "values.config" (include "depwatch.config" .)) | fromYaml }}
{{- $jt := get $cfg "jobTemplate" | default dict }}
{{- if not (kindIs "map" $jt) }}
{{- fail (printf "values.config.jobTemplate must be a map of fields (docs/coordinator.md), not %s" (kindOf $jt)) }}
{{- end }}
{{- range $k, $v := $placement }}
{{- if and (eq $k "env") (hasKey $jt "env") }}
{{- /* values.jobTemplate.env is added after the config's env; a name the config sets keeps its value. */}}
{{- $env := get $jt "env" | default list }}
{{- $names := list }}{{ range $env }}{{ $names = append $names .name }}{{ end }}
{{- range $v }}{{ if not (has .name $names) }}{{ $env = append $env . }}{{ end }}{{ end }}
{{- $_ := set $jt "env" $env }}
{{- else if not (hasKey $jt $k) }}{{ $_ := set $jt $k $v }}{{ end }}
{{- end }}
{{- $_ := set $cfg "jobTemplate" $jt }}
{{- toYaml $cfg }}
{{- end }}
{{- end }}
