package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/testutil"
)

// TestSequentialSendsNeverStall: one sender sends direct messages one after
// another (each STORED before the next) across a 5-node ring on MariaDB,
// faster than a connection's line rate allows once its burst is spent
// (50 lines a second, bursts of 200: about the 250th message). A message
// the node drops for the rate limit is refused by its id and sent again by
// SendWait, so no send waits for an answer that never comes (it did, until
// its timeout, every few hundred messages), and the recipient gets every
// message.
func TestSequentialSendsNeverStall(t *testing.T) {
	dsn := testutil.MySQLDSN(t)
	ids := []int64{1, 2, 3, 4, 5}
	r := testutil.NewRing(t, ringnodeBin, dsn, ids...)
	r.Start(1)
	st := openWhenMigrated(t, dsn)
	for _, id := range ids[1:] {
		r.Start(id)
	}
	c := &chatRing{r: r, st: st}
	alice := c.v2(t, 2, "alice", client.Options{AutoAck: true})
	bob := c.v2(t, 5, "bob", client.Options{AutoAck: true})
	var mu sync.Mutex
	got := map[string]bool{}
	go func() {
		for ev := range bob.Events() {
			if m, ok := ev.(client.ChatMessage); ok {
				mu.Lock()
				got[m.Content] = true
				mu.Unlock()
			}
		}
	}()
	go func() {
		for range alice.Events() { // receipts answer SendWait; nothing else is expected
		}
	}()
	const n = 600
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t0 := time.Now()
		_, err := alice.SendWait(ctx, client.ToUser("bob"), fmt.Sprintf("m%d", i))
		cancel()
		if err != nil {
			t.Fatalf("send %d at %s: %v after %v", i, t0.Format("15:04:05.000"), err, time.Since(t0))
		}
	}
	testutil.Eventually(t, within, fmt.Sprintf("bob has all %d messages", n), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n
	})
}
