{{/*
The DG001 backstop (ValidatingAdmissionPolicy). Every piece of CEL here has a twin in
src/engine/backstop.cc (`draguard backstop` prints it); the chart test renders both from the same
policy and compares them, so change both together. Input: the rendered policy document.
*/}}

{{/* CEL: `var` matches one of the globs. Call with (list "var" patterns). */}}
{{- define "draguard.backstopGlob" -}}
{{- $var := index . 0 -}}
{{- $patterns := uniq (index . 1) -}}
{{- $exact := list -}}
{{- $terms := list -}}
{{- range $patterns -}}
{{- if regexMatch "['\"\\\\\\[\\]^]" . -}}
{{- fail (printf "%q contains a character the backstop CEL cannot carry (quote, backslash, bracket, '^')" .) -}}
{{- end -}}
{{- if not (regexMatch "[*?]" .) -}}
{{- $exact = append $exact (printf "'%s'" .) -}}
{{- end -}}
{{- end -}}
{{- if $exact -}}
{{- $terms = append $terms (printf "%s in [%s]" $var (join ", " $exact)) -}}
{{- end -}}
{{- range $patterns -}}
{{- if regexMatch "[*?]" . -}}
{{- $head := trimSuffix "*" . -}}
{{- if eq . "*" -}}
{{- $terms = append $terms "true" -}}
{{- else if and (hasSuffix "*" .) (not (regexMatch "[*?]" $head)) -}}
{{- $terms = append $terms (printf "%s.startsWith('%s')" $var $head) -}}
{{- else -}}
{{- $re := . | replace "." "[.]" | replace "+" "[+]" | replace "(" "[(]" | replace ")" "[)]" | replace "|" "[|]" | replace "{" "[{]" | replace "}" "[}]" | replace "$" "[$]" | replace "*" ".*" | replace "?" "." -}}
{{- $terms = append $terms (printf "%s.matches('^%s$')" $var $re) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $terms -}}({{ join " || " (uniq $terms) }}){{- else -}}false{{- end -}}
{{- end -}}

{{/* CEL on a ResourceRequirements expression: a denied name with a non-zero quantity. (list "r" key) */}}
{{- define "draguard.backstopResources" -}}
{{- $r := index . 0 -}}
{{- $key := index . 1 -}}
{{- $parts := list -}}
{{- range list "limits" "requests" -}}
{{- /* dyn(): Quantity's schema (a oneOf without a type) hides limits/requests from type checking. */ -}}
{{- $m := printf "dyn(%s).%s" $r . -}}
{{- $parts = append $parts (printf "(has(%s) && %s.exists(k, %s && sign(quantity(string(%s[k]))) != 0))" $m $m $key $m) -}}
{{- end -}}
{{- join " || " $parts -}}
{{- end -}}

{{/* CEL of one exemption label selector on object.metadata.labels. */}}
{{- define "draguard.backstopSelector" -}}
{{- $terms := list -}}
{{- range $k, $v := (default dict .matchLabels) -}}
{{- $terms = append $terms (printf "((has(object.metadata.labels) && '%s' in object.metadata.labels) && object.metadata.labels['%s'] == '%s')" $k $k $v) -}}
{{- end -}}
{{- range (default list .matchExpressions) -}}
{{- $present := printf "(has(object.metadata.labels) && '%s' in object.metadata.labels)" .key -}}
{{- $values := list -}}
{{- range (default list .values) -}}{{- $values = append $values (printf "'%s'" .) -}}{{- end -}}
{{- if eq .operator "In" -}}
{{- $terms = append $terms (printf "(%s && object.metadata.labels['%s'] in [%s])" $present .key (join ", " $values)) -}}
{{- else if eq .operator "NotIn" -}}
{{- $terms = append $terms (printf "!(%s && object.metadata.labels['%s'] in [%s])" $present .key (join ", " $values)) -}}
{{- else if eq .operator "Exists" -}}
{{- $terms = append $terms $present -}}
{{- else if eq .operator "DoesNotExist" -}}
{{- $terms = append $terms (printf "!%s" $present) -}}
{{- end -}}
{{- end -}}
{{- if $terms -}}({{ join " && " $terms }}){{- else -}}true{{- end -}}
{{- end -}}

{{/* validationActions of the binding as JSON ([] = DG001 off: no backstop). */}}
{{- define "draguard.backstopActions" -}}
{{- $p := include "draguard.policy" . | fromYaml -}}
{{- $action := "deny" -}}
{{- with $p.rules -}}{{- with (index . "DG001") -}}{{- with .action -}}{{- $action = . -}}{{- end -}}{{- end -}}{{- end -}}
{{- if and (eq (toString $p.mode) "audit") (eq $action "deny") -}}{{- $action = "audit" -}}{{- end -}}
{{- if eq $action "deny" -}}["Deny"]{{- else if or (eq $action "warn") (eq $action "audit") -}}["Warn","Audit"]{{- else -}}[]{{- end -}}
{{- end -}}

