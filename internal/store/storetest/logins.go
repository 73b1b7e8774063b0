package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/store"
)

// loginTests check the wrong-password throttle the store keeps per
// account (store.Queue's ClaimLoginAttempt and ClearLoginFailures).
var loginTests = []conformanceTest{
	{"LoginThrottle", testLoginThrottle},
	{"LoginThrottleDoubles", testLoginThrottleDoubles},
	{"LoginThrottleForgets", testLoginThrottleForgets},
	{"LoginThrottleRace", testLoginThrottleRace},
}

// newAccount creates a user with a password hash and returns its id.
func newAccount(t *testing.T, st store.Queue, name string) int64 {
	t.Helper()
	var id int64
	update(t, st, func(tx store.Tx) error {
		u, _, err := tx.CreateUser(name, "hash-of-"+name)
		id = u.ID
		return err
	})
	return id
}

// claim calls ClaimLoginAttempt and fails the test on an error.
func claim(t *testing.T, st store.Queue, id int64, p store.LoginThrottle) time.Duration {
	t.Helper()
	d, err := st.ClaimLoginAttempt(ctx, id, p)
	if err != nil {
		t.Fatalf("ClaimLoginAttempt(%d): %v", id, err)
	}
	return d
}

// claims makes n claims and returns what each said.
func claims(t *testing.T, st store.Queue, id int64, p store.LoginThrottle, n int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for range n {
		out = append(out, claim(t, st, id, p))
	}
	return out
}

// testLoginThrottle: Free attempts go through, the next waits Base and
// is not counted; clearing (a right password) or a new password starts
// afresh; bad arguments change nothing; accounts are counted apart.
func testLoginThrottle(t *testing.T, newDSN NewDSN) {
	st := OpenQueue(t, newDSN(t))
	alice, bob := newAccount(t, st, "alice"), newAccount(t, st, "bob")
	p := store.LoginThrottle{Free: 3, Base: time.Hour, Max: 4 * time.Hour, Forget: 24 * time.Hour}
	waitsAnHour := func(d time.Duration) bool { return d > time.Hour-time.Minute && d <= time.Hour }
	got := claims(t, st, alice, p, 5)
	for i, d := range got {
		if (i < 3 && d != 0) || (i >= 3 && !waitsAnHour(d)) {
			t.Fatalf("claims = %v, want three 0s and then waits of 1h", got)
		}
	}
	// Refused attempts were not counted: after a right password the
	// account has its Free attempts again, then waits Base (not more).
	if err := st.ClearLoginFailures(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if got := claims(t, st, alice, p, 4); got[0] != 0 || got[1] != 0 || got[2] != 0 || !waitsAnHour(got[3]) {
		t.Fatalf("claims after a clear = %v, want 0 0 0 1h", got)
	}
	// Another account is counted apart.
	if d := claim(t, st, bob, p); d != 0 {
		t.Fatalf("bob's first claim waits %v", d)
	}
	// A new password forgets the failures too.
	update(t, st, func(tx store.Tx) error { return tx.SetPassword(alice, "new-hash") })
	if d := claim(t, st, alice, p); d != 0 {
		t.Fatalf("claim after a new password waits %v", d)
	}
	// Bad input: a clear error, nothing counted.
	for _, bad := range []store.LoginThrottle{
		{Free: 0, Base: time.Second, Max: time.Second, Forget: time.Hour},
		{Free: 3, Base: 0, Max: time.Second, Forget: time.Hour},
		{Free: 3, Base: time.Minute, Max: time.Second, Forget: time.Hour},
		{Free: 3, Base: time.Second, Max: time.Second, Forget: 0},
	} {
		if _, err := st.ClaimLoginAttempt(ctx, alice, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ClaimLoginAttempt(%+v) err = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := st.ClaimLoginAttempt(ctx, 99999, p); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown user: err = %v, want ErrNotFound", err)
	}
	for _, id := range []int64{0, -1} {
		if _, err := st.ClaimLoginAttempt(ctx, id, p); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("user id %d: err = %v, want ErrInvalid", id, err)
		}
		if err := st.ClearLoginFailures(ctx, id); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("clear user id %d: err = %v, want ErrInvalid", id, err)
		}
	}
	if err := st.ClearLoginFailures(ctx, 99999); err != nil {
		t.Errorf("clearing a user without failures: %v", err)
	}
	// alice has had one counted attempt since her new password.
	if got := claims(t, st, alice, p, 3); got[0] != 0 || got[1] != 0 || !waitsAnHour(got[2]) {
		t.Fatalf("claims after refused ones = %v, want 0 0 1h", got)
	}
}

