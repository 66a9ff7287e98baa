{{/* The chart's name, or nameOverride. */}}
{{- define "depwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: the release name when it contains the chart's name
(release "depwatch" gives depwatch-coordinator, depwatch-weeder, ... as manifests/ does),
else <release>-<chart>. Cluster-wide objects carry it too, so releases never collide.
*/}}
{{- define "depwatch.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "depwatch.coordinator" -}}{{ include "depwatch.fullname" . }}-coordinator{{- end }}
{{- define "depwatch.configName" -}}{{ include "depwatch.fullname" . }}-coordinator-config{{- end }}

{{/*
The service accounts keep depwatch's own names whatever the release is called: the
coordinator launches its Jobs under depwatch-weeder and depwatch-probe (unless the config's
jobTemplate.serviceAccounts says otherwise), and its Lease is depwatch-coordinator. So one
release per namespace; cluster-wide objects carry the release's name.
*/}}
{{- define "depwatch.coordinatorSA" -}}depwatch-coordinator{{- end }}
{{- define "depwatch.weederSA" -}}depwatch-weeder{{- end }}
{{- define "depwatch.probeSA" -}}depwatch-probe{{- end }}

{{/* Labels of every object. */}}
{{- define "depwatch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "depwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: depwatch
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The coordinator's pods: the Deployment's selector, the PDB's, the Service's. Never changed after a release (a Deployment's selector is immutable). */}}
{{- define "depwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "depwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: coordinator
{{- end }}

{{/* The coordinator's image: one image for it and its Jobs. */}}
{{- define "depwatch.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/*
The coordinator's config file as given: values.config, else the chart's default, which
gardener.enabled chooses (files/config.yaml or files/config-gardener.yaml, the same as
manifests/base/config.yaml and manifests/components/gardener/config.yaml).
*/}}
{{- define "depwatch.config" -}}
{{- if or (kindIs "invalid" .Values.config) (eq "" (.Values.config | toString)) }}
{{- .Files.Get (ternary "files/config-gardener.yaml" "files/config.yaml" .Values.gardener.enabled) }}
{{- else if .Values.gardener.enabled }}
{{- fail "gardener.enabled=true chooses the chart's Gardener seed config, and values.config replaces it: set one of the two (the Gardener config is files/config-gardener.yaml, to start a config of your own from)" }}
{{- else }}
{{- include "depwatch.asText" .Values.config }}
{{- end }}
{{- end }}

{{/* The config's jobTemplate section as the coordinator reads it, the chart's values added (a map; empty when it has none). */}}
{{- define "depwatch.jobTemplate" -}}
{{- get (include "depwatch.asMap" (list "values.config" (include "depwatch.configText" .)) | fromYaml) "jobTemplate" | default dict | toYaml }}
{{- end }}

{{/* The image of the coordinator's Jobs: the config's jobTemplate.image, else the coordinator's own. */}}
{{- define "depwatch.jobsImage" -}}
{{- get (include "depwatch.jobTemplate" . | fromYaml) "image" | default (include "depwatch.image" .) }}
{{- end }}

{{/* A config value as a map: YAML text or a map. Call with (list "values.config" .Values.config). */}}
{{- define "depwatch.asMap" -}}
{{- $name := index . 0 }}{{ $v := index . 1 }}
{{- if kindIs "string" $v }}
{{- $m := fromYaml $v }}
{{- if hasKey $m "Error" }}
{{- fail (printf "%s is not valid YAML: %s" $name (get $m "Error")) }}
{{- end }}
{{- $m | toYaml }}
{{- else }}
{{- $v | default dict | toYaml }}
{{- end }}
{{- end }}

{{/* A config file's text: the string as given (comments kept), else the map as YAML. */}}
{{- define "depwatch.asText" -}}
{{- if kindIs "string" . }}
{{- . }}
{{- else }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
The Secret the probe Jobs may read: the kubeConfigSecretName of proberConfig, else of the
config's prober section; dependency-watchdog's default when unset.
*/}}
{{- define "depwatch.probeSecret" -}}
{{- $prober := dict }}
{{- if not (kindIs "invalid" .Values.proberConfig) }}
{{- $prober = include "depwatch.asMap" (list "values.proberConfig" .Values.proberConfig) | fromYaml }}
{{- else }}
{{- $cfg := include "depwatch.asMap" (list "values.config" (include "depwatch.config" .)) | fromYaml }}
{{- $prober = get $cfg "prober" | default dict }}
{{- end }}
{{- get $prober "kubeConfigSecretName" | default "shoot-access-dependency-watchdog-probe" }}
{{- end }}