{{/* The policy's spec (matchConditions and validations) as YAML. */}}
{{- define "draguard.backstopSpec" -}}
{{- $p := include "draguard.policy" . | fromYaml -}}
{{- $ex := default dict $p.exemptions -}}
{{- $conditions := list -}}
{{- with $ex.namespaces -}}
{{- $conditions = append $conditions (dict "name" "not-exempt-namespace" "expression" (printf "!%s" (include "draguard.backstopGlob" (list "request.namespace" .)))) -}}
{{- end -}}
{{- with $ex.users -}}
{{- $conditions = append $conditions (dict "name" "not-exempt-user" "expression" (printf "!%s" (include "draguard.backstopGlob" (list "request.userInfo.username" .)))) -}}
{{- end -}}
{{- with $ex.groups -}}
{{- $conditions = append $conditions (dict "name" "not-exempt-group" "expression" (printf "!(has(request.userInfo.groups) && request.userInfo.groups.exists(g, %s))" (include "draguard.backstopGlob" (list "g" .)))) -}}
{{- end -}}
{{- with $ex.objectSelectors -}}
{{- $sels := list -}}
{{- range . -}}{{- $sels = append $sels (include "draguard.backstopSelector" .) -}}{{- end -}}
{{- $conditions = append $conditions (dict "name" "not-exempt-labels" "expression" (printf "!(%s)" (join " || " $sels))) -}}
{{- end -}}
{{- /* Policy exceptions naming DG001 (no expiry: CEL has no clock; the webhook ends them). */ -}}
{{- $exterms := list -}}
{{- range (default list $p.exceptions) -}}
{{- if has "DG001" (default list .rules) -}}
{{- $t := include "draguard.backstopGlob" (list "request.namespace" (default list .namespaces)) -}}
{{- with .objectNames -}}{{- $t = printf "%s && %s" $t (include "draguard.backstopGlob" (list "request.name" .)) -}}{{- end -}}
{{- if hasKey . "objectSelector" -}}{{- $t = printf "%s && %s" $t (include "draguard.backstopSelector" (default dict .objectSelector)) -}}{{- end -}}
{{- $exterms = append $exterms (printf "(%s)" $t) -}}
{{- end -}}
{{- end -}}
{{- if $exterms -}}
{{- $conditions = append $conditions (dict "name" "no-dg001-policy-exception" "expression" (printf "!(%s)" (join " || " $exterms))) -}}
{{- end -}}
{{- /* The draguard.io/exempt annotation, only where annotationExceptions allow DG001. */ -}}
{{- $grants := list -}}
{{- range (default list $p.annotationExceptions) -}}
{{- $rules := default list .rules -}}
{{- if or (not $rules) (has "DG001" $rules) -}}
{{- $t := include "draguard.backstopGlob" (list "request.namespace" (default list .namespaces)) -}}
{{- $who := list -}}
{{- with .users -}}{{- $who = append $who (include "draguard.backstopGlob" (list "request.userInfo.username" .)) -}}{{- end -}}
{{- with .groups -}}{{- $who = append $who (printf "(has(request.userInfo.groups) && request.userInfo.groups.exists(g, %s))" (include "draguard.backstopGlob" (list "g" .))) -}}{{- end -}}
{{- if $who -}}{{- $t = printf "%s && (%s)" $t (join " || " $who) -}}{{- end -}}
{{- $grants = append $grants (printf "(%s)" $t) -}}
{{- end -}}
{{- end -}}
{{- if $grants -}}
{{- $conditions = append $conditions (dict "name" "no-dg001-exception" "expression" (printf "!(has(object.metadata.annotations) && 'draguard.io/exempt' in object.metadata.annotations && object.metadata.annotations['draguard.io/exempt'].split(',').exists(id, id.trim() == 'DG001') && 'draguard.io/exempt-reason' in object.metadata.annotations && object.metadata.annotations['draguard.io/exempt-reason'].trim() != '' && (%s))" (join " || " $grants))) -}}
{{- end -}}
{{- /* The denied names: see DeniedNames in src/engine/backstop.cc. */ -}}
{{- $names := list -}}
{{- $legacy := default list $p.legacyResources -}}
{{- if eq (default "deny" $p.extendedResourceMapping) "deny" -}}
{{- $names = concat $names $legacy -}}
{{- $dc := default dict $p.deviceClasses -}}
{{- $classes := list -}}
{{- range $k, $d := dict "gpu" "gpu.nvidia.com" "mig" "mig.nvidia.com" "passthrough" "vfio.gpu.nvidia.com" -}}
{{- /* An explicit list (even empty) replaces the default, as in the policy file. */ -}}
{{- $classes = concat $classes (ternary (get $dc $k) (list $d) (hasKey $dc $k)) -}}
{{- end -}}
{{- range $classes -}}
{{- $names = append $names (printf "deviceclass.resource.kubernetes.io/%s" .) -}}
{{- end -}}
{{- else -}}
{{- range list "nvidia.com/gpumem" "nvidia.com/gpucores" "nvidia.com/gpumem-percentage" -}}
{{- $n := . -}}
{{- $hit := false -}}
{{- range $legacy -}}
{{- if regexMatch (printf "^%s$" (. | regexQuoteMeta | replace "\\*" ".*" | replace "\\?" ".")) $n -}}{{- $hit = true -}}{{- end -}}
{{- end -}}
{{- if $hit -}}{{- $names = append $names $n -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $key := include "draguard.backstopGlob" (list "k" $names) -}}
{{- $pod := printf "(has(object.spec.resources) && (%s))" (include "draguard.backstopResources" (list "object.spec.resources" $key)) -}}
{{- range list "containers" "initContainers" "ephemeralContainers" -}}
{{- $l := printf "object.spec.%s" . -}}
{{- $pod = printf "%s || (has(%s) && %s.exists(c, has(c.resources) && (%s)))" $pod $l $l (include "draguard.backstopResources" (list "c.resources" $key)) -}}
{{- end -}}
failurePolicy: Fail
matchConstraints:
  resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["pods"]
matchConditions:
  {{- range $conditions }}
  - name: {{ .name }}
    expression: {{ .expression | quote }}
  {{- end }}
validations:
  - expression: {{ printf "!(%s)" $pod | quote }}
    message: "DG001 legacy-gpu-resource (draguard backstop policy): a container of this Pod requests a legacy device-plugin GPU resource; request GPUs with a DRA ResourceClaimTemplate in spec.resourceClaims"
    reason: Forbidden
{{- end -}}
