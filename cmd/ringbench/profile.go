package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/ringchat/ringchat/internal/procutil"
)

// nodeProfiles takes each node's CPU profile (pprof, served on a metrics
// port of its own) over a phase of a benchmark. A nil one takes none.
type nodeProfiles struct {
	dir   string
	addrs []string // node i+1's metrics address
}

// newNodeProfiles prepares CPU profiles of n nodes into dir (nil when dir
// is empty).
func newNodeProfiles(dir string, n int) (*nodeProfiles, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := procutil.FreePorts(n)
	if err != nil {
		return nil, err
	}
	p := &nodeProfiles{dir: dir}
	for _, port := range ports {
		p.addrs = append(p.addrs, "127.0.0.1:"+strconv.Itoa(port))
	}
	return p, nil
}

// flags are node id's extra ringnode flags: pprof on its metrics port.
func (p *nodeProfiles) flags(id int64) []string {
	if p == nil {
		return nil
	}
	return []string{"--metrics-addr", p.addrs[id-1], "--pprof"}
}

// take starts every node's profile of the next d and returns a function
// that waits for them and writes them.
func (p *nodeProfiles) take(ctx context.Context, d time.Duration) func() error {
	if p == nil {
		return func() error { return nil }
	}
	secs := max(1, int(d/time.Second))
	errs := make([]error, len(p.addrs))
	var wg sync.WaitGroup
	for i, addr := range p.addrs {
		wg.Go(func() {
			errs[i] = p.fetch(ctx, addr, secs, filepath.Join(p.dir, fmt.Sprintf("node-%d.pprof", i+1)))
		})
	}
	return func() error {
		wg.Wait()
		return errors.Join(errs...)
	}
}

func (p *nodeProfiles) fetch(ctx context.Context, addr string, secs int, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cpu profile of %s: %s", addr, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
