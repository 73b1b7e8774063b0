// Package nodelist reads and validates the CSV node list (nodes.csv) that
// describes every node that may join the ring.
//
// The first non-empty, non-comment line is a header naming the columns; the
// columns may appear in any order. Both the project's header
//
//	id,host,coordination_port,client_port
//
// and the reference implementation's header
//
//	nodeId, hostaddress, coordinationPort, clientport
//
// are accepted, as are a few common aliases (node_id, address, coord_port,
// ...). Header names are case-insensitive; every field is trimmed of
// surrounding spaces. Blank lines and lines starting with '#' are skipped.
package nodelist

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrInvalid is wrapped by every error that reports an invalid node list
// (as opposed to an I/O error), so callers can test with errors.Is.
var ErrInvalid = errors.New("nodelist: invalid node list")

// Entry is one row of the node list.
type Entry struct {
	ID         int64
	Host       string
	CoordPort  int
	ClientPort int
}

// CoordAddr returns the host:port address of the node's coordination
// listener; IPv6 hosts are bracketed.
func (n Entry) CoordAddr() string {
	return net.JoinHostPort(n.Host, strconv.Itoa(n.CoordPort))
}

// ClientAddr returns the host:port address of the node's client listener;
// IPv6 hosts are bracketed.
func (n Entry) ClientAddr() string {
	return net.JoinHostPort(n.Host, strconv.Itoa(n.ClientPort))
}

// Error is the error returned for an invalid node list. It names the file
// and, when known, the line of the problem, and it wraps ErrInvalid.
type Error struct {
	File   string // name passed to Parse (the path for Load)
	Line   int    // 1-based line number, 0 when not tied to a line
	Reason string // what is wrong, e.g. "duplicate id 3 (first on line 2)"
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// Column identifiers, in canonical order.
const (
	colID = iota
	colHost
	colCoordPort
	colClientPort
	numCols
)

// canonical column names, used in error messages.
var colNames = [numCols]string{"id", "host", "coordination_port", "client_port"}

// headerAliases maps a normalised header name (lower case, without '_', '-'
// and spaces) to its column.
var headerAliases = map[string]int{
	"id":               colID,
	"nodeid":           colID,
	"node":             colID,
	"host":             colHost,
	"hostaddress":      colHost,
	"hostname":         colHost,
	"address":          colHost,
	"addr":             colHost,
	"ip":               colHost,
	"coordinationport": colCoordPort,
	"coordport":        colCoordPort,
	"clientport":       colClientPort,
}

func normaliseHeader(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', ' ':
			return -1
		}
		return r
	}, s)
}

// Load reads and validates the node list at path.
func Load(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nodelist: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads and validates a node list from r. name is used in error
// messages (normally the file name). Nodes are returned in file order.
// Validation errors are of type *Error and wrap ErrInvalid.
func Parse(r io.Reader, name string) ([]Entry, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	cr.ReuseRecord = false

	p := &parser{name: name, idLine: map[int64]int{}, endpoints: map[string]endpoint{}}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, p.invalid(pe.Line, "%v", pe.Err)
			}
			return nil, fmt.Errorf("nodelist: reading %s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if err := p.record(line, rec); err != nil {
			return nil, err
		}
	}

	if p.cols == nil {
		return nil, p.invalid(0, "empty node list (no header)")
	}
	if len(p.nodes) == 0 {
		return nil, p.invalid(p.headerLine, "header but no nodes")
	}
	return p.nodes, nil
}

// parser is what Parse knows of a node list from the records read so far.
type parser struct {
	name       string // for error messages
	cols       []int  // column of each header field; nil until the header
	headerLine int
	nodes      []Entry
	idLine     map[int64]int       // the line of each id
	endpoints  map[string]endpoint // the first user of each host:port
}

// invalid returns the *Error for a problem on line (0: on no line).
func (p *parser) invalid(line int, format string, args ...any) error {
	return &Error{File: p.name, Line: line, Reason: fmt.Sprintf(format, args...)}
}

// record takes the CSV record on line: blank and comment lines are
// skipped, the first other line is the header and every later one a node.
func (p *parser) record(line int, rec []string) error {
	for i := range rec {
		rec[i] = strings.TrimSpace(rec[i])
	}
	if p.cols == nil && len(rec) > 0 {
		// A UTF-8 byte order mark may precede the header.
		rec[0] = strings.TrimSpace(strings.TrimPrefix(rec[0], "\uFEFF"))
	}
	if isBlank(rec) || strings.HasPrefix(rec[0], "#") {
		return nil
	}
	if p.cols == nil {
		cols, err := parseHeader(rec)
		if err != nil {
			return p.invalid(line, "%v", err)
		}
		p.cols, p.headerLine = cols, line
		return nil
	}
	n, err := p.row(line, rec)
	if err != nil {
		return err
	}
	if err := p.add(line, n); err != nil {
		return err
	}
	p.nodes = append(p.nodes, n)
	return nil
}

