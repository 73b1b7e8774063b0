package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/ringchat/ringchat/internal/nodelist"
	"github.com/ringchat/ringchat/internal/store"
)

// The store baseline: the chat load written and read straight against the
// store, without a ring, so that the ring's cost shows against the store's
// own limit.
//
// One goroutine plays every node in turn, as the token would, but with no
// token, no network and no clients: each turn is one transaction that
// inserts a batch of messages from the node's users to random users
// (InsertMessages, as a visit stores its batch), then selects what waits
// for the users present at the node (PendingForNodeFair, with the chat
// service's limits) and deletes those rows (AckRows). The ring does more
// per message: it marks rows delivered in one visit and deletes them when
// the client's ACK comes back in a later one, and looks up which nodes
// have new work (WaitingFor).

type baselineOpts struct {
	nodes, clients int
	batch          int // messages inserted per turn
	duration       time.Duration
	fetchLimit     int // rows selected per turn (the chat service's FetchLimit)
	perRecipient   int // rows per recipient per turn (FetchPerClient)
}

type baselineResult struct {
	messages  int           // inserted, selected and deleted
	elapsed   time.Duration // until the last row was deleted
	turns     int           // transactions
	perSecond float64
	txMean    time.Duration
}

func runBaseline(ctx context.Context, st store.Store, o baselineOpts) (baselineResult, error) {
	var res baselineResult
	if o.nodes < 1 || o.clients < 2 || o.batch < 1 || o.fetchLimit < 1 || o.perRecipient < 1 {
		return res, fmt.Errorf("baseline: bad options %+v", o)
	}
	// Node rows (presence does not need them, but the store then looks
	// like a ring's) and users logged in at their node, as the chat
	// driver spreads its clients: client i at node i mod n.
	var nl []nodelist.Entry
	for id := 1; id <= o.nodes; id++ {
		nl = append(nl, nodelist.Entry{ID: int64(id), Host: "127.0.0.1", CoordPort: 1000 + id, ClientPort: 2000 + id})
	}
	if _, err := st.AddNodes(ctx, nl); err != nil {
		return res, err
	}
	users := make([]int64, o.clients)
	atNode := make([][]int, o.nodes) // client indexes per node
	err := st.Update(ctx, func(tx store.Tx) error {
		for i := range users {
			u, _, err := tx.EnsureUser(fmt.Sprintf("base%04d", i))
			if err != nil {
				return err
			}
			users[i] = u.ID
			node := i % o.nodes
			if err := tx.SetPresence(u.ID, int64(node+1)); err != nil {
				return err
			}
			atNode[node] = append(atNode[node], i)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("baseline: users: %w", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var txTime time.Duration
	inserted := 0
	start := time.Now()
	stopInserting := start.Add(o.duration)
	for turn := 0; ; turn++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		node := turn % o.nodes
		insert := time.Now().Before(stopInserting) && len(atNode[node]) > 0
		var ms []store.NewMessage
		var rcpts [][]int64
		if insert {
			now := time.Now()
			for range o.batch {
				from := atNode[node][rng.IntN(len(atNode[node]))]
				to := rng.IntN(o.clients - 1)
				if to >= from {
					to++
				}
				id, err := uuid.NewV7()
				if err != nil {
					return res, err
				}
				ms = append(ms, store.NewMessage{ID: id.String(), SenderID: users[from], ToUserID: users[to],
					Content: fmt.Sprintf("%d %d", from, now.UnixNano()), SentAt: now, NodeID: int64(node + 1)})
				rcpts = append(rcpts, []int64{users[to]})
			}
		}
		var got int
		t0 := time.Now()
		err := st.Update(ctx, func(tx store.Tx) error {
			got = 0
			if len(ms) > 0 {
				if _, err := tx.InsertMessages(ms, rcpts); err != nil {
					return err
				}
			}
			ds, err := tx.PendingForNodeFair(int64(node+1), o.perRecipient, o.fetchLimit)
			if err != nil {
				return err
			}
			if len(ds) == 0 {
				return nil
			}
			rows := make([]store.RecipientSeq, len(ds))
			for i, d := range ds {
				rows[i] = d.Row()
			}
			got, err = tx.AckRows(rows)
			return err
		})
		if err != nil {
			return res, fmt.Errorf("baseline: turn %d: %w", turn, err)
		}
		txTime += time.Since(t0)
		res.turns++
		inserted += len(ms)
		res.messages += got
		if !insert && res.messages >= inserted && node == o.nodes-1 {
			break
		}
		if !insert && time.Since(stopInserting) > time.Minute {
			return res, fmt.Errorf("baseline: %d of %d messages read back a minute after the last insert", res.messages, inserted)
		}
	}
	res.elapsed = time.Since(start)
	res.perSecond = float64(res.messages) / res.elapsed.Seconds()
	res.txMean = txTime / time.Duration(max(1, res.turns))
	return res, nil
}
