package config

import (
	"strings"
	"testing"
)

// TestInterpolate: references, defaults, escapes, comments and quotes.
func TestInterpolate(t *testing.T) {
	env := map[string]string{"HOST": "kafka-1.internal", "EMPTY": "", "PORT": "9093"}
	cases := []struct{ name, src, want string }{
		{"plain", "a: ${HOST}:${PORT}\n", "a: kafka-1.internal:9093\n"},
		{"default when unset", "a: ${NOPE:-x y}\n", "a: x y\n"},
		{"default when empty", "a: ${EMPTY:-dflt}\n", "a: dflt\n"},
		{"set but empty, no default", "a: '${EMPTY}'\n", "a: ''\n"},
		{"set value wins over default", "a: ${HOST:-other}\n", "a: kafka-1.internal\n"},
		{"empty default", "a: ${NOPE:-}\n", "a: \n"},
		{"escape", "a: $${HOST} and $$HOST and $5\n", "a: ${HOST} and $$HOST and $5\n"},
		{"comment left alone", "a: 1 # uses ${NOPE}\n# ${NOPE}\n", "a: 1 # uses ${NOPE}\n# ${NOPE}\n"},
		{"# inside quotes is no comment", "a: \"x # ${HOST}\"\nb: 'y # ${PORT}'\n", "a: \"x # kafka-1.internal\"\nb: 'y # 9093'\n"},
		{"apostrophe in a plain value", "a: it's ${PORT} # ${NOPE}\n", "a: it's 9093 # ${NOPE}\n"},
		{"no trailing newline", "a: ${PORT}", "a: 9093"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			probs := &problems{file: "f"}
			got, _ := interpolate([]byte(c.src), envOf(env), probs)
			if len(probs.errs) > 0 {
				t.Fatal(probs.errs)
			}
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestInterpolateErrors: every missing variable and bad reference is
// reported at once, at its own line:col.
func TestInterpolateErrors(t *testing.T) {
	src := "kafka:\n  brokers: [${BROKER}]\n  sasl:\n    username: ${USER_NAME:-app}\n    password: \"${KAFKA_PASSWORD}\"\n" +
		"consumer: {group: ${GROUP}, topics: [${1BAD}, ${OK}]}\nlog: {level: ${UNCLOSED\n"
	_, errs := parse(t, src, map[string]string{"OK": "x"})
	checkErrors(t, errs, []want{
		{"2:13", "", "environment variable BROKER is not set"},
		{"5:16", "", "environment variable KAFKA_PASSWORD is not set"},
		{"6:19", "", "environment variable GROUP is not set"},
		{"6:38", "", "bad reference ${1BAD}"},
		{"7:14", "", "unterminated ${"},
	})
	if !strings.Contains(errs[0].Hint, "${BROKER:-value}") {
		t.Errorf("hint %q", errs[0].Hint)
	}
}

// TestPositionsAfterInterpolation: errors found after interpolation are
// reported at the position in the file as written, not as expanded.
func TestPositionsAfterInterpolation(t *testing.T) {
	src := "kafka:\n  brokers: [${B}, ${B}, x]\nconsumer:\n  group: ${G}\n  topics: [\"${T}\", \"\"]\n  ordering: ${O}\npipeline: [{stage: ${S}}]\n"
	env := map[string]string{"B": "a-rather-long-host-name:9092", "G": "g", "T": "t", "O": "sideways", "S": "filtre"}
	_, errs := parse(t, src, env)
	checkErrors(t, errs, []want{
		{"2:25", "kafka.brokers[2]", `"x" is not host:port`},
		{"5:20", "consumer.topics[1]", "empty topic name"},
		{"6:3", "consumer.ordering", `"sideways" is not partition or key`},
		{"7:20", "pipeline[0].stage", `unknown stage "filtre"`},
	})
}

// TestPositionMapMultiline: a value holding newlines shifts later lines;
// positions still map back.
func TestPositionMapMultiline(t *testing.T) {
	probs := &problems{file: "f"}
	out, pm := interpolate([]byte("a: |\n  ${V}\nb: 1\n"), envOf(map[string]string{"V": "x\n  y\n  z"}), probs)
	if out != "a: |\n  x\n  y\n  z\nb: 1\n" {
		t.Fatalf("out %q", out)
	}
	for _, c := range []struct{ out, in Position }{
		{Position{1, 1}, Position{1, 1}},
		{Position{2, 3}, Position{2, 3}}, // inside the value: the reference
		{Position{4, 3}, Position{2, 3}},
		{Position{5, 1}, Position{3, 1}},
		{Position{5, 4}, Position{3, 4}},
	} {
		if got := pm.source(c.out); got != c.in {
			t.Errorf("source(%v) = %v, want %v", c.out, got, c.in)
		}
	}
}
