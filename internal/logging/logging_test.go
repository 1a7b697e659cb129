package logging

import (
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
