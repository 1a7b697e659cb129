package app

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
)

// TestBinarySASLTLS runs the binary with configs/sasl-tls.yaml against
// kfake with TLS and SASL/SCRAM-SHA-512.
func TestBinarySASLTLS(t *testing.T) {
	ca := kafkatest.NewCA(t)
	const user, password = "order-enricher", "Orchid-Secret-1618"
	c := kafkatest.NewWithClient(t, 1,
		[]kgo.Opt{kgo.DialTLSConfig(ca.ClientTLS()), kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism())},
		kfake.TLS(ca.ServerTLS()), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", user, password))
	binarySASLTLS(t, c.Kafka, c.Addrs[0], ca.CAFile, user, password)
}

// binarySASLTLS: the example configuration for a cluster with TLS and
// SCRAM (configs/sasl-tls.yaml) runs as documented, with the bootstrap
// address, CA and credentials from the environment: its consumer group,
// its produce stage, its dead-letter topic and its lag monitor all
// authenticate; the password appears in no output.
func binarySASLTLS(t *testing.T, c *kafkatest.Kafka, bootstrap, caFile, user, password string) {
	for _, topic := range []string{"orders", "orders.enriched", "orders.dlq"} {
		c.CreateTopic(t, topic, 1)
	}
	for i := 0; i < 20; i++ {
		v := fmt.Sprintf(`{"order_id": %d, "amount": %d}`, i, 10*i)
		if i%5 == 4 {
			v = `{"note": "no order id"}` // the json stage rejects it: a dead letter
		}
		if err := c.ProduceE("orders", 0, 1, 1, func(int) []byte { return []byte(v) }); err != nil {
			t.Fatal(err)
		}
	}
	_, file, _, _ := runtime.Caller(0)
	cfg := filepath.Join(filepath.Dir(file), "..", "..", "..", "configs", "sasl-tls.yaml")
	env := []string{"KAFKA_BOOTSTRAP=" + bootstrap, "KAFKA_CA_FILE=" + caFile, "KAFKA_USERNAME=" + user, "KAFKA_PASSWORD=" + password}
	p := startProcessor(t, env, "run", "-c", cfg, "--http", "off", "--max-records", "20", "--progress", "1s")
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderr)
	}
	if _, hw := c.Bounds(t, "orders.enriched", 0); hw != 16 {
		t.Errorf("orders.enriched has %d records, want 16", hw)
	}
	if _, hw := c.Bounds(t, "orders.dlq", 0); hw != 4 {
		t.Errorf("orders.dlq has %d records, want 4", hw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := c.Admin.FetchOffsets(ctx, "order-enricher")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("orders", 0); o.At != 20 {
		t.Errorf("committed %d, want 20", o.At)
	}
	// the lag comes from the monitor's own (franz-go) client
	if !strings.Contains(p.stderr.String(), "committed lag 0;") {
		t.Errorf("the summary does not report lag 0 (the lag monitor could not read the cluster?):\n%s", p.stderr)
	}
	if out := p.stdout.String() + p.stderr.String(); strings.Contains(out, password) {
		t.Fatal("the output shows the password")
	}
	toolsSASLTLS(t, cfg, env, bootstrap, caFile, user, password)
}

// toolsSASLTLS: offsets and consume reach the TLS and SCRAM cluster with
// the settings of the run's own configuration file, and with flags (the
// password from the environment).
func toolsSASLTLS(t *testing.T, cfg string, env []string, bootstrap, caFile, user, password string) {
	bin := processorBinary(t)
	var all strings.Builder
	run := func(args ...string) string {
		t.Helper()
		code, out, errOut := runProgram(t, bin, env, "", args...)
		all.WriteString(out + errOut)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	var d groupDescription
	if err := json.Unmarshal([]byte(run("offsets", "describe", "-c", cfg, "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Group != "order-enricher" || len(d.Partitions) != 1 || d.Partitions[0].Committed == nil || *d.Partitions[0].Committed != 20 ||
		d.Partitions[0].Lag != 0 {
		t.Errorf("describe with the file: %+v", d)
	}
	dead := jsonLines(t, run("consume", "-c", cfg, "--topic", "orders.dlq", "-o", "json"))
	if len(dead) != 4 || !slices.ContainsFunc(dead[0].Headers, func(h jsonHeader) bool { return h.Key == "fencepost.error.stage" }) {
		t.Errorf("the dead letters, with the file's settings: %+v", dead)
	}
	flags := []string{"--brokers", bootstrap, "--tls-ca", caFile, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", user}
	if out := run(append([]string{"consume", "--topic", "orders.enriched", "--count", "1", "-o", "value"}, flags...)...); !strings.Contains(out, `"order_id":0`) {
		t.Errorf("consume with flags: %q", out)
	}
	if strings.Contains(all.String(), password) {
		t.Fatal("the tools' output shows the password")
	}
}

// startProcessor starts the processor binary itself (the built-in stages);
// it is killed at the end of the test if still running.
func startProcessor(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	return startBinary(t, processorBinary(t), env, args...)
}

// processorBinary returns the path of the processor binary itself (the
// built-in stages), built once per test run.
func processorBinary(t *testing.T) string { return builtinProcessor.build(t) }
