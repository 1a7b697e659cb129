package stages

// Logger is what a stage logs with: leveled messages with key-value
// pairs ("partition", 3, "offset", 17). The pipeline's Logger names each
// stage's messages after it. *slog.Logger satisfies Logger; so does the
// processor binary's own (zap) logger behind Env.Log.
type Logger interface {
	Debug(msg string, keyvals ...any)
	Info(msg string, keyvals ...any)
	Warn(msg string, keyvals ...any)
	Error(msg string, keyvals ...any)
}

// NopLogger is a Logger that discards everything.
var NopLogger Logger = nopLogger{}

type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}
