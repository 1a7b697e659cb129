package run

import (
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fencepost-dev/fencepost/internal/config"
	"github.com/fencepost-dev/fencepost/internal/logging"
)

// newLogger returns a logger writing to w at the configured level and
// format (console for people, json for collectors), hiding what r hides
// (nil: nothing).
func newLogger(l config.Log, w io.Writer, r *logging.Redactor) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(l.Level)
	if err != nil {
		return nil, err
	}
	var enc zapcore.Encoder
	if l.Format == "json" {
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	} else {
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc = zapcore.NewConsoleEncoder(ec)
	}
	core := r.Core(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level))
	return zap.New(core, zap.AddStacktrace(zapcore.DPanicLevel)), nil
}
