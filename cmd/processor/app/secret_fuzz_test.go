package app

import (
	"context"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/logging/redacttest"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// secretConfig sets every key of a configuration file, and every option
// of the built-in stages, to @@.
const secretConfig = `kafka:
  brokers: [@@, @@]
  client_id: @@
  tls: {ca_file: @@, cert_file: @@, key_file: @@, server_name: @@, insecure_skip_verify: @@}
  sasl: {mechanism: @@, username: @@ PASSWORD}
  dial_timeout: @@
  metadata_max_age: @@
  create_topics: @@
  max_batch_bytes: @@
  partitioner: @@
consumer:
  group: @@
  topics: [@@, @@]
  auto_offset_reset: @@
  skip_offset_validation: @@
  commit_interval: @@
  fetch_max_wait: @@
  fetch_min_bytes: @@
  fetch_max_bytes: @@
  fetch_concurrency: @@
  max_partition_fetch_bytes: @@
  buffer_bytes: @@
  ordering: @@
  concurrency: @@
  processing_timeout: @@
  read_committed: @@
  session_timeout: @@
  heartbeat_interval: @@
  rebalance_timeout: @@
  group_instance_id: @@
  leave_group_on_close: @@
  assignor: @@
  group_protocol: @@
  remote_assignor: @@
dead_letter: {topic: @@, policy: @@, retries: @@, backoff: @@}
state: {dir: @@, store: @@, cache_bytes: @@, write_buffer_bytes: @@}
http: {address: @@}
log: {level: @@, format: @@}
shutdown_timeout: @@
guarantee: @@
transaction_timeout: @@
pipeline:
  - {stage: json, name: @@, require: [@@]}
  - {stage: filter, if: @@}
  - {stage: map, value: @@, key: @@, headers: {h: @@}}
  - {stage: produce, topic: @@, key: @@, value: @@, headers: {h: @@}}
  - {stage: stdout, name: @@, format: @@, every: @@}
  - {stage: log, format: @@, every: @@}
  - {stage: @@}
`

// secretVariants say how @@ is written and which variable holds the
// secret: quoted or plain (typed as YAML types it: a number, true), in
// the middle of other text, with the secret in kafka.sasl.password (so
// known as a secret whatever the variable's name) or only in a variable
// named like a secret.
var secretVariants = []struct {
	ref, password string
}{
	{`"${KAFKA_PASSWORD}"`, `, password: "${KAFKA_PASSWORD}"`},
	{`${KAFKA_PASSWORD}`, ``},
	{`"${PW}"`, `, password: "${PW}"`},
	{`${PW}`, `, password: ${PW}`},
	{`"a-${API_TOKEN}:1"`, ``},
	{`'${PW}.x'`, `, password: '${PW}'`},
}

// framing is the text lint and run print around a file's problems,
// positions included.
var framing = regexp.MustCompile(`(?m)^error: (FILE: nothing was started \(fix the problems above\)|\d+ of \d+ configuration file\(s\) have problems)\x00?$|^    hint: |^FILE:\d+:\d+: `)

// lineBreaks are the line breaks lint and run print between problems and
// hints (before each framing text, and at the end). Each message is
// redacted on its own, so a secret that ends in a line break is not
// shown by a message that ends in its other characters ("exactly_once"
// then the printer's line break does not show "ce\n"): lineBreaks are
// cut out as a marker is. They are marked with a NUL (which neither the
// output nor a secret holds) until framing is cut out.
var lineBreaks = regexp.MustCompile(`\n(    hint: |FILE:\d+:\d+: |error: |$)`)

// FuzzLintSecret puts a random secret through ${VAR} into every key of a
// configuration (see secretConfig) and checks everything lint and run
// print about it, which fails: no part of the secret (see redacttest)
// shows, in any form.
func FuzzLintSecret(f *testing.F) {
	for i, s := range []string{`pa"ss`, "hunter2\ts3cret", "line1\nline2", `back\slash'quote"`, "ünï<&>\u2028",
		"9092", "localhost:9092", "PLAIN", "orders", "\xff\xfe-bytes", "${X}", "[redacted]", "s p a c e s"} {
		f.Add(s, uint8(i))
	}
	f.Fuzz(func(t *testing.T, secret string, variant uint8) {
		secret = strings.ReplaceAll(secret, "\x00", "\x01") // the environment cannot hold NUL
		v := secretVariants[int(variant)%len(secretVariants)]
		for _, name := range []string{"KAFKA_PASSWORD", "PW", "API_TOKEN"} {
			t.Setenv(name, secret)
		}
		src := strings.ReplaceAll(strings.Replace(secretConfig, " PASSWORD", v.password, 1), "@@", v.ref)
		file := writeFile(t, t.TempDir(), "secret.yaml", src)
		for _, args := range [][]string{{"lint", "-c", file}, {"run", "-c", file}} {
			code, out, errOut := runCLI(context.Background(), stages.Default, args...)
			if code != ExitFailure {
				t.Fatalf("%s: exit %d, want %d (the file cannot be valid)\n%s%s", args[0], code, ExitFailure, out, errOut)
			}
			// The file's name is not the secret's (its directory is
			// named after this test), nor is the text lint and run frame
			// the problems with.
			all := strings.ReplaceAll(out+errOut, file, "FILE")
			all = lineBreaks.ReplaceAllString(all, "\x00\n$1")
			all = strings.ReplaceAll(framing.ReplaceAllString(all, ""), "\x00", redacttest.Marker)
			if leak := redacttest.Leak(all, secret); leak != "" {
				t.Fatalf("%s shows %q of secret %q:\n%s%s", args[0], leak, secret, out, errOut)
			}
		}
	})
}

// TestSecretConfigCoversEveryKey: secretConfig sets every key of
// pipeline.Config, so that FuzzLintSecret puts the secret everywhere.
func TestSecretConfigCoversEveryKey(t *testing.T) {
	var walk func(prefix string, t reflect.Type) []string
	walk = func(prefix string, typ reflect.Type) []string {
		var keys []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft.PkgPath() == reflect.TypeFor[pipeline.Config]().PkgPath() {
				keys = append(keys, walk(name, ft)...)
				continue
			}
			keys = append(keys, name)
		}
		return keys
	}
	src := strings.Replace(secretConfig, " PASSWORD", ", password: @@", 1)
	for _, k := range walk("", reflect.TypeFor[pipeline.Config]()) {
		if !regexp.MustCompile(`(^|[\s{,])` + k + `: (@@|\[@@)`).MatchString(src) {
			t.Errorf("secretConfig does not set %s", k)
		}
	}
}
