{{/* Names and labels shared by every template. */}}
{{- define "lattice.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "lattice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "lattice.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "lattice.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "lattice.labels" -}}
{{ include "lattice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The operator's image: repository@digest when a digest is pinned (a released chart), else
repository:tag (the tag defaults to the chart's appVersion). */}}
{{- define "lattice.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "lattice.webhookService" -}}
{{- printf "%s-webhook" (include "lattice.fullname" .) -}}
{{- end -}}

{{- define "lattice.tlsSecret" -}}
{{- printf "%s-webhook-tls" (include "lattice.fullname" .) -}}
{{- end -}}

{{/* The label the leader puts on its own Pod; the stream and github Services select it. */}}
{{- define "lattice.leaderLabel" -}}
lattice.dev/leader
{{- end -}}

{{/* The leader's Pod: the Services of what only the leader serves select it. Without
leader election every replica reconciles (run one only) and serves them. */}}
{{- define "lattice.leaderSelector" -}}
{{ include "lattice.selectorLabels" . }}
{{- if .Values.leaderElection.enabled }}
{{ include "lattice.leaderLabel" . }}: "true"
{{- end -}}
{{- end -}}

{{/* Whether the leader labels its Pod: leader election on and a Service selecting it. */}}
{{- define "lattice.labelsLeader" -}}
{{- if and .Values.leaderElection.enabled (or .Values.stream.enabled .Values.github.enabled) -}}
true
{{- end -}}
{{- end -}}

{{- define "lattice.podSelector" -}}
{{- printf "app.kubernetes.io/name=%s,app.kubernetes.io/instance=%s" .Chart.Name .Release.Name -}}
{{- end -}}

{{- define "lattice.leaseName" -}}
{{- default (include "lattice.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The operator's settings file (lattice_operator.settings.OperatorSettings). */}}
{{- define "lattice.settings" -}}
{{- $le := .Values.leaderElection -}}
{{- $cert := dict "secret" (printf "%s/%s" .Release.Namespace (include "lattice.tlsSecret" .)) -}}
{{- if .Values.webhook.certManager.enabled -}}
{{- $_ := set $cert "manage" false -}}
{{- else -}}
{{- $_ := set $cert "validity" (mulf .Values.webhook.certValidityDays 86400) -}}
{{- $_ := set $cert "rotate_before" (mulf .Values.webhook.certRotateBeforeDays 86400) -}}
{{- end -}}
{{- $s := dict
  "namespaces" .Values.watchNamespaces
  "leader_election" (dict "enabled" $le.enabled "lease_name" (include "lattice.leaseName" .)
                          "lease_namespace" .Release.Namespace
                          "lease_duration" $le.leaseDurationSeconds
                          "renew_deadline" $le.renewDeadlineSeconds
                          "retry_period" $le.retryPeriodSeconds
                          "pod_selector" (include "lattice.podSelector" .))
  "probe" (dict "host" "0.0.0.0" "port" .Values.probePort)
  "metrics_host" "0.0.0.0"
  "metrics_port" (ternary .Values.metrics.port 0 .Values.metrics.enabled)
  "webhook" (dict "host" "0.0.0.0" "port" .Values.webhook.port
               "url_host" (printf "%s.%s.svc" (include "lattice.webhookService" .) .Release.Namespace)
               "managed" nil
               "configuration" (include "lattice.fullname" .)
               "certificate" $cert
               "max_body_bytes" .Values.webhook.maxBodyBytes
               "request_timeout" .Values.webhook.requestTimeoutSeconds)
-}}
{{- if .Values.webhook.clientCAConfigMap -}}
{{- $_ := set (get $s "webhook") "client_ca_file" "/etc/lattice/webhook-client-ca/ca.crt" -}}
{{- $_ := set (get $s "webhook") "client_names" .Values.webhook.clientNames -}}
{{- end -}}
{{- if include "lattice.labelsLeader" . -}}
{{- $_ := set (get $s "leader_election") "pod_label" (include "lattice.leaderLabel" .) -}}
{{- end -}}
{{- $backend := dict -}}
{{- if .Values.sprites.apiUrl }}{{- $_ := set $backend "api_url" .Values.sprites.apiUrl -}}{{- end -}}
{{- if .Values.sprites.tokenSecret }}{{- $_ := set $backend "token_secret" (printf "%s/%s" .Release.Namespace .Values.sprites.tokenSecret) -}}{{- end -}}
{{- if $backend }}{{- $_ := set $s "backend" $backend -}}{{- end -}}
{{- if .Values.stream.enabled -}}
{{- $_ := set $s "stream" (dict "host" "0.0.0.0" "port" .Values.stream.port) -}}
{{- end -}}
{{- with .Values.github -}}
{{- if .enabled -}}
{{- $forge := dict "api_url" .apiUrl "git_url" .gitUrl "webhook_host" "0.0.0.0"
                   "webhook_port" .webhookPort "max_payload_bytes" .maxPayloadBytes -}}
{{- if .tokenSecret }}{{- $_ := set $forge "token_secret" (printf "%s/%s" $.Release.Namespace .tokenSecret) -}}{{- end -}}
{{- if .appId }}{{- $_ := set $forge "app_id" (toString .appId) -}}{{- end -}}
{{- if .installationId }}{{- $_ := set $forge "installation_id" .installationId -}}{{- end -}}
{{- if .appKeySecret }}{{- $_ := set $forge "app_key_secret" (printf "%s/%s" $.Release.Namespace .appKeySecret) -}}{{- end -}}
{{- $_ := set $s "forge" $forge -}}
{{- end -}}
{{- end -}}
{{- with .Values.fly -}}
{{- if .enabled -}}
{{- $_ := set $s "fly" (dict "api_url" .apiUrl "token_secret" (printf "%s/%s" $.Release.Namespace .tokenSecret)) -}}
{{- end -}}
{{- end -}}
{{- toYaml (mergeOverwrite $s (deepCopy .Values.settings)) -}}
{{- end -}}

{{/* Combinations the schema cannot express: fail before anything is installed. */}}
{{- define "lattice.validate" -}}
{{- $le := .Values.leaderElection -}}
{{- if le (float64 $le.leaseDurationSeconds) (float64 $le.renewDeadlineSeconds) -}}
{{- fail "leaderElection.leaseDurationSeconds must be greater than leaderElection.renewDeadlineSeconds" -}}
{{- end -}}
{{- if le (float64 $le.renewDeadlineSeconds) (mulf $le.retryPeriodSeconds 1.2) -}}
{{- fail "leaderElection.renewDeadlineSeconds must be greater than 1.2 x leaderElection.retryPeriodSeconds" -}}
{{- end -}}
{{- with .Values.github -}}
{{- if and .enabled (not .tokenSecret) (not (and .appId .installationId .appKeySecret)) -}}
{{- fail "github.enabled needs github.tokenSecret, or github.appId, github.installationId and github.appKeySecret" -}}
{{- end -}}
{{- if and .tokenSecret .appId -}}
{{- fail "github.tokenSecret and github.appId exclude each other: set one" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.fly.enabled (not .Values.fly.tokenSecret) -}}
{{- fail "fly.enabled needs fly.tokenSecret" -}}
{{- end -}}
{{- if ge (float64 .Values.webhook.certRotateBeforeDays) (float64 .Values.webhook.certValidityDays) -}}
{{- fail "webhook.certRotateBeforeDays must be less than webhook.certValidityDays" -}}
{{- end -}}
{{- end -}}
