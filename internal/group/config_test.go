package group

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidation(t *testing.T) {
	ok := Config{Brokers: []string{"b:9092"}, Group: "g", Topics: []string{"t"}}
	tests := []struct {
		name   string
		modify func(*Config)
		want   string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no brokers", func(c *Config) { c.Brokers = nil }, "Brokers"},
		{"no group", func(c *Config) { c.Group = "" }, "Group"},
		{"no topics", func(c *Config) { c.Topics = nil }, "Topics"},
		{"unknown assignor", func(c *Config) { c.Assignors = []string{"sticky-ish"} }, "unknown assignor"},
		{"heartbeat above session", func(c *Config) { c.SessionTimeout, c.HeartbeatInterval = time.Second, 2*time.Second }, "HeartbeatInterval"},
		{"unknown protocol", func(c *Config) { c.Protocol = "eager" }, "Protocol"},
		{"unknown remote assignor", func(c *Config) { c.Protocol, c.RemoteAssignor = ProtocolConsumer, "sticky" }, "RemoteAssignor"},
		{"consumer protocol", func(c *Config) { c.Protocol, c.RemoteAssignor = ProtocolConsumer, "range" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.modify(&c)
			got, err := c.withDefaults()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got.SessionTimeout != 45*time.Second || got.Assignors[0] != CooperativeSticky || got.Protocol == "" {
					t.Fatalf("defaults not applied: %+v", got)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrConfig naming %q", err, tt.want)
			}
		})
	}
}
