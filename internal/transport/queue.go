package transport

import "sync"

// frameQueueLimit bounds the frames queued in front of the Events channel
// once that channel is full: readers of the network then stop reading (TCP
// pushes back on the sender, the kernel drops datagrams).
const frameQueueLimit = 64

// eventQueue orders a transport's events and feeds them to the Events
// channel. push never blocks, so a transport calls it while holding its own
// lock, right after checking that the link an event concerns is still the
// current one: that check and the event's place in the order are one atomic
// step, which is what keeps events of replaced links out, and no lock is ever
// held while waiting for the consumer. One pump goroutine (run) moves events
// to the channel in order.
//
// Network readers call waitRoom before reading more, so the queue holds at
// most frameQueueLimit events plus one per reader, plus link events made by
// API calls (few, and never refused).
type eventQueue struct {
	out  chan Event
	wake chan struct{} // capacity 1: there is work for the pump

	mu       sync.Mutex
	items    []Event
	inflight bool          // the pump holds an event it has not delivered yet
	room     chan struct{} // closed when items drops below frameQueueLimit
}

func newEventQueue(buffer int) *eventQueue {
	return &eventQueue{
		out:  make(chan Event, buffer),
		wake: make(chan struct{}, 1),
		room: make(chan struct{}),
	}
}

// push appends ev. It never blocks. When nothing is queued ahead of it and
// the channel has room, ev goes straight to the channel: one goroutine
// hand-off less per frame on the common path.
func (q *eventQueue) push(ev Event) {
	q.mu.Lock()
	if len(q.items) == 0 && !q.inflight {
		select {
		case q.out <- ev:
			q.mu.Unlock()
			return
		default:
		}
	}
	q.items = append(q.items, ev)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// waitRoom waits until the queue is below its limit. It returns false if
// done was closed first.
func (q *eventQueue) waitRoom(done <-chan struct{}) bool {
	for {
		q.mu.Lock()
		if len(q.items) < frameQueueLimit {
			q.mu.Unlock()
			return true
		}
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
		case <-done:
			return false
		}
	}
}

// run moves events to the out channel until done is closed.
func (q *eventQueue) run(done <-chan struct{}) {
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			q.mu.Unlock()
			select {
			case <-q.wake:
				continue
			case <-done:
				return
			}
		}
		ev := q.items[0]
		q.items[0] = Event{}
		q.items = q.items[1:]
		if len(q.items) == frameQueueLimit-1 {
			close(q.room)
			q.room = make(chan struct{})
		}
		q.inflight = true
		q.mu.Unlock()
		select {
		case q.out <- ev:
		case <-done:
			return
		}
		q.mu.Lock()
		q.inflight = false
		q.mu.Unlock()
	}
}
