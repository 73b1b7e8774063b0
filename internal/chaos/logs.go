package chaos

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"time"

	"github.com/ringchat/ringchat/internal/node"
)

// nodeLog is what the checks need from one incarnation's log.
type nodeLog struct {
	ProbeValues  []int64
	ProbeUnknown []int64          // increments whose COMMIT went unanswered: committed or not
	Coordinator  []int64          // epochs this node took the coordinator role for
	Drops        map[string]int   // reason -> drops: logged lines plus the drops they report as suppressed
	DropLines    map[string]int   // "via:reason" -> logged lines
	FramesBad    int              // "dropped a frame": authenticated but unusable
	FloodClosed  int              // "chat: closing a flooding client"
	Regenerated  int              // token-regenerated
	Elections    int              // election finished (won or learned)
	Panics       []string         // panic, fatal error or race report lines
	Messages     map[string]int   // count by message, for the curious
	StoreErrored int              // warn lines about store failures
	StoreFailed  []time.Time      // when a store operation failed (retried)
	Levels       map[string]int   // lines by level
	Other        map[string]int64 // misc numbers
}

// parseNodeLog reads a node's JSON log.
func parseNodeLog(path string) (nodeLog, error) {
	l := nodeLog{Drops: map[string]int{}, DropLines: map[string]int{}, Messages: map[string]int{}, Levels: map[string]int{},
		Other: map[string]int64{}}
	f, err := os.Open(path)
	if err != nil {
		return l, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		if b[0] != '{' {
			s := string(b)
			if strings.HasPrefix(s, "panic:") || strings.HasPrefix(s, "fatal error:") ||
				strings.Contains(s, "WARNING: DATA RACE") || strings.HasPrefix(s, "goroutine ") && strings.Contains(s, "[running]") {
				l.Panics = append(l.Panics, s)
			}
			continue
		}
		var m struct {
			Level      string    `json:"level"`
			Message    string    `json:"message"`
			Value      int64     `json:"value"`
			Epoch      int64     `json:"epoch"`
			Reason     string    `json:"reason"`
			Via        string    `json:"via"`
			Suppressed int       `json:"suppressed"`
			Time       time.Time `json:"time"`
		}
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		l.Levels[m.Level]++
		l.Messages[m.Message]++
		switch m.Message {
		case node.ProbeLogMessage:
			l.ProbeValues = append(l.ProbeValues, m.Value)
		case node.ProbeUnknownLogMessage:
			l.ProbeUnknown = append(l.ProbeUnknown, m.Value)
		case "coordinator":
			l.Coordinator = append(l.Coordinator, m.Epoch)
		case "dropped input":
			// The transport logs a reason at most once a second; the line
			// after reports how many of that reason it did not log, from
			// any source, so only the reason's total is exact (up to the
			// drops of its last second).
			l.Drops[m.Reason] += 1 + m.Suppressed
			l.DropLines[m.Via+":"+m.Reason]++
		case "dropped a frame":
			l.FramesBad++
		case "chat: closing a flooding client":
			l.FloodClosed++
		case "token-regenerated":
			l.Regenerated++
		case "election finished":
			l.Elections++
		case "store operation failed; retrying":
			l.StoreErrored++
			l.StoreFailed = append(l.StoreFailed, m.Time)
		case "critical section failed":
			l.StoreErrored++
		}
	}
	return l, sc.Err()
}
