package client

import (
	"errors"
	"fmt"

	"github.com/ringchat/ringchat/internal/protocol"
)

// DefaultMaxMessageBytes is the largest message of a node that does not
// say (docs/PROTOCOL.md, Limits).
const DefaultMaxMessageBytes = protocol.MaxContentBytes

// ErrTooLong is Post's error for a message longer than the node takes:
// nothing of it was sent.
var ErrTooLong = errors.New("message too long")

// MaxMessageBytes is the largest message (bytes of UTF-8) the node takes,
// as its LOGIN answer said (FeatureLimits), or DefaultMaxMessageBytes.
func (c *Conn) MaxMessageBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxMessage > 0 {
		return c.maxMessage
	}
	return DefaultMaxMessageBytes
}

// MaxMessageBytes is the largest message the current node takes (the
// last node's while there is none).
func (s *Session) MaxMessageBytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxMessageLocked()
}

func (s *Session) maxMessageLocked() int {
	if s.conn != nil {
		s.maxMessage = s.conn.MaxMessageBytes()
	}
	if s.maxMessage > 0 {
		return s.maxMessage
	}
	return DefaultMaxMessageBytes
}

// TooLong is the refusal of a message of n bytes when the limit is max:
// nil if it fits.
func TooLong(n, max int) error {
	if n <= max {
		return nil
	}
	return fmt.Errorf("%w: %d bytes, over the limit of %d bytes per message; nothing was sent", ErrTooLong, n, max)
}

// withLimits adds FeatureLimits to features.
func withLimits(features []string) []string {
	for _, f := range features {
		if f == protocol.FeatureLimits {
			return features
		}
	}
	return append(append([]string(nil), features...), protocol.FeatureLimits)
}
