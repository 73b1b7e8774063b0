package store

import (
	"context"
	"fmt"
)

// MaxHealthLen bounds a node's health line (SetHealth).
const MaxHealthLen = 255

func (s *sqlStore) SetHealth(ctx context.Context, nodeID int64, health string) error {
	if len(health) > MaxHealthLen {
		return wrapOp("record node health", fmt.Errorf("%w: health line of %d bytes", ErrInvalid, len(health)))
	}
	q := "UPDATE nodes SET health = ?, health_us = " + s.d.clockUS + " WHERE node_id = ?"
	args := []any{health, nodeID}
	if s.d.clockUS == "?" {
		args = []any{health, s.nowUS(), nodeID}
	}
	if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
		return wrapOp("record node health", err)
	}
	return nil
}
