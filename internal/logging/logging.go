// Package logging bridges loggers: the processor logs with zap, while
// stages and applications see the small stages.Logger interface (which
// *slog.Logger satisfies), so zap stays an implementation detail behind
// the public API.
package logging

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fencepost-dev/fencepost/stages"
)

// ForStage returns a stages.Logger writing to l: key-value pairs become
// zap fields. A nil l discards everything.
func ForStage(l *zap.Logger) stages.Logger {
	if l == nil {
		return stages.NopLogger
	}
	return stageLogger{zl: l, s: l.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

type stageLogger struct {
	zl *zap.Logger // what ToZap gives back
	s  *zap.SugaredLogger
}

func (l stageLogger) Debug(msg string, keyvals ...any) { l.s.Debugw(msg, keyvals...) }
func (l stageLogger) Info(msg string, keyvals ...any)  { l.s.Infow(msg, keyvals...) }
func (l stageLogger) Warn(msg string, keyvals ...any)  { l.s.Warnw(msg, keyvals...) }
func (l stageLogger) Error(msg string, keyvals ...any) { l.s.Errorw(msg, keyvals...) }

// ToZap returns a zap logger writing to l: the zap logger l wraps if it
// came from ForStage; one over l's handler if l is a *slog.Logger (its
// level decides what is written); otherwise one that calls l's methods
// with the fields as key-value pairs, every level enabled (l filters).
// A nil l discards everything.
func ToZap(l stages.Logger) *zap.Logger {
	switch x := l.(type) {
	case nil:
		return zap.NewNop()
	case stageLogger:
		return x.zl
	case *slog.Logger:
		return zap.New(&slogCore{h: x.Handler()})
	}
	return zap.New(&funcCore{l: l})
}

// keyvals returns the fields as key-value pairs, in order.
func keyvals(fields []zapcore.Field) []any {
	out := make([]any, 0, 2*len(fields))
	for _, f := range fields {
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for k, v := range enc.Fields {
			out = append(out, k, v)
		}
	}
	return out
}

// slogCore is a zapcore.Core writing to a slog.Handler.
type slogCore struct {
	h slog.Handler
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	var attrs []slog.Attr
	kv := keyvals(fields)
	for i := 0; i+1 < len(kv); i += 2 {
		attrs = append(attrs, slog.Any(kv[i].(string), kv[i+1]))
	}
	return &slogCore{h: c.h.WithAttrs(attrs)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.Add(keyvals(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

// funcCore is a zapcore.Core calling a stages.Logger's methods.
type funcCore struct {
	l    stages.Logger
	with []any
}

func (c *funcCore) Enabled(zapcore.Level) bool { return true }

func (c *funcCore) With(fields []zapcore.Field) zapcore.Core {
	return &funcCore{l: c.l, with: append(append([]any(nil), c.with...), keyvals(fields)...)}
}

func (c *funcCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}

func (c *funcCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	kv := append(append([]any(nil), c.with...), keyvals(fields)...)
	if e.LoggerName != "" {
		kv = append([]any{"logger", e.LoggerName}, kv...)
	}
	switch {
	case e.Level <= zapcore.DebugLevel:
		c.l.Debug(e.Message, kv...)
	case e.Level == zapcore.InfoLevel:
		c.l.Info(e.Message, kv...)
	case e.Level == zapcore.WarnLevel:
		c.l.Warn(e.Message, kv...)
	default:
		c.l.Error(e.Message, kv...)
	}
	return nil
}

func (c *funcCore) Sync() error { return nil }
