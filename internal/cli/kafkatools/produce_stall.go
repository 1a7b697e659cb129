package kafkatools

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errStalled is the cause of a produce ended by watchStall.
var errStalled = errors.New("the brokers acknowledged nothing")

// progress counts the records produce handed to the client and those
// the client settled (acknowledged or failed).
type progress struct{ sent, settled atomic.Int64 }

// watchStall cancels with errStalled when records wait and none settled
// for a whole timeout: the client retries a record the brokers never
// take (a broker gone after the first answer, a partition without a
// leader) until the process is killed. It returns a function that stops
// the watch and waits for its end.
func watchStall(p *progress, timeout time.Duration, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(max(timeout/8, time.Millisecond))
		defer tick.Stop()
		since, last := time.Now(), p.settled.Load()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				settled := p.settled.Load()
				if settled != last || p.sent.Load() == settled {
					since, last = now, settled // progress, or nothing waits
					continue
				}
				if now.Sub(since) >= timeout {
					cancel(errStalled)
					return
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
