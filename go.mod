module github.com/fencepost-dev/fencepost

go 1.26.0

require (
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
	pgregory.net/rapid v1.3.0
)

require go.uber.org/multierr v1.10.0 // indirect
