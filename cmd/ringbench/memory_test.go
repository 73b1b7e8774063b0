package main

import (
	"os"
	"testing"
)

func TestReadRSS(t *testing.T) {
	rss, err := readRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss < 1<<20 || rss > 1<<34 {
		t.Fatalf("RSS of the test process %d bytes: not a plausible reading", rss)
	}
	if _, err := readRSS(-1); err == nil {
		t.Fatal("RSS of no process: no error")
	}
}
