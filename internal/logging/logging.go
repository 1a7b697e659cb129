// Package logging bridges the processor's zap loggers to the logger
// interface stages see (stages.Logger), so zap stays an implementation
// detail behind the plugin API.
package logging

import (
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/stages"
)

// ForStage returns a stages.Logger writing to l: key-value pairs become
// zap fields. A nil l discards everything.
func ForStage(l *zap.Logger) stages.Logger {
	if l == nil {
		return stages.NopLogger
	}
	return stageLogger{l.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

type stageLogger struct{ s *zap.SugaredLogger }

func (l stageLogger) Debug(msg string, keyvals ...any) { l.s.Debugw(msg, keyvals...) }
func (l stageLogger) Info(msg string, keyvals ...any)  { l.s.Infow(msg, keyvals...) }
func (l stageLogger) Warn(msg string, keyvals ...any)  { l.s.Warnw(msg, keyvals...) }
func (l stageLogger) Error(msg string, keyvals ...any) { l.s.Errorw(msg, keyvals...) }
