{{/* Full name: the release name, with the chart name unless it contains it. */}}
{{- define "changebot.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "changebot.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "changebot.labels" -}}
{{ include "changebot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "changebot.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "changebot.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "changebot.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "changebot.existingSecret" -}}
{{- required "existingSecret: name the Secret holding changebot's secrets (see values.yaml)" .Values.existingSecret -}}
{{- end -}}

{{/* Pod and container security settings shared by the server and the migration Job. */}}
{{- define "changebot.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "changebot.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The platform, config.platform: gitlab (the default) or github. */}}
{{- define "changebot.platform" -}}
{{- $p := .Values.config.platform | default "gitlab" | toString | lower -}}
{{- if not (has $p (list "gitlab" "github")) -}}
{{- fail (printf "config.platform: %q is not gitlab or github" $p) -}}
{{- end -}}
{{- $p -}}
{{- end -}}

{{/* The platform's webhook path, as serve routes it. */}}
{{- define "changebot.webhookPath" -}}
{{- printf "/webhooks/%s" (include "changebot.platform" .) -}}
{{- end -}}

{{/* "true" when the robot on GitHub is a GitHub App (config.github_app_id or
config.github_installation_id set; both are then required), else empty. */}}
{{- define "changebot.githubApp" -}}
{{- if and (eq (include "changebot.platform" .) "github") (or .Values.config.github_app_id .Values.config.github_installation_id) -}}
{{- $_ := required "config.github_app_id: the GitHub App's id is required with config.github_installation_id" .Values.config.github_app_id -}}
{{- $_ := required "config.github_installation_id: the App's installation id is required with config.github_app_id" .Values.config.github_installation_id -}}
true
{{- end -}}
{{- end -}}

{{/* The Secret's keys the server reads, as a JSON list of {env, key, path}:
each key is mounted as /run/secrets/changebot/<path> and named by the
variable env. The robot's credential follows the platform: gitlab-token on
GitLab; on GitHub github-token, or github-app-private-key for a GitHub App. */}}
{{- define "changebot.secretFiles" -}}
{{- $k := .Values.secretKeys -}}
{{- $robot := dict "env" "CHANGEBOT_GITLAB_TOKEN_FILE" "key" $k.gitlabToken "path" "gitlab-token" "value" "secretKeys.gitlabToken" -}}
{{- if include "changebot.githubApp" . -}}
{{- $robot = dict "env" "CHANGEBOT_GITHUB_APP_PRIVATE_KEY_FILE" "key" $k.githubAppPrivateKey "path" "github-app-private-key" "value" "secretKeys.githubAppPrivateKey" -}}
{{- else if eq (include "changebot.platform" .) "github" -}}
{{- $robot = dict "env" "CHANGEBOT_GITHUB_TOKEN_FILE" "key" $k.githubToken "path" "github-token" "value" "secretKeys.githubToken" -}}
{{- end -}}
{{- $files := list
  (dict "env" "DATABASE_URL_FILE" "key" $k.databaseUrl "path" "database-url" "value" "secretKeys.databaseUrl")
  $robot
  (dict "env" "CHANGEBOT_REVIEWER_TOKENS_FILE" "key" $k.reviewerTokens "path" "reviewer-tokens" "value" "secretKeys.reviewerTokens")
  (dict "env" "CHANGEBOT_WEBHOOK_SECRETS_FILE" "key" $k.webhookSecrets "path" "webhook-secrets" "value" "secretKeys.webhookSecrets")
  (dict "env" "CHANGEBOT_CALLBACK_SECRET_FILE" "key" $k.callbackSecret "path" "callback-secret" "value" "secretKeys.callbackSecret")
  (dict "env" "CHANGEBOT_API_TOKENS_FILE" "key" $k.apiTokens "path" "api-tokens" "value" "secretKeys.apiTokens") -}}
{{- range $files -}}
{{- $_ := required (printf "%s: name the key of existingSecret that holds it" .value) .key -}}
{{- end -}}
{{- toJson $files -}}
{{- end -}}

{{/* "true" when the cluster runs the preStop sleep action (Kubernetes 1.30
or later), else empty. helm template without --kube-version assumes
v1.20.0: give your cluster's version to render what it gets. */}}
{{- define "changebot.preStopSleep" -}}
{{- if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version -}}true{{- end -}}
{{- end -}}

{{/* The shutdown delay serve is given, in seconds. Without the preStop
sleep (Kubernetes before 1.30) the sleep's seconds are added to it: the pod
then keeps accepting webhooks as long after SIGTERM as it would have after
the sleep. */}}
{{- define "changebot.shutdownDelaySeconds" -}}
{{- if include "changebot.preStopSleep" . -}}
{{- int .Values.shutdown.delaySeconds -}}
{{- else -}}
{{- add .Values.shutdown.preStopSleepSeconds .Values.shutdown.delaySeconds -}}
{{- end -}}
{{- end -}}
