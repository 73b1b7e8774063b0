package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/ringchat/ringchat/internal/tui"
)

// fileConfig is what the config file sets; zero values are not set.
type fileConfig struct {
	node, nodes, user, logDir string
	bell, receipts            *bool
	colors                    tui.Colors
}

// configKeys are the keys of the config file, by table.
var configKeys = map[string][]string{
	"":       {"node", "nodes", "user", "bell", "receipts", "log_dir"},
	"colors": {"me", "mention", "time", "info", "error", "senders"},
}

// configPath is the config file to read: --config, else $RINGCHAT_CONFIG
// (both must exist), else $XDG_CONFIG_HOME/ringchat/config.toml or
// ~/.config/ringchat/config.toml if there is one.
func (g *globals) configPath(flags *pflag.FlagSet) (path string, must bool) {
	switch {
	case flags.Changed("config"):
		return g.config, true
	case g.getenv("RINGCHAT_CONFIG") != "":
		return g.getenv("RINGCHAT_CONFIG"), true
	}
	if d := g.getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "ringchat", "config.toml"), false
	}
	if h := g.getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "ringchat", "config.toml"), false
	}
	return "", false
}

// loadConfigFile reads the config file into g.file and makes its
// settings the defaults of the flags not given (the environment still
// wins over them: see resolve).
func (g *globals) loadConfigFile(flags *pflag.FlagSet) error {
	path, must := g.configPath(flags)
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && !must {
		return nil
	}
	if err != nil {
		return usagef("config file: %v", err)
	}
	defer f.Close()
	fc, err := parseConfig(f, g.getenv("HOME"))
	if err != nil {
		return usagef("%s:%v", path, err)
	}
	g.file = fc
	for flag, v := range map[string]struct {
		dst *string
		val string
	}{"node": {&g.node, fc.node}, "nodes": {&g.nodes, fc.nodes}, "user": {&g.user, fc.user}} {
		if v.val != "" && !flags.Changed(flag) {
			*v.dst = v.val
		}
	}
	return nil
}

// parseConfig reads the subset of TOML the config file is written in:
// "key = value" lines, "# comments", a [colors] table; values are
// strings ("..." or '...'), true/false, integers, and one-line arrays of
// strings. A leading ~/ of a path is home. Errors start with the line
// number.
func parseConfig(r io.Reader, home string) (fileConfig, error) {
	var fc fileConfig
	table, seen := "", map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(stripComment(sc.Text()))
		if line == "" {
			continue
		}
		if t, ok := tableName(line); ok {
			if _, known := configKeys[t]; !known || t == "" {
				return fc, fmt.Errorf("%d: unknown table [%s] (known: [colors])", n, t)
			}
			table = t
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return fc, fmt.Errorf("%d: want key = value, got %q", n, line)
		}
		full := strings.TrimPrefix(table+"."+k, ".")
		switch {
		case !slices.Contains(configKeys[table], k):
			return fc, fmt.Errorf("%d: unknown key %q (known: %s)", n, full, strings.Join(configKeys[table], ", "))
		case seen[full]:
			return fc, fmt.Errorf("%d: %s is set twice", n, full)
		}
		seen[full] = true
		if err := fc.set(full, v, home); err != nil {
			return fc, fmt.Errorf("%d: %s: %w", n, full, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fc, fmt.Errorf("reading: %w", err)
	}
	return fc, nil
}

// set gives the key full (table.key) the value written v.
func (fc *fileConfig) set(full, v, home string) error {
	c := &fc.colors
	switch full {
	case "bell", "receipts":
		b, err := strconv.ParseBool(v)
		if err != nil || (v != "true" && v != "false") {
			return fmt.Errorf("want true or false, got %s", v)
		}
		if full == "bell" {
			fc.bell = &b
		} else {
			fc.receipts = &b
		}
		return nil
	case "node":
		if _, err := strconv.Atoi(v); err == nil { // a node id
			fc.node = v
			return nil
		}
	case "colors.senders":
		list, err := parseStrings(v)
		for _, col := range list {
			if err == nil {
				err = checkColor(col)
			}
		}
		c.Senders = list
		return err
	}
	s, err := parseString(v)
	if err != nil {
		return err
	}
	dst := map[string]*string{"node": &fc.node, "nodes": &fc.nodes, "user": &fc.user, "log_dir": &fc.logDir,
		"colors.me": &c.Me, "colors.mention": &c.Mention, "colors.time": &c.Time, "colors.info": &c.Info, "colors.error": &c.Error}[full]
	if strings.HasPrefix(full, "colors.") {
		if err := checkColor(s); err != nil {
			return err
		}
	}
	if rest, ok := strings.CutPrefix(s, "~/"); ok && home != "" && (full == "nodes" || full == "log_dir") {
		s = filepath.Join(home, rest)
	}
	*dst = s
	return nil
}

var colorRE = regexp.MustCompile(`^(#[0-9a-fA-F]{6}|[0-9]{1,3})$`)

// checkColor accepts an ANSI 256 colour number or #rrggbb.
func checkColor(s string) error {
	if n, err := strconv.Atoi(s); (err == nil && n > 255) || !colorRE.MatchString(s) {
		return fmt.Errorf("colour %q: want 0 to 255 or #rrggbb", s)
	}
	return nil
}

// tableName reads a "[table]" line.
func tableName(line string) (string, bool) {
	if !strings.HasPrefix(line, "[") || !strings.HasSuffix(line, "]") {
		return "", false
	}
	return strings.TrimSpace(line[1 : len(line)-1]), true
}

// stripComment cuts a line at a # outside quotes.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote == 0 && r == '#':
			return line[:i]
		case quote == 0 && (r == '"' || r == '\''):
			quote = r
		case quote == r && (r == '\'' || i == 0 || line[i-1] != '\\'):
			quote = 0
		}
	}
	return line
}

// parseString reads "basic" (with escapes) or 'literal' TOML strings.
func parseString(v string) (string, error) {
	switch {
	case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' && !strings.Contains(v[1:len(v)-1], "'"):
		return v[1 : len(v)-1], nil
	case len(v) >= 2 && v[0] == '"':
		s, err := strconv.Unquote(v)
		if err == nil {
			return s, nil
		}
	}
	return "", fmt.Errorf("want a quoted string, got %s", v)
}

// parseStrings reads a one-line array of strings: ["a", "b"].
func parseStrings(v string) ([]string, error) {
	if !strings.HasPrefix(v, "[") || !strings.HasSuffix(v, "]") {
		return nil, fmt.Errorf("want an array of strings such as [\"39\", \"208\"], got %s", v)
	}
	var out []string
	for _, item := range strings.Split(v[1:len(v)-1], ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		s, err := parseString(item)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
