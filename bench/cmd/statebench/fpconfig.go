//go:build unix

package main

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
)

// fencepostConfig returns the processor's configuration (YAML) of job
// ("window" or "join"), and the environment variables a variant sets
// (env.NAME=VALUE). A variant's other settings are dotted paths into the
// configuration, each value read as YAML (consumer.commit_interval=1s,
// consumer.concurrency=4, state.cache_bytes=32MiB).
func fencepostConfig(job string, r runTopics, guarantee string, settings [][2]string) ([]byte, []string, error) {
	var stagesOf []any
	switch job {
	case "window":
		stagesOf = []any{
			map[string]any{"stage": "aggregate", "store": "counts",
				"window": map[string]any{"type": "tumbling", "size": fmt.Sprintf("%dms", r.windowMs), "grace": fmt.Sprintf("%dms", r.graceMs)},
				"fields": map[string]any{"count": "count()"}, "emit": "on_close"},
			map[string]any{"stage": "produce", "topic": r.output},
		}
	case "join":
		stagesOf = []any{
			map[string]any{"stage": "join", "table": r.table, "as": joinAs, "type": "inner"},
			map[string]any{"stage": "produce", "topic": r.output},
		}
	default:
		return nil, nil, fmt.Errorf("job %q: want window or join", job)
	}
	cfg := map[string]any{
		"kafka": map[string]any{"brokers": r.brokers},
		// commit_interval is fencepost's default, stated: Kafka Streams
		// runs at the same
		"consumer":         map[string]any{"group": r.group, "topics": []any{r.input}, "commit_interval": "100ms"},
		"guarantee":        guarantee,
		"state":            map[string]any{"dir": r.stateDir},
		"pipeline":         stagesOf,
		"log":              map[string]any{"level": "warn"},
		"shutdown_timeout": "30s",
	}
	var env []string
	for _, kv := range settings {
		if name, ok := strings.CutPrefix(kv[0], "env."); ok {
			env = append(env, name+"="+kv[1])
			continue
		}
		if err := setPath(cfg, kv[0], kv[1]); err != nil {
			return nil, nil, err
		}
	}
	b, err := yaml.Marshal(cfg)
	return b, env, err
}

// joinAs is the member the join adds the user's row under, in both
// engines.
const joinAs = "profile"

// setPath sets the dotted path in cfg to value, read as YAML.
func setPath(cfg map[string]any, path, value string) error {
	var v any
	if err := yaml.Unmarshal([]byte(value), &v); err != nil {
		return fmt.Errorf("fencepost setting %s=%s: the value is not YAML: %w", path, value, err)
	}
	parts := strings.Split(path, ".")
	m := cfg
	for i, p := range parts[:len(parts)-1] {
		if p == "" {
			return fmt.Errorf("fencepost setting %q: an empty part in the path", path)
		}
		switch next := m[p].(type) {
		case nil:
			n := map[string]any{}
			m[p] = n
			m = n
		case map[string]any:
			m = next
		default:
			return fmt.Errorf("fencepost setting %q: %s is not a section (set keys of consumer, state, kafka...; the pipeline is the job's)",
				path, strings.Join(parts[:i+1], "."))
		}
	}
	last := parts[len(parts)-1]
	if last == "" {
		return fmt.Errorf("fencepost setting %q: an empty part in the path", path)
	}
	if _, isMap := m[last].(map[string]any); isMap || last == "pipeline" {
		return fmt.Errorf("fencepost setting %q is a section: set one of its keys", path)
	}
	m[last] = v
	return nil
}
