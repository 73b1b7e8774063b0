package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// LoginThrottle is the wrong-password throttle the store keeps per account
// (docs/PROTOCOL.md, "Accounts"): after Free failed attempts every further
// one waits Base, twice as long after each further failure, up to Max; a
// count with no failure for Forget starts afresh.
type LoginThrottle struct {
	Free              int
	Base, Max, Forget time.Duration
}

// Validate reports a throttle that cannot run.
func (p LoginThrottle) Validate() error {
	if p.Free < 1 || p.Base <= 0 || p.Max < p.Base || p.Forget <= 0 {
		return fmt.Errorf("%w: login throttle needs Free >= 1, 0 < Base <= Max and a positive Forget (got %+v)", ErrInvalid, p)
	}
	return nil
}

// Delay is how long the next attempt waits after fails failed ones: 0
// below Free, then Base, doubling per failure up to Max.
func (p LoginThrottle) Delay(fails int) time.Duration {
	if fails < p.Free {
		return 0
	}
	d := p.Base
	for i := p.Free; i < fails && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

// ClaimLoginAttempt implements Queue.
func (s *sqlStore) ClaimLoginAttempt(ctx context.Context, userID int64, p LoginThrottle) (time.Duration, error) {
	const op = "claim a login attempt"
	if err := p.Validate(); err != nil {
		return 0, wrapOp(op, err)
	}
	if userID < 1 {
		return 0, wrapOp(op, fmt.Errorf("%w: user id %d", ErrInvalid, userID))
	}
	var wait time.Duration
	err := s.inTx(ctx, op, func(tx *sql.Tx) error {
		var one int
		switch err := tx.QueryRowContext(ctx, "SELECT 1 FROM users WHERE user_id = ?", userID).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%w: user %d", ErrNotFound, userID)
		case err != nil:
			return err
		}
		// The row exists and is locked from here to the commit, so that
		// attempts at several nodes are counted one after the other.
		ins := "INSERT INTO login_failures (user_id, fails, last_us, until_us) VALUES (?, 0, 0, 0) ON CONFLICT DO NOTHING"
		if s.d.name == "mysql" {
			ins = "INSERT INTO login_failures (user_id, fails, last_us, until_us) VALUES (?, 0, 0, 0) ON DUPLICATE KEY UPDATE fails = fails"
		}
		if _, err := tx.ExecContext(ctx, ins, userID); err != nil {
			return err
		}
		q := "SELECT fails, last_us, until_us, " + s.d.clockUS + " FROM login_failures WHERE user_id = ?" + s.d.forUpdate
		args := []any{userID}
		if s.d.clockUS == "?" {
			args = []any{s.nowUS(), userID}
		}
		var fails int
		var last, until, now int64
		if err := tx.QueryRowContext(ctx, q, args...).Scan(&fails, &last, &until, &now); err != nil {
			return err
		}
		if until > now {
			wait = time.Duration(until-now) * time.Microsecond
			return nil
		}
		if now-last > p.Forget.Microseconds() {
			fails = 0
		}
		fails++
		until = 0
		if d := p.Delay(fails); d > 0 {
			until = now + d.Microseconds()
		}
		_, err := tx.ExecContext(ctx, "UPDATE login_failures SET fails = ?, last_us = ?, until_us = ? WHERE user_id = ?",
			fails, now, until, userID)
		return err
	})
	if err != nil {
		return 0, err
	}
	return wait, nil
}

// ClearLoginFailures implements Queue.
func (s *sqlStore) ClearLoginFailures(ctx context.Context, userID int64) error {
	const op = "clear login failures"
	if userID < 1 {
		return wrapOp(op, fmt.Errorf("%w: user id %d", ErrInvalid, userID))
	}
	return s.inTx(ctx, op, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM login_failures WHERE user_id = ?", userID)
		return err
	})
}
