{{/* Chart name, truncated to 63 characters. */}}
{{- define "draguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: also the Service name, hence part of the certificate's DNS names. */}}
{{- define "draguard.fullname" -}}
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

{{- define "draguard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "draguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "draguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "draguard.labels" -}}
helm.sh/chart: {{ include "draguard.chart" . }}
{{ include "draguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: admission-webhook
app.kubernetes.io/part-of: draguard
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "draguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "draguard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "draguard.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Name of the Secret holding tls.crt / tls.key. */}}
{{- define "draguard.tlsSecretName" -}}
{{- if eq .Values.tls.mode "external" -}}
{{- required "tls.external.secretName is required when tls.mode=external" .Values.tls.external.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "draguard.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The two DNS names the apiserver may use for the Service. */}}
{{- define "draguard.serviceDNSNames" -}}
{{- $svc := include "draguard.fullname" . -}}
{{- printf "%s.%s.svc" $svc .Release.Namespace }},{{ printf "%s.%s.svc.cluster.local" $svc .Release.Namespace -}}
{{- end -}}

{{/* failurePolicy: "auto" = Fail in enforce mode, Ignore in audit mode. Call with (list $ value). */}}
{{- define "draguard.failurePolicy" -}}
{{- $root := index . 0 -}}
{{- $v := index . 1 -}}
{{- if eq $v "auto" -}}
{{- if eq $root.Values.policy.mode "audit" -}}Ignore{{- else -}}Fail{{- end -}}
{{- else -}}
{{- $v -}}
{{- end -}}
{{- end -}}

{{/* Webhook names (fully qualified, unique within each configuration). */}}
{{- define "draguard.webhookNames" -}}
pods.validate.draguard.io,workloads.validate.draguard.io,claims.validate.draguard.io,crds.validate.draguard.io,pods.mutate.draguard.io
{{- end -}}

{{/* namespaceSelector: never kube-system, never the release namespace, plus user exclusions. */}}
{{- define "draguard.namespaceSelector" -}}
{{- $ns := list "kube-system" .Release.Namespace -}}
{{- range .Values.webhook.excludeNamespaces -}}
{{- $ns = append $ns . -}}
{{- end -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        {{- range ($ns | uniq) }}
        - {{ . | quote }}
        {{- end }}
    {{- with .Values.webhook.namespaceSelectorExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/*
CEL predicate on a resource-name variable `k`: true when k is (or may be) a legacy GPU resource
of policy.legacyResources. A glob contributes the prefix before its first '*' or '?', which is a
superset of what the glob matches (never a subset, so nothing relevant is skipped).
*/}}
{{- define "draguard.celLegacyKey" -}}
{{- $exact := list -}}
{{- $terms := list -}}
{{- range .Values.policy.legacyResources -}}
{{- $p := . -}}
{{- $cut := regexFind "^[^*?]*" $p -}}
{{- if eq $cut $p -}}
{{- $exact = append $exact (printf "'%s'" $p) -}}
{{- else if eq $cut "" -}}
{{- $terms = append $terms "true" -}}
{{- else -}}
{{- $terms = append $terms (printf "k.startsWith('%s')" $cut) -}}
{{- end -}}
{{- end -}}
{{- if $exact -}}
{{- $terms = prepend $terms (printf "k in [%s]" (join ", " ($exact | uniq))) -}}
{{- end -}}
{{- /* Every DeviceClass answers to deviceclass.resource.kubernetes.io/<class> (KEP-5004): a GPU
class's implicit name is a legacy request, which draguard judges and converts. */ -}}
{{- $terms = append $terms "k.startsWith('deviceclass.resource.kubernetes.io/')" -}}
{{- if $terms -}}({{ join " || " ($terms | uniq) }}){{- else -}}false{{- end -}}
{{- end -}}

{{/*
CEL predicate of the claims webhook: false for a ResourceClaim that one of policy.trustedSchedulers
creates with kube-scheduler's extended-resource annotation (KEP-5004), which the server would
admit unjudged anyway; "" when no scheduler is trusted.
*/}}
{{- define "draguard.celNotSchedulerClaim" -}}
{{- $trusted := default list .Values.policy.trustedSchedulers -}}
{{- if $trusted -}}
!(request.resource.resource == 'resourceclaims' && request.operation == 'CREATE' && request.userInfo.username in {{ toJson $trusted }} && has(object.metadata.annotations) && 'resource.kubernetes.io/extended-resource-claim' in object.metadata.annotations && object.metadata.annotations['resource.kubernetes.io/extended-resource-claim'] == 'true')
{{- end -}}
{{- end -}}

{{/*
CEL predicate on a ResourceRequirements expression. Call with (list $ "<cel expr>" withClaims).
*/}}
{{- define "draguard.celResources" -}}
{{- $root := index . 0 -}}
{{- $r := index . 1 -}}
{{- $withClaims := index . 2 -}}
{{- $key := include "draguard.celLegacyKey" $root -}}
{{- $parts := list (printf "(has(%s.limits) && %s.limits.exists(k, %s))" $r $r $key) (printf "(has(%s.requests) && %s.requests.exists(k, %s))" $r $r $key) -}}
{{- if $withClaims -}}
{{- $parts = append $parts (printf "(has(%s.claims) && size(%s.claims) > 0)" $r $r) -}}
{{- end -}}
{{- join " || " $parts -}}
{{- end -}}

{{/*
CEL predicate on a PodSpec expression S: true when any container or init container, or the
pod-level resources, mention a legacy GPU resource; with withClaims also when the Pod uses DRA
claims. Call with (list $ "<cel expr>" withClaims).
*/}}
{{- define "draguard.celPodSpec" -}}
{{- $root := index . 0 -}}
{{- $s := index . 1 -}}
{{- $withClaims := index . 2 -}}
{{- $c := include "draguard.celResources" (list $root "c.resources" $withClaims) -}}
{{- $parts := list -}}
{{- if $withClaims -}}
{{- $parts = append $parts (printf "(has(%s.resourceClaims) && size(%s.resourceClaims) > 0)" $s $s) -}}
{{- end -}}
{{- $parts = append $parts (printf "(has(%s.resources) && (%s))" $s (include "draguard.celResources" (list $root (printf "%s.resources" $s) false))) -}}
{{- $parts = append $parts (printf "(has(%s.containers) && %s.containers.exists(c, has(c.resources) && (%s)))" $s $s $c) -}}
{{- $parts = append $parts (printf "(has(%s.initContainers) && %s.initContainers.exists(c, has(c.resources) && (%s)))" $s $s $c) -}}
{{- join " || " $parts -}}
{{- end -}}

{{/*
CEL predicate for built-in workloads: the pod template of the kind mentions GPUs or claims.
When the template cannot be found the webhook is called (conservative).
*/}}
{{- define "draguard.celWorkload" -}}
{{- $podTemplate := printf "!(has(object.template) && has(object.template.spec)) || %s" (include "draguard.celPodSpec" (list . "object.template.spec" true)) -}}
{{- $cronJob := printf "!(has(object.spec) && has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) && has(object.spec.jobTemplate.spec.template.spec)) || %s" (include "draguard.celPodSpec" (list . "object.spec.jobTemplate.spec.template.spec" true)) -}}
{{- $other := printf "!(has(object.spec) && has(object.spec.template) && has(object.spec.template.spec)) || %s" (include "draguard.celPodSpec" (list . "object.spec.template.spec" true)) -}}
{{- printf "request.kind.kind == 'PodTemplate' ? (%s) : (request.kind.kind == 'CronJob' ? (%s) : (%s))" $podTemplate $cronJob $other -}}
{{- end -}}

{{/* CEL: skip UPDATEs that leave spec unchanged (finalizers, labels, owner references). */}}
{{- define "draguard.celSpecChanged" -}}
request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec
{{- end -}}

{{/*
Webhook clientConfig; call with a dict of fullname, namespace, path, port, caBundle and url (the
checked base URL from draguard.webhookURL; empty = the Service).
*/}}
{{- define "draguard.clientConfig" -}}
clientConfig:
  {{- if .url }}
  url: {{ printf "%s%s" .url .path | quote }}
  {{- else }}
  service:
    name: {{ .fullname }}
    namespace: {{ .namespace }}
    path: {{ .path }}
    port: {{ .port }}
  {{- end }}
  {{- if .caBundle }}
  caBundle: {{ .caBundle }}
  {{- end }}
{{- end -}}

{{/*
webhook.url checked and without a trailing slash ("" when unset): an absolute https URL with a
host and no user info, query or fragment, as the apiserver requires of clientConfig.url.
*/}}
{{- define "draguard.webhookURL" -}}
{{- $raw := .Values.webhook.url | default "" | trim -}}
{{- if $raw -}}
{{- $why := "" -}}
{{- if regexMatch "[[:space:]]" $raw -}}
{{- $why = "contains white space" -}}
{{- else if not (hasPrefix "https://" $raw) -}}
{{- $why = "must start with https:// (the apiserver calls webhooks over TLS only)" -}}
{{- else if contains "?" $raw -}}
{{- $why = "must not have a query (the chart appends /validate and /mutate)" -}}
{{- else if contains "#" $raw -}}
{{- $why = "must not have a fragment" -}}
{{- else -}}
{{- $u := urlParse $raw -}}
{{- if not $u.host -}}
{{- $why = "has no host" -}}
{{- else if $u.userinfo -}}
{{- $why = "must not contain user info (user@ or user:password@)" -}}
{{- end -}}
{{- end -}}
{{- if $why -}}
{{- fail (printf "webhook.url %q %s; expected a base URL such as https://127.0.0.1:8443" $raw $why) -}}
{{- end -}}
{{- trimSuffix "/" $raw -}}
{{- end -}}
{{- end -}}

{{/* The policy document rendered from .Values.policy. */}}
{{- define "draguard.policy" -}}
{{- $p := deepCopy .Values.policy -}}
{{- $ex := default dict (get $p "exemptions") -}}
{{- $ns := default list (get $ex "namespaces") -}}
{{- if not (has .Release.Namespace $ns) -}}
{{- $ns = append $ns .Release.Namespace -}}
{{- end -}}
{{- $_ := set $ex "namespaces" $ns -}}
{{- $_ := set $p "exemptions" $ex -}}
{{- $m := default dict (get $p "mutation") -}}
{{- $_ := set $m "enabled" .Values.mutation.enabled -}}
{{- $_ := set $p "mutation" $m -}}
{{- $_ := unset $p "apiVersion" -}}
{{- $_ := unset $p "kind" -}}
# Rendered by the draguard Helm chart from .Values.policy; hot-reloaded by the server.
apiVersion: draguard.io/v1alpha1
kind: Policy
{{ toYaml $p }}
{{- end -}}

{{/* The topology source: topology.source, or (empty) directory when topology.volume is set, else
configmaps when the exporter runs (and the API is reachable), else none (the bundled demo exports
only when named). */}}
{{- define "draguard.topologySource" -}}
{{- if .Values.topology.source -}}
{{- .Values.topology.source -}}
{{- else if .Values.topology.volume -}}
directory
{{- else if and .Values.exporter.enabled (ne (toString .Values.kube.mode) "off") -}}
configmaps
{{- else -}}
none
{{- end -}}
{{- end -}}

{{/* Namespace of the topology ConfigMaps (default: the release namespace). */}}
{{- define "draguard.topologyNamespace" -}}
{{- default .Release.Namespace .Values.topology.configMaps.namespace -}}
{{- end -}}

{{/* ServiceAccount of the topology exporter. */}}
{{- define "draguard.exporterName" -}}
{{- printf "%s-exporter" (include "draguard.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of the exporter pods (distinct from the webhook's, so the webhook's Service,
PDB and Deployment never select them). */}}
{{- define "draguard.exporterSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-topology-exporter" (include "draguard.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of the exporter's objects. */}}
{{- define "draguard.exporterLabels" -}}
helm.sh/chart: {{ include "draguard.chart" . }}
{{ include "draguard.exporterSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: topology-exporter
app.kubernetes.io/part-of: draguard
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
