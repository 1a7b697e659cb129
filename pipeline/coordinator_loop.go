package pipeline

import (
	"context"
	"time"

	"github.com/fencepost-dev/fencepost/internal/engine/process"
)

// coordinatorLoop runs a coordinator on its own goroutine: it receives
// events, applies them, and delivers the coordinator's messages for
// processing and its notices without ever blocking on them while events
// wait. The steps, the group member and the application send events
// with send, which blocks only until the loop takes the event (the loop
// always takes events).
type coordinatorLoop struct {
	c        *coordinator
	events   chan event
	reports  chan *process.Report // from processing
	process  chan<- process.Message
	notices  chan<- notice
	tick     time.Duration
	clock    func() time.Time
	stopped  chan struct{}
	queued   []notice
	pendingP []process.Message
}

func newCoordinatorLoop(c *coordinator, toProcess chan<- process.Message, notices chan<- notice, tick time.Duration) *coordinatorLoop {
	if tick <= 0 {
		tick = 50 * time.Millisecond
	}
	return &coordinatorLoop{
		c:       c,
		events:  make(chan event, 256),
		reports: make(chan *process.Report, 1),
		process: toProcess,
		notices: notices,
		tick:    tick,
		clock:   time.Now,
		stopped: make(chan struct{}),
	}
}

// send delivers an event to the coordinator. It returns false if ctx ended
// or the coordinator stopped first.
func (l *coordinatorLoop) send(ctx context.Context, ev event) bool {
	select {
	case <-l.stopped:
		return false
	default:
	}
	select {
	case l.events <- ev:
		return true
	case <-ctx.Done():
		return false
	case <-l.stopped:
		return false
	}
}

// run owns the coordinator until ctx ends.
func (l *coordinatorLoop) run(ctx context.Context) {
	defer close(l.stopped)
	t := time.NewTicker(l.tick)
	defer t.Stop()
	for {
		if m, ok := l.c.takeProcessMessage(); ok {
			l.pendingP = append(l.pendingP, m)
		}
		if len(l.c.notices) > 0 {
			l.queued = append(l.queued, l.c.notices...)
			clear(l.c.notices)
			l.c.notices = l.c.notices[:0]
		}
		var (
			procCh   chan<- process.Message
			procMsg  process.Message
			noticeCh chan<- notice
			next     notice
		)
		if len(l.pendingP) > 0 {
			procCh, procMsg = l.process, l.pendingP[0]
		}
		if len(l.queued) > 0 && l.notices != nil {
			noticeCh, next = l.notices, l.queued[0]
		}
		select {
		case <-ctx.Done():
			return
		case ev := <-l.events:
			l.c.now = l.clock()
			l.c.handle(ev)
		case r := <-l.reports:
			l.c.now = l.clock()
			l.c.handle(processedEvent{r})
		case now := <-t.C:
			l.c.handle(tickEvent{now: now})
		case procCh <- procMsg:
			l.pendingP[0] = process.Message{}
			l.pendingP = l.pendingP[1:]
		case noticeCh <- next:
			l.queued[0] = notice{}
			l.queued = l.queued[1:]
		}
	}
}
