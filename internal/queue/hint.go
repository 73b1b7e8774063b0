package queue

// runs on: the visit goroutine; a hint is a value, decoded from the
// token and encoded back at every visit.

import (
	"encoding/json"
	"slices"

	"github.com/ringchat/ringchat/internal/store"
)

// hint is the queue's data in the token (token.Token.App): the ids
// of the nodes that have deliveries waiting since the token last visited
// them and, for some of them, the only users there they wait for. A visit
// that stores messages adds where their recipients are logged in
// (store.Tx.WaitingFor); a node finding itself in the list fetches (for
// the users named, or for every user logged in there if none are), and
// removes itself. A node neither in the list nor with local work skips the
// store for that visit.
//
// Naming the users keeps a direct message's fetch to its recipient: on a
// node with hundreds of users online, reading everyone's queue for one
// message costs ten times more than the message.
//
// On the wire: {"w":[2,5],"u":{"5":[17,40]}} (node 2: every user; node 5:
// users 17 and 40). An empty hint is no App data at all.
type hint struct {
	W []int64 `json:"w,omitempty"`
	// U: for nodes of W, the users there with deliveries waiting; a node
	// of W without an entry may have them for every user.
	U map[int64][]int64 `json:"u,omitempty"`
	// N: READ and TYPING notices going round (notice.go).
	N []Notice `json:"n,omitempty"`
}

// Bounds of the users a hint names: per node (past it, the node fetches
// for everyone) and in all (past it, every node does).
const (
	hintUsersPerNode = 16
	hintUsersMax     = 256
)

// decodeHint reads the token's App data. Data it cannot read is reported,
// so that the caller fetches to be safe.
func decodeHint(raw json.RawMessage) (hint, error) {
	var h hint
	if len(raw) == 0 {
		return h, nil
	}
	err := json.Unmarshal(raw, &h)
	return h, err
}

func (h hint) has(id int64) bool { return slices.Contains(h.W, id) }

// users returns the users the hint names at node id, and whether it names
// any: if not, and the node is in the hint, every user there may have
// deliveries waiting. A list longer than the hint's bound (a token from
// elsewhere) counts as none.
func (h hint) users(id int64) ([]int64, bool) {
	u, ok := h.U[id]
	if !ok || len(u) == 0 || len(u) > hintUsersPerNode || !h.has(id) {
		return nil, false
	}
	return u, true
}

// update returns the hint without node remove and with add, nodes sorted,
// without duplicates; a node named for every user stays so.
func (h hint) update(remove int64, add []store.Waiting) hint {
	w := make([]int64, 0, len(h.W)+len(add))
	u := map[int64][]int64{}
	for _, id := range h.W {
		if id == remove || id <= 0 {
			continue
		}
		w = append(w, id)
		if us, ok := h.users(id); ok {
			u[id] = slices.Clone(us)
		}
	}
	for _, a := range add {
		if a.Node == remove || a.Node <= 0 {
			continue
		}
		seen := slices.Contains(w, a.Node)
		switch {
		case !seen:
			w = append(w, a.Node)
			if !a.All && len(a.Users) > 0 {
				u[a.Node] = slices.Clone(a.Users)
			}
		case a.All || len(a.Users) == 0:
			delete(u, a.Node)
		case u[a.Node] != nil: // seen for some users: these too
			u[a.Node] = append(u[a.Node], a.Users...)
		}
	}
	slices.Sort(w)
	w = slices.Compact(w)
	total := 0
	for id, us := range u {
		slices.Sort(us)
		us = slices.Compact(us)
		if len(us) > hintUsersPerNode {
			delete(u, id)
			continue
		}
		u[id] = us
		total += len(us)
	}
	if total > hintUsersMax {
		clear(u)
	}
	if len(u) == 0 {
		u = nil
	}
	return hint{W: w, U: u}
}

// encode returns the App data for h (nil when empty).
func (h hint) encode() json.RawMessage {
	if len(h.W) == 0 && len(h.N) == 0 {
		return nil
	}
	b, _ := json.Marshal(h) // integers and names cannot fail
	return b
}
