package tui

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
)

// savedState is what the state file keeps between runs: the open
// conversations in tab order ("bob", "#ops") and the current one.
type savedState struct {
	Open    []string `json:"open"`
	Current string   `json:"current,omitempty"`
	// Unread: the unread counts of the conversations that have some.
	Unread map[string]int `json:"unread,omitempty"`
}

// StateFile is the file keeping user's open conversations under dir
// (a state directory such as ~/.local/state/ringchat).
func StateFile(dir, user string) string {
	return filepath.Join(dir, SafeFileName(user)+".json")
}

// restore opens the conversations of the state file and returns the
// commands loading their recent history; a file that cannot be read is
// reported and left alone until the next change.
func (m *Model) restore() tea.Cmd {
	path := m.cfg.StateFile
	st, err := readState(path)
	if err != nil {
		m.errorf("conversations not restored: %s", errText(err))
		return nil
	}
	var cmds []tea.Cmd
	for _, k := range st.Open {
		to, err := client.ParseRecipient(k)
		if err != nil || to.Name == "" {
			continue // not a conversation: skipped, and dropped at the next save
		}
		cmds = append(cmds, m.loadOnOpen(to))
		if n := st.Unread[k]; n > 0 && k != st.Current {
			m.convs[k].unread = n
		}
	}
	if c := m.convs[st.Current]; c != nil {
		m.cur = st.Current
		m.layout()
	}
	return tea.Batch(cmds...)
}

// readState reads a state file; a missing one is an empty state.
func readState(path string) (savedState, error) {
	var st savedState
	b, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err):
		return st, nil
	case err != nil:
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// saveState writes the open conversations to the state file (if any);
// the first failure is shown, and saving stops.
func (m *Model) saveState() {
	path := m.cfg.StateFile
	if path == "" || !m.restored {
		return
	}
	st := savedState{Open: []string{}, Current: m.cur}
	for _, k := range m.order {
		if k == "" {
			continue
		}
		st.Open = append(st.Open, k)
		if n := m.convs[k].unread; n > 0 {
			if st.Unread == nil {
				st.Unread = map[string]int{}
			}
			st.Unread[k] = n
		}
	}
	if err := writeFileAtomic(path, st); err != nil {
		m.cfg.StateFile = ""
		m.errorf("open conversations will not be remembered: %s", errText(err))
	}
}

// writeFileAtomic writes v as JSON to path through a temporary file, so a
// crash never leaves half a file; the directory is made 0700.
func writeFileAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".state-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