// waitOut claims until an attempt goes through (the store's clock passed
// the wait), failing the test if that takes longer than within.
func waitOut(t *testing.T, st store.Queue, id int64, p store.LoginThrottle, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for claim(t, st, id, p) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("user %d still throttled after %v", id, within)
		}
	}
}

// testLoginThrottleDoubles: each failure after the wait doubles the next
// wait, up to Max.
func testLoginThrottleDoubles(t *testing.T, newDSN NewDSN) {
	st := OpenQueue(t, newDSN(t))
	id := newAccount(t, st, "carol")
	p := store.LoginThrottle{Free: 1, Base: 500 * time.Millisecond, Max: 2 * time.Second, Forget: time.Hour}
	if d := claim(t, st, id, p); d != 0 {
		t.Fatalf("first claim waits %v", d)
	}
	if d := claim(t, st, id, p); d <= 0 || d > p.Base {
		t.Fatalf("second claim waits %v, want (0, %v]", d, p.Base)
	}
	waitOut(t, st, id, p, 10*time.Second) // the second failure: the next waits 1 s
	if d := claim(t, st, id, p); d <= p.Base || d > 2*p.Base {
		t.Fatalf("after the second failure the wait is %v, want (%v, %v]", d, p.Base, 2*p.Base)
	}
	for range 2 { // the third and fourth: 2 s, then still 2 s (Max)
		waitOut(t, st, id, p, 10*time.Second)
		if d := claim(t, st, id, p); d <= p.Max/2 || d > p.Max {
			t.Fatalf("wait %v, want (%v, %v]", d, p.Max/2, p.Max)
		}
	}
}

// testLoginThrottleForgets: a count whose last failure is older than
// Forget starts afresh.
func testLoginThrottleForgets(t *testing.T, newDSN NewDSN) {
	st := OpenQueue(t, newDSN(t))
	id, clock := newAccount(t, st, "dave"), newAccount(t, st, "clock")
	p := store.LoginThrottle{Free: 2, Base: time.Hour, Max: time.Hour, Forget: 300 * time.Millisecond}
	if d := claim(t, st, id, p); d != 0 {
		t.Fatalf("first claim waits %v", d)
	}
	// Another account's wait tells when the store's clock has moved on
	// past Forget.
	tick := store.LoginThrottle{Free: 1, Base: 600 * time.Millisecond, Max: time.Second, Forget: time.Hour}
	claim(t, st, clock, tick)
	waitOut(t, st, clock, tick, 10*time.Second)
	// Forgotten: two attempts again before the wait (without forgetting,
	// the second would wait an hour).
	if got := claims(t, st, id, p, 3); got[0] != 0 || got[1] != 0 || got[2] <= 0 {
		t.Fatalf("claims after a quiet spell = %v, want 0 0 and a wait", got)
	}
}

// testLoginThrottleRace: attempts at several nodes at once (several
// handles) together get exactly Free checks.
func testLoginThrottleRace(t *testing.T, newDSN NewDSN) {
	dsn := newDSN(t)
	st := OpenQueue(t, dsn)
	id := newAccount(t, st, "erin")
	p := store.LoginThrottle{Free: 3, Base: time.Hour, Max: time.Hour, Forget: time.Hour}
	const handles, each = 5, 4
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		checked int
		errs    []error
	)
	start := make(chan struct{})
	for range handles {
		h := OpenQueue(t, dsn)
		wg.Go(func() {
			<-start
			for range each {
				d, err := h.ClaimLoginAttempt(ctx, id, p)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if d == 0 {
					checked++
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if checked != p.Free {
		t.Fatalf("%d of %d concurrent attempts went through, want exactly %d", checked, handles*each, p.Free)
	}
}
