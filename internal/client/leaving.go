package client

import (
	"context"
	"fmt"
)

// LoginV2Leaving is LoginV2 from a client that has just left node leaving
// because that node said it cannot serve (a Notice) or stopped answering:
// with FeatureFailover the new node replaces the user's presence there,
// which the node it left cannot clear while it is cut off from the store.
// A Session does this by itself; this is for callers that manage their own
// connections (the chaos suite's clients).
func (c *Conn) LoginV2Leaving(ctx context.Context, user, password string, leaving int64) error {
	if user == "" {
		return fmt.Errorf("client: login: %w: empty username", ErrInvalidMessage)
	}
	return c.loginV2(ctx, user, password, leaving)
}
