{{/* The name of the chart's namespaced objects and the prefix of its cluster-wide ones. */}}
{{- define "helmdeck.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Cluster-wide objects (ClusterRole, ClusterRoleBinding) carry the release's namespace: one install per namespace. */}}
{{- define "helmdeck.clusterName" -}}
{{- printf "%s-%s" (include "helmdeck.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The selector labels of one controller instance: (dict "root" $ "shard" NAME), "" for the main one. A shard's
pods are app.kubernetes.io/name <chart>-shard with helmdeck.dev/shard, so the main Deployment's selector
(immutable: kept as it was) never takes them.
*/}}
{{- define "helmdeck.instanceSelectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}{{ if .shard }}-shard{{ end }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .shard }}
helmdeck.dev/shard: {{ .shard }}
{{- end }}
{{- end -}}

{{- define "helmdeck.instanceLabels" -}}
{{ include "helmdeck.instanceSelectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "helmdeck.selectorLabels" -}}
{{ include "helmdeck.instanceSelectorLabels" (dict "root" . "shard" "") }}
{{- end -}}

{{- define "helmdeck.labels" -}}
{{ include "helmdeck.instanceLabels" (dict "root" . "shard" "") }}
{{- end -}}

{{/*
The pod's terminationGracePeriodSeconds: controller.stopDeadline plus the time helmdeck needs after it (cancel
the running helm actions, unlock their pending revisions, give the Lease up). A value set lower fails rendering,
since the kubelet's SIGKILL would then cut that work short and could leave a release pending.
*/}}
{{- define "helmdeck.shutdownMargin" -}}15{{- end -}}
{{- define "helmdeck.gracePeriod" -}}
{{- $deadline := int .Values.controller.stopDeadline -}}
{{- $needed := add $deadline (int (include "helmdeck.shutdownMargin" .)) -}}
{{- if eq (toString .Values.terminationGracePeriodSeconds) "" -}}
{{- $needed -}}
{{- else if lt (int .Values.terminationGracePeriodSeconds) $needed -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be at least controller.stopDeadline (%d) + %s: after the deadline the controller cancels running helm actions, unlocks their revisions and gives its Lease up. Raise terminationGracePeriodSeconds to %d, lower controller.stopDeadline, or leave terminationGracePeriodSeconds empty to have it computed." (int .Values.terminationGracePeriodSeconds) $deadline (include "helmdeck.shutdownMargin" .) $needed) -}}
{{- else -}}
{{- int .Values.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/* "true" when shards is "auto" (the schema allows no other string): automatic placement, no static shards. */}}
{{- define "helmdeck.autoShards" -}}
{{- kindIs "string" .Values.shards -}}
{{- end -}}

{{/*
The main instance's --watch-label-selector: controller.watchLabelSelector when set; with shards listed, the
Packages no listed shard claims, "<shardKey> notin (<shard names>)" (unlabelled Packages included, as Flux's
main instance runs with "!<key>", and a Package labelled for a shard not listed is not left out); else none
(every Package). A shard with its own selector has no complement the chart can compute: it asks for one.
*/}}
{{- define "helmdeck.mainSelector" -}}
{{- if eq (include "helmdeck.autoShards" .) "true" -}}
{{- if .Values.controller.watchLabelSelector -}}
{{- fail "shards: auto places every Package the controller sees on its replicas, so controller.watchLabelSelector cannot be set with it: remove one (or run static shards, a list under shards)" -}}
{{- end -}}
{{- else if .Values.controller.watchLabelSelector -}}
{{- .Values.controller.watchLabelSelector -}}
{{- else if .Values.shards -}}
{{- $names := list -}}
{{- range .Values.shards -}}
{{- if .selector -}}
{{- fail (printf "shards: %q has its own selector, so the main instance's cannot be computed: set controller.watchLabelSelector to the Packages no shard reconciles (e.g. \"team notin (a,b)\")" .name) -}}
{{- end -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- printf "%s notin (%s)" .Values.shardKey (join "," $names) -}}
{{- end -}}
{{- end -}}
