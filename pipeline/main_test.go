package pipeline

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

// TestMain raises rapid's default number of steps so the state-machine
// test runs well over 10,000 steps per run (a flag given on the command
// line wins), and checks that no test leaves a goroutine behind.
func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["rapid.steps"] {
		if f := flag.Lookup("rapid.steps"); f != nil {
			_ = f.Value.Set("250")
		}
	}
	goleak.VerifyTestMain(m)
}
