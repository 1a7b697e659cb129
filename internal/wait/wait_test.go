package wait

import (
	"context"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	if !For(context.Background(), time.Millisecond) {
		t.Fatal("For returned false with a live context")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if For(ctx, time.Hour) {
		t.Fatal("For returned true with an ended context")
	}
	if time.Since(start) > time.Second {
		t.Fatal("For waited with an ended context")
	}
}