// row reads the node on line from its fields, in the header's order.
func (p *parser) row(line int, rec []string) (Entry, error) {
	if len(rec) > len(p.cols) {
		return Entry{}, p.invalid(line, "too many fields (%d, header has %d)", len(rec), len(p.cols))
	}
	if len(rec) < len(p.cols) {
		return Entry{}, p.invalid(line, "missing field %s", colNames[p.cols[len(rec)]])
	}
	var vals [numCols]string
	for i, c := range p.cols {
		vals[c] = rec[i]
	}
	n, reason := parseRow(vals)
	if reason != "" {
		return Entry{}, p.invalid(line, "%s", reason)
	}
	return n, nil
}

// add records node n of line, refusing an id used before, the same port
// for both listeners, and a host:port another listener uses.
func (p *parser) add(line int, n Entry) error {
	if first, dup := p.idLine[n.ID]; dup {
		return p.invalid(line, "duplicate id %d (first on line %d)", n.ID, first)
	}
	p.idLine[n.ID] = line
	if n.CoordPort == n.ClientPort {
		return p.invalid(line, "coordination_port and client_port are both %d", n.CoordPort)
	}
	for _, ep := range []endpoint{
		{port: n.CoordPort, col: colCoordPort},
		{port: n.ClientPort, col: colClientPort},
	} {
		key := net.JoinHostPort(strings.ToLower(n.Host), strconv.Itoa(ep.port))
		if prev, dup := p.endpoints[key]; dup {
			return p.invalid(line, "%s %s already used as %s of node %d (line %d)",
				colNames[ep.col], net.JoinHostPort(n.Host, strconv.Itoa(ep.port)),
				colNames[prev.col], prev.id, prev.line)
		}
		ep.id, ep.line = n.ID, line
		p.endpoints[key] = ep
	}
	return nil
}

// endpoint records who first used a host:port pair.
type endpoint struct {
	port int
	col  int
	id   int64
	line int
}

func isBlank(rec []string) bool {
	for _, f := range rec {
		if f != "" {
			return false
		}
	}
	return true
}

// parseHeader maps each header field to its column. Every column must appear
// exactly once.
func parseHeader(rec []string) ([]int, error) {
	cols := make([]int, len(rec))
	seen := [numCols]bool{}
	for i, f := range rec {
		c, ok := headerAliases[normaliseHeader(f)]
		if !ok {
			return nil, fmt.Errorf("unknown column %q in header (want %s)", f, strings.Join(colNames[:], ","))
		}
		if seen[c] {
			return nil, fmt.Errorf("duplicate column %q in header (%s)", f, colNames[c])
		}
		seen[c] = true
		cols[i] = c
	}
	for c, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("header is missing column %s", colNames[c])
		}
	}
	return cols, nil
}

// parseRow validates the trimmed field values of one row. It returns the
// node, or a non-empty reason.
func parseRow(vals [numCols]string) (Entry, string) {
	var n Entry

	id, ok := parseDigits(vals[colID])
	if !ok || id < 1 {
		return n, fmt.Sprintf("id %q is not a positive integer", vals[colID])
	}
	n.ID = id

	host := vals[colHost]
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1] // accept a bracketed IPv6 literal
	}
	if host == "" {
		return n, "empty host"
	}
	if reason := checkHost(host); reason != "" {
		return n, fmt.Sprintf("host %q %s", vals[colHost], reason)
	}
	n.Host = host

	for _, c := range []int{colCoordPort, colClientPort} {
		s := vals[c]
		if s == "" {
			return n, fmt.Sprintf("empty %s", colNames[c])
		}
		p, ok := parseDigits(s)
		if !ok {
			if allDigits(s) {
				return n, fmt.Sprintf("%s %s out of range 1-65535", colNames[c], s)
			}
			return n, fmt.Sprintf("%s %q is not an integer", colNames[c], s)
		}
		if p < 1 || p > 65535 {
			return n, fmt.Sprintf("%s %d out of range 1-65535", colNames[c], p)
		}
		if c == colCoordPort {
			n.CoordPort = int(p)
		} else {
			n.ClientPort = int(p)
		}
	}
	return n, ""
}

// parseDigits parses a string of ASCII digits (no sign) as an int64.
func parseDigits(s string) (int64, bool) {
	if !allDigits(s) {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// checkHost rejects host strings that cannot be a host name or IP literal
// (and that would be dangerous on an ssh command line). It returns a reason
// or "".
func checkHost(h string) string {
	if !utf8.ValidString(h) {
		return "is not valid UTF-8"
	}
	if strings.HasPrefix(h, "-") {
		return "must not start with '-'"
	}
	for _, r := range h {
		switch {
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return "contains white space or control characters"
		case strings.ContainsRune("[]/@,\"'\\", r):
			return fmt.Sprintf("contains %q", r)
		}
	}
	return ""
}
