package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ringchat/ringchat/internal/protocol"
)

// openAck is a chat message received on a connection that acknowledges
// cumulatively (ACK_UPTO): its sequence, and whether it may be
// acknowledged (its consumer has it, or it was a repeat).
type openAck struct {
	seq  int64
	done bool
}

// loginFeatures are the features a protocol-2 LOGIN asks for: Options'
// Features, FeatureLimits, and FeatureCumulativeAck if CumulativeAck.
func (c *Conn) loginFeatures() []string {
	features := withLimits(c.opts.Features)
	if c.opts.CumulativeAck && !slices.Contains(features, protocol.FeatureCumulativeAck) {
		features = append(slices.Clone(features), protocol.FeatureCumulativeAck)
	}
	return features
}

// grantCumulative records the login answer's features: the connection
// acknowledges with ACK_UPTO if it asked for the feature, the node
// granted it, and acknowledgements are automatic (AutoAck, or a
// Session's).
func (c *Conn) grantCumulative(features []string) {
	c.cumulative.Store(c.opts.CumulativeAck && (c.opts.AutoAck || c.opts.ownerAcks) &&
		slices.Contains(features, protocol.FeatureCumulativeAck))
}

// noteReceived records a chat message received (reader goroutine), on a
// connection that acknowledges cumulatively.
func (c *Conn) noteReceived(ev ChatMessage) {
	if !c.cumulative.Load() || ev.Seq <= 0 {
		return
	}
	c.ackMu.Lock()
	c.ackOpen = append(c.ackOpen, openAck{seq: ev.Seq})
	c.ackMu.Unlock()
}

// ackDone marks the received message with this sequence as one to
// acknowledge, and reports whether it was recorded (false: acknowledge
// it by id). Caller holds c.ackMu.
func (c *Conn) ackDone(seq int64) bool {
	if !c.cumulative.Load() || seq <= 0 {
		return false
	}
	// From the newest: AutoAck marks the message just received. Of two
	// copies of one message, marking the later one holds the frontier at
	// the earlier one: later, never wrong.
	for i := len(c.ackOpen) - 1; i >= 0; i-- {
		if a := &c.ackOpen[i]; a.seq == seq && !a.done {
			a.done = true
			return true
		}
	}
	return false
}

// ackFrontier takes the messages received, in order, up to the first not
// yet to acknowledge, and returns the newest sequence among them if no
// ACK_UPTO has named it yet (0: nothing new to send). Caller holds
// c.ackMu.
func (c *Conn) ackFrontier() int64 {
	n, i := c.ackSent, 0
	for i < len(c.ackOpen) && c.ackOpen[i].done {
		n = max(n, c.ackOpen[i].seq)
		i++
	}
	c.ackOpen = slices.Delete(c.ackOpen, 0, i)
	if n <= c.ackSent {
		return 0
	}
	c.ackSent = n
	return n
}

// errNoCumulativeAck: AckUpTo on a connection whose node did not grant
// protocol.FeatureCumulativeAck.
var errNoCumulativeAck = errors.New("client: the node did not grant " + protocol.FeatureCumulativeAck + " (log in with Options.CumulativeAck)")

// AckUpTo acknowledges every chat message received on this connection
// with a sequence up to seq (protocol 2, on a connection whose node
// granted protocol.FeatureCumulativeAck). Send the sequence of the newest
// message taken in, once every one before it on the connection is taken
// in. The node does not answer; it refuses a seq past the newest it
// handed to this connection with an ERROR on Events.
func (c *Conn) AckUpTo(ctx context.Context, seq int64) error {
	switch {
	case seq <= 0:
		return fmt.Errorf("client: ack up to %d: %w: the sequence is at least 1", seq, ErrInvalidMessage)
	case !c.Granted(protocol.FeatureCumulativeAck):
		return errNoCumulativeAck
	}
	if err := c.tell(ctx, protocol.AckUpToRequest{MessageType: protocol.TypeAckUpTo, Seq: seq}); err != nil {
		return fmt.Errorf("ack up to %d: %w", seq, err)
	}
	return nil
}
