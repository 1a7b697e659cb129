package proc

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name, line string
		want       time.Duration
		wantErr    bool
	}{
		{"plain", "4242 (processor) S 1 4242 4242 0 -1 4194560 3051 0 0 0 157 23 0 0 20 0 9 0 1234 0 0", 1800 * time.Millisecond, false},
		{"name with spaces and parens", "77 (my (odd) name) R 1 77 77 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 0 0 0", 110 * time.Millisecond, false},
		{"no name", "77 R 1 2 3", 0, true},
		{"too short", "77 (x) S 1 2 3", 0, true},
		{"not a number", "77 (x) S 1 2 3 4 5 6 7 8 9 10 abc 6 0 0", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU(tc.line)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseStatusHWM(t *testing.T) {
	tests := []struct {
		name, status string
		want         int64
		wantErr      bool
	}{
		{"present", "Name:\tprocessor\nVmPeak:\t 2013452 kB\nVmHWM:\t  401232 kB\nVmRSS:\t  398000 kB\n", 401232 << 10, false},
		{"absent (a kernel thread)", "Name:\tkthreadd\nState:\tS (sleeping)\n", 0, true},
		{"no unit", "VmHWM:\t 12\n", 0, true},
		{"not a number", "VmHWM:\t lots kB\n", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatusHWM(tc.status)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("got %d, %v; want %d (error: %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// A child that burns CPU shows it in CPU() while running and in the
// usage after it is stopped, and leaves no process behind.
func TestGroupMeasuresAndStops(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	// A large heap here must not show in the child's peak RSS (it does
	// in getrusage's, see Usage.MaxRSS).
	ballast := make([]byte, 128<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	g := NewGroup(t.TempDir())
	c, err := g.Start("spin", "", sh, []string{"-c", "echo ready: yes; while :; do :; done"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.StopAll(time.Second)
	if got, err := c.WaitLine(t.Context(), "ready:", 10*time.Second); err != nil || got != "yes" {
		t.Fatalf("WaitLine = %q, %v", got, err)
	}
	time.Sleep(300 * time.Millisecond)
	cpu, err := c.CPU()
	if err != nil || cpu <= 0 {
		t.Errorf("CPU while spinning = %v, %v; want > 0", cpu, err)
	}
	peak, err := c.PeakRSS()
	if err != nil || peak <= 0 || peak > 64<<20 {
		t.Errorf("peak RSS of a shell = %d bytes, %v; want more than 0 and well under the %d of this test", peak, err, len(ballast))
	}
	runtime.KeepAlive(ballast)
	u, err := c.Stop(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if u.CPU < cpu || u.MaxRSS <= 0 {
		t.Errorf("usage %+v after %v of CPU while running", u, cpu)
	}
	if u.Err == nil {
		t.Error("a child ended by SIGTERM reports a clean exit")
	}
	if err := syscall.Kill(c.Pid(), 0); err != syscall.ESRCH {
		t.Errorf("signal 0 to the stopped child: %v, want ESRCH (it is gone)", err)
	}
}
