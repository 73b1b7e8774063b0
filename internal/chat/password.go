package chat

// runs on: the connections' reader goroutines; the address throttle is
// guarded by its own mutex, password hashes take slots of hashSem.

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
)

// Password hashes are argon2id in the PHC string format:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>, with OWASP's minimum
// parameters (19 MiB, 2 passes). The parameters are read back from the
// string, so they can be raised later without breaking stored hashes.
const (
	argonMemory  = 19 * 1024 // KiB
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

var errBadHash = errors.New("chat: unrecognised password hash")

// hashPassword returns the PHC string of password under a random salt.
func hashPassword(password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// checkPassword reports whether password matches the PHC string.
func checkPassword(hash, password string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	var mem, passes uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &passes, &threads); err != nil ||
		mem < 8 || mem > 1<<20 || passes < 1 || passes > 16 || threads < 1 {
		return false, errBadHash
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, errBadHash
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) < 16 || len(want) > 64 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(password), salt, passes, mem, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// HashPassword returns the stored form of a password (argon2id, PHC
// string), for the operator's tools.
func HashPassword(password string) (string, error) {
	if password == "" || len(password) > protocol.MaxPassword {
		return "", fmt.Errorf("chat: a password is 1 to %d bytes", protocol.MaxPassword)
	}
	return hashPassword(password)
}

// PasswordMatches reports whether password matches a stored hash.
func PasswordMatches(hash, password string) (bool, error) { return checkPassword(hash, password) }

// hash hashes password in one of the HashWorkers slots, waiting for a slot
// no longer than ctx allows.
func (s *Server) hash(ctx context.Context, password string) (string, *Error) {
	if e := s.hashSlot(ctx); e != nil {
		return "", e
	}
	defer func() { <-s.hashSem }()
	h, err := hashPassword(password)
	if err != nil {
		return "", errorf(protocol.CodeUnavailable, "could not hash the password: %v", err)
	}
	return h, nil
}

// checkAccount checks the password of u, an account with a password, in
// a hashing slot, under the store's wrong-password throttle: the attempt
// is counted in the store before the check (every node's attempts
// together get at most Throttle.Free checks before the waits begin) and
// the count cleared by the right password. A throttled attempt is
// refused without being checked.
func (s *Server) checkAccount(ctx context.Context, u store.User, password string) *Error {
	if e := s.hashSlot(ctx); e != nil {
		return e
	}
	release := sync.OnceFunc(func() { <-s.hashSem })
	defer release()
	wait, err := s.st.ClaimLoginAttempt(ctx, u.ID, s.cfg.Throttle.account())
	switch {
	case err != nil:
		return s.unavailableErr("counting a login attempt", err)
	case wait > 0:
		return throttled(u.Name, wait)
	}
	ok, err := checkPassword(u.PasswordHash, password)
	release()
	switch {
	case err != nil:
		s.log.Error().Err(err).Msg("chat: a stored password hash is unreadable")
		return errorf(protocol.CodeUnavailable, "the stored password cannot be checked")
	case !ok:
		return errorf(protocol.CodeBadPassword, "wrong password")
	}
	if err := s.st.ClearLoginFailures(ctx, u.ID); err != nil {
		// The password is right: the login goes on; the count stays
		// until the next right password.
		s.log.Warn().Err(err).Str("user", u.Name).Msg("chat: could not clear the failed logins")
	}
	return nil
}

func (s *Server) hashSlot(ctx context.Context) *Error {
	select {
	case s.hashSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errorf(protocol.CodeBusy, "node busy checking passwords; try again")
	}
}

// throttle counts failed logins per key (an address: this node's own
// count; wrong passwords per account are counted in the store, for every
// node at once) and says how long the next attempt must wait. Safe for
// concurrent use.
type throttle struct {
	cfg  ThrottleConfig
	mu   sync.Mutex
	keys map[string]*strikes
}

type strikes struct {
	fails int
	last  time.Time // of the last failure
	until time.Time // no attempt before
}

func newThrottle(cfg ThrottleConfig) *throttle {
	return &throttle{cfg: cfg, keys: map[string]*strikes{}}
}

// addressKey names an address's key: its host part (a client's port
// changes with every connection).
func addressKey(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return "a\x00" + host
	}
	return "a\x00" + remote
}

// wait returns how long an attempt for these keys must still wait (0: go).
func (t *throttle) wait(now time.Time, keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var d time.Duration
	for _, k := range keys {
		if st := t.keys[k]; st != nil {
			d = max(d, st.until.Sub(now))
		}
	}
	return d
}

// fail records a failed attempt: once the key has free failures its next
// attempt waits Base, twice as long after each further one, up to Max.
func (t *throttle) fail(now time.Time, key string, free int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.keys[key]
	if st != nil && now.Sub(st.last) > t.cfg.Forget {
		st = nil
	}
	if st == nil {
		if len(t.keys) >= t.cfg.MaxKeys {
			t.evictLocked(now)
		}
		st = &strikes{}
		t.keys[key] = st
	}
	st.fails++
	st.last = now
	if d := t.cfg.policy(free).Delay(st.fails); d > 0 {
		st.until = now.Add(d)
	}
}

// evictLocked makes room for one key: every forgotten key goes, and if
// none was, the one whose last failure is the oldest.
func (t *throttle) evictLocked(now time.Time) {
	var oldest string
	var at time.Time
	for k, st := range t.keys {
		if now.Sub(st.last) > t.cfg.Forget {
			delete(t.keys, k)
			continue
		}
		if oldest == "" || st.last.Before(at) {
			oldest, at = k, st.last
		}
	}
	if len(t.keys) >= t.cfg.MaxKeys {
		delete(t.keys, oldest)
	}
}

// len is how many keys are tracked.
func (t *throttle) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}
