package broker

import "testing"

func TestApacheVersion(t *testing.T) {
	log := "fetching jars\nApache Kafka 4.1.1, 1 node(s), ready in 9.2s; logs under /tmp/x; Ctrl-C stops it\n"
	if got := apacheVersion(log); got != "4.1.1" {
		t.Errorf("apacheVersion = %q, want 4.1.1", got)
	}
	if got := apacheVersion("Apache Kafka is starting, please wait\n"); got != "" {
		t.Errorf("apacheVersion of a line with no version = %q", got)
	}
}
