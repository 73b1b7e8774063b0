package chat

import (
	"encoding/json"
	"slices"
)

// hint is the chat service's data in the token (token.Token.App): the ids
// of the nodes that have deliveries waiting since the token last visited
// them. A visit that stores messages adds the nodes where their recipients
// are logged in (store.Tx.NodesWithPending); a node finding itself in the
// list fetches, and removes itself. A node neither in the list nor with
// local work skips the store for that visit.
//
// On the wire: {"w":[2,5]}. An empty hint is no App data at all.
type hint struct {
	W []int64 `json:"w,omitempty"`
}

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

// update returns the hint without remove and with add, sorted, without
// duplicates.
func (h hint) update(remove int64, add []int64) hint {
	w := make([]int64, 0, len(h.W)+len(add))
	for _, id := range append(slices.Clone(h.W), add...) {
		if id != remove && id > 0 {
			w = append(w, id)
		}
	}
	slices.Sort(w)
	return hint{W: slices.Compact(w)}
}

// encode returns the App data for h (nil when empty).
func (h hint) encode() json.RawMessage {
	if len(h.W) == 0 {
		return nil
	}
	b, _ := json.Marshal(h) // a slice of integers cannot fail
	return b
}
