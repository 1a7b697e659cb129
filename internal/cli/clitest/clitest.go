// Package clitest helps test the processor's commands in process: run a
// command line with a registry and stdin and collect what it printed, a
// registry of two stages with options of each kind the listing shows, a
// good and a bad configuration for it, files, polling, and a franz-go
// client.
// Only tests import it.
package clitest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// Run runs the command line args in process, with reg's stages, stdin
// as the input, and the commands cmds returns under the root; it returns
// the exit code and what was printed.
func Run(ctx context.Context, reg *stages.Registry, stdin string, cmds func(*clibase.Env) []*cobra.Command, args ...string) (code int, stdout, stderr string) {
	var out, errOut stagetest.Buffer
	env := &clibase.Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Registry: reg}
	code = clibase.Execute(ctx, env, args, cmds(env)...)
	return code, out.String(), errOut.String()
}

// WriteFile writes content to the file name in dir and returns its path.
func WriteFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// WaitUntil polls cond until it holds, or fails t after timeout naming
// what it waited for.
func WaitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreeAddr returns a loopback address nothing listens on.
func FreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// Client returns a franz-go client to the cluster at addr that writes
// records to the partition they name; the caller closes it.
func Client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func Registry() *stages.Registry {
	reg := &stages.Registry{}
	pass := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) { return in, nil })
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(reg.Register(stages.Spec{
		Name: "filter", Summary: "Keep the records an expression accepts.", ExactlyOnce: true,
		Options: []stages.OptionSpec{{Name: "if", Type: stages.TypeExpr, Required: true, Doc: "The condition."}},
		New: func(o stages.Options, _ stages.Env) (stages.Stage, error) {
			cond, err := o.String("if")
			if err != nil {
				return nil, err
			}
			if strings.Count(cond, "(") != strings.Count(cond, ")") {
				return nil, &stages.OptionError{Option: "if", Err: errors.New("unbalanced parentheses")}
			}
			return pass, nil
		},
	}))
	must(reg.Register(stages.Spec{
		Name: "stdout", Summary: "Print records.",
		Options: []stages.OptionSpec{
			{Name: "format", Type: stages.TypeString, Default: "text", Enum: []string{"text", "json", "value"}, Doc: "How to print."},
			{Name: "every", Type: stages.TypeInt, Default: 1, Doc: "Print one record in every n."},
		},
		New: func(stages.Options, stages.Env) (stages.Stage, error) { return pass, nil },
	}))
	return reg
}

// GoodConfig is a configuration with no problem for Registry's stages.
const GoodConfig = `kafka: {brokers: ["localhost:9092"]}
consumer: {group: g, topics: [orders]}
pipeline:
  - stage: filter
    if: value != ""
`

// BadConfig is a configuration with three problems for Registry's stages:
// no consumer.group (line 2), unbalanced parentheses in filter's if
// (line 5) and a format stdout does not have (line 7).
const BadConfig = `kafka: {brokers: ["localhost:9092"]}
consumer: {topics: [orders]}
pipeline:
  - stage: filter
    if: (value
  - stage: stdout
    format: yaml
`
