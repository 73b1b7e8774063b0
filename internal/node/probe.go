package node

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/token"
)

// ProbeLogMessage is the message of the log line the mutex probe writes
// for every increment; tests count these lines.
const ProbeLogMessage = "mutex probe increment"

// ProbeUnknownLogMessage is the line for an increment whose COMMIT went
// unanswered (store.ErrCommitUnknown): the store may hold it or not.
const ProbeUnknownLogMessage = "mutex probe increment, outcome unknown"

// MutexProbe returns a test-only Section: in every critical section it
// reads the probe counter, waits a random 0-2 ms, writes the value plus one
// in a separate statement and logs the increment. If two critical sections
// ever overlapped, increments would be lost and the counter would fall
// behind the number of logged increments.
func MutexProbe(log zerolog.Logger) Section {
	return func(ctx context.Context, tok token.Token, fenced Fenced) (json.RawMessage, bool, error) {
		var v int64
		err := fenced(func(tx store.Tx) error {
			var err error
			if v, err = tx.ProbeCounter(); err != nil {
				return err
			}
			pause := time.Duration(rand.Int64N(int64(2*time.Millisecond) + 1))
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			v++
			return tx.SetProbeCounter(v)
		})
		if err != nil {
			if errors.Is(err, store.ErrCommitUnknown) {
				log.Warn().Int64("value", v).Int64("gen", tok.Gen).Int64("seq", tok.Seq).Msg(ProbeUnknownLogMessage)
			}
			return tok.App, false, err
		}
		log.Info().Int64("value", v).Int64("gen", tok.Gen).Int64("seq", tok.Seq).Msg(ProbeLogMessage)
		// Not "worked": the probe keeps the ring's idle pace.
		return tok.App, false, nil
	}
}
