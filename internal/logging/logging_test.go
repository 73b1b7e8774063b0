package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestJSONWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "info", FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Msg("hidden")
	log.Info().Int64("node", 3).Msg("hello")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	if line["message"] != "hello" || line["node"] != float64(3) || line["level"] != "info" {
		t.Errorf("line = %v", line)
	}
}

func TestConsoleFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "debug", FormatConsole)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Int64("node", 2).Msg("joined")
	if s := buf.String(); !strings.Contains(s, "joined") || !strings.Contains(s, "node=2") || strings.HasPrefix(s, "{") {
		t.Errorf("console line = %q", s)
	}
}

func TestBadOptions(t *testing.T) {
	for _, c := range [][2]string{{"loud", "json"}, {"info", "xml"}, {"", "json"}} {
		if _, err := New(&bytes.Buffer{}, c[0], c[1]); !errors.Is(err, ErrBadOption) {
			t.Errorf("New(%q, %q) err = %v", c[0], c[1], err)
		}
	}
}
