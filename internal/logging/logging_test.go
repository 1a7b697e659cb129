package logging

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestForStage(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := ForStage(zap.New(core).Named("filter"))
	l.Debug("d", "offset", 7)
	l.Info("i")
	l.Warn("w", "partition", int32(3))
	l.Error("e", "err", "boom")
	got := logs.All()
	if len(got) != 4 {
		t.Fatalf("%d entries, want 4", len(got))
	}
	wantLevels := []zapcore.Level{zapcore.DebugLevel, zapcore.InfoLevel, zapcore.WarnLevel, zapcore.ErrorLevel}
	for i, e := range got {
		if e.Level != wantLevels[i] || e.LoggerName != "filter" {
			t.Errorf("entry %d: %v %q, want %v from filter", i, e.Level, e.LoggerName, wantLevels[i])
		}
	}
	if f := got[0].ContextMap(); f["offset"] != int64(7) {
		t.Errorf("fields %v, want offset 7", f)
	}
	ForStage(nil).Info("discarded") // no panic
}

func TestToZap(t *testing.T) {
	core, _ := observer.New(zapcore.DebugLevel)
	zl := zap.New(core)
	if ToZap(ForStage(zl)) != zl {
		t.Error("a logger from ForStage does not come back as the zap logger it wraps")
	}

	var buf bytes.Buffer
	sl := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	z := ToZap(sl).Named("pipeline").With(zap.String("group", "g"))
	z.Debug("hidden")
	z.Warn("partition reset", zap.Int64("from", 10), zap.Stringer("partition", stringer("t/0")))
	out := buf.String()
	if strings.Contains(out, "hidden") {
		t.Errorf("a debug message passed an info-level slog handler: %s", out)
	}
	for _, want := range []string{"level=WARN", `msg="partition reset"`, "group=g", "logger=pipeline", "from=10", "partition=t/0"} {
		if !strings.Contains(out, want) {
			t.Errorf("slog output %q lacks %q", out, want)
		}
	}

	var got []string
	f := recording(func(level, msg string, kv ...any) { got = append(got, fmt.Sprintf("%s %s %v", level, msg, kv)) })
	ToZap(f).With(zap.Int("a", 1)).Error("boom", zap.Bool("b", true))
	if len(got) != 1 || got[0] != "error boom [a 1 b true]" {
		t.Errorf("calls %q", got)
	}
	ToZap(nil).Info("discarded")
}

type stringer string

func (s stringer) String() string { return string(s) }

// recording is a stages.Logger calling one function.
type recording func(level, msg string, kv ...any)

func (r recording) Debug(msg string, kv ...any) { r("debug", msg, kv...) }
func (r recording) Info(msg string, kv ...any)  { r("info", msg, kv...) }
func (r recording) Warn(msg string, kv ...any)  { r("warn", msg, kv...) }
func (r recording) Error(msg string, kv ...any) { r("error", msg, kv...) }
