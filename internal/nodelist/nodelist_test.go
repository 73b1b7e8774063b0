package nodelist

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func local(id int64, coord, client int) Entry {
	return Entry{ID: id, Host: "127.0.0.1", CoordPort: coord, ClientPort: client}
}

func TestParseAccepted(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Entry
	}{
		{
			name: "our header",
			in:   "id,host,coordination_port,client_port\n1,127.0.0.1,5001,8001\n2,127.0.0.1,5002,8002\n",
			want: []Entry{local(1, 5001, 8001), local(2, 5002, 8002)},
		},
		{
			name: "reference header with spaces",
			in:   "nodeId, hostaddress, coordinationPort, clientport\n1, 127.0.0.1, 5001, 8001\n2 , 127.0.0.1 ,5002 , 8002 \n",
			want: []Entry{local(1, 5001, 8001), local(2, 5002, 8002)},
		},
		{
			name: "header case-insensitive",
			in:   "ID,HOST,Coordination_Port,CLIENT_PORT\n7,127.0.0.1,5001,8001\n",
			want: []Entry{local(7, 5001, 8001)},
		},
		{
			name: "aliases",
			in:   "node_id,address,coord_port,client_port\n1,127.0.0.1,5001,8001\n",
			want: []Entry{local(1, 5001, 8001)},
		},
		{
			name: "more aliases",
			in:   "node-id,hostname,coord-port,clientPort\n1,127.0.0.1,5001,8001\n",
			want: []Entry{local(1, 5001, 8001)},
		},
		{
			name: "columns reordered",
			in:   "client_port,id,coordination_port,host\n8001,3,5001,10.0.0.3\n",
			want: []Entry{{ID: 3, Host: "10.0.0.3", CoordPort: 5001, ClientPort: 8001}},
		},
		{
			name: "comments blank lines CRLF no final newline",
			in:   "# ring for tests\r\n\r\n  \r\nid,host,coordination_port,client_port\r\n# first\r\n1,127.0.0.1,5001,8001\r\n\r\n   # indented comment\r\n2,127.0.0.1,5002,8002",
			want: []Entry{local(1, 5001, 8001), local(2, 5002, 8002)},
		},
		{
			name: "byte order mark",
			in:   "\uFEFFid,host,coordination_port,client_port\n1,127.0.0.1,5001,8001\n",
			want: []Entry{local(1, 5001, 8001)},
		},
		{
			name: "quoted fields",
			in:   "\"id\",\"host\",\"coordination_port\",\"client_port\"\n\"1\",\"127.0.0.1\",\"5001\",\"8001\"\n",
			want: []Entry{local(1, 5001, 8001)},
		},
		{
			name: "file order kept and ids need not be dense",
			in:   "id,host,coordination_port,client_port\n10,b.example,1,65535\n3,a.example,2,3\n",
			want: []Entry{
				{ID: 10, Host: "b.example", CoordPort: 1, ClientPort: 65535},
				{ID: 3, Host: "a.example", CoordPort: 2, ClientPort: 3},
			},
		},
		{
			name: "same ports on different hosts",
			in:   "id,host,coordination_port,client_port\n1,10.0.0.1,5000,8000\n2,10.0.0.2,5000,8000\n",
			want: []Entry{
				{ID: 1, Host: "10.0.0.1", CoordPort: 5000, ClientPort: 8000},
				{ID: 2, Host: "10.0.0.2", CoordPort: 5000, ClientPort: 8000},
			},
		},
		{
			name: "ipv6 plain and bracketed",
			in:   "id,host,coordination_port,client_port\n1,::1,5001,8001\n2,[fe80::1%eth0],5002,8002\n",
			want: []Entry{
				{ID: 1, Host: "::1", CoordPort: 5001, ClientPort: 8001},
				{ID: 2, Host: "fe80::1%eth0", CoordPort: 5002, ClientPort: 8002},
			},
		},
		{
			name: "leading zeros",
			in:   "id,host,coordination_port,client_port\n007,127.0.0.1,05001,8001\n",
			want: []Entry{local(7, 5001, 8001)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in), "nodes.csv")
			if err != nil {
				t.Fatalf("Parse: unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseRejected(t *testing.T) {
	const hdr = "id,host,coordination_port,client_port\n"
	tests := []struct {
		name string
		in   string
		line int    // 0: error not tied to a line
		want string // reason text that must appear
	}{
		{"empty file", "", 0, "empty node list (no header)"},
		{"only comments", "# nothing\n\n", 0, "empty node list (no header)"},
		{"header but no nodes", "\n" + hdr + "# none\n", 2, "header but no nodes"},
		{"unknown column", "id,host,coordination_port,client_port,weight\n", 1, `unknown column "weight" in header`},
		{"missing column", "id,host,coordination_port\n1,h,1,2\n", 1, "header is missing column client_port"},
		{"duplicate column", "id,node_id,host,coordination_port,client_port\n", 1, `duplicate column "node_id" in header (id)`},
		{"data line as header", "1,127.0.0.1,5001,8001\n", 1, `unknown column "1" in header`},
		{"duplicate id", hdr + "3,a,1,2\n1,b,1,2\n3,c,1,2\n", 4, "duplicate id 3 (first on line 2)"},
		{"duplicate id leading zero", hdr + "3,a,1,2\n03,b,1,2\n", 3, "duplicate id 3 (first on line 2)"},
		{"coord port too large", hdr + "1,a,1,2\n2,b,70000,2\n", 3, "coordination_port 70000 out of range 1-65535"},
		{"client port zero", hdr + "1,a,1,0\n", 2, "client_port 0 out of range 1-65535"},
		{"port overflows int64", hdr + "1,a,99999999999999999999,2\n", 2, "coordination_port 99999999999999999999 out of range 1-65535"},
		{"port not a number", hdr + "1,a,x1,2\n", 2, `coordination_port "x1" is not an integer`},
		{"negative port", hdr + "1,a,-5,2\n", 2, `coordination_port "-5" is not an integer`},
		{"empty port", hdr + "1,a,1,\n", 2, "empty client_port"},
		{"missing field", hdr + "1,a,1,2\n2,b,3,4\n3,c,5,6\n4,d,7\n", 5, "missing field client_port"},
		{"missing fields reordered header", "host,id,client_port,coordination_port\na\n", 2, "missing field id"},
		{"too many fields", hdr + "1,a,1,2,3\n", 2, "too many fields (5, header has 4)"},
		{"trailing comma", hdr + "1,a,1,2,\n", 2, "too many fields (5, header has 4)"},
		{"id not a number", hdr + "abc,a,1,2\n", 2, `id "abc" is not a positive integer`},
		{"id zero", hdr + "0,a,1,2\n", 2, `id "0" is not a positive integer`},
		{"id negative", hdr + "-1,a,1,2\n", 2, `id "-1" is not a positive integer`},
		{"id plus sign", hdr + "+1,a,1,2\n", 2, `id "+1" is not a positive integer`},
		{"id empty", hdr + ",a,1,2\n", 2, `id "" is not a positive integer`},
		{"id too large", hdr + "9223372036854775808,a,1,2\n", 2, `id "9223372036854775808" is not a positive integer`},
		{"empty host", hdr + "1,127.0.0.1,1,2\n2, ,3,4\n", 3, "empty host"},
		{"empty brackets", hdr + "1,[],1,2\n", 2, "empty host"},
		{"host with space", hdr + "1,a b,1,2\n", 2, `host "a b" contains white space`},
		{"host like an option", hdr + "1,-oProxyCommand=x,1,2\n", 2, `must not start with '-'`},
		{"host with at sign", hdr + "1,root@a,1,2\n", 2, `host "root@a" contains '@'`},
		{"same coord port same host", hdr + "1,127.0.0.1,5001,8001\n2,127.0.0.1,5001,8002\n", 3,
			"coordination_port 127.0.0.1:5001 already used as coordination_port of node 1 (line 2)"},
		{"same client port same host", hdr + "1,h,5001,8001\n2,H,5002,8001\n", 3,
			"client_port H:8001 already used as client_port of node 1 (line 2)"},
		{"client port equals other coord port", hdr + "1,h,5001,8001\n\n2,h,5002,5001\n", 4,
			"client_port h:5001 already used as coordination_port of node 1 (line 2)"},
		{"coord equals client on one node", hdr + "1,h,5001,5001\n", 2, "coordination_port and client_port are both 5001"},
		{"bad quoting", hdr + "1,\"a,1,2\n", 2, `extraneous or missing " in quoted-field`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, err := Parse(strings.NewReader(tt.in), "nodes.csv")
			if err == nil {
				t.Fatalf("Parse: got %+v, want error containing %q", nodes, tt.want)
			}
			if nodes != nil {
				t.Errorf("Parse returned nodes %+v together with error", nodes)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %q is not a *Error", err)
			}
			if pe.File != "nodes.csv" || pe.Line != tt.line {
				t.Errorf("error at %s:%d, want nodes.csv:%d (%v)", pe.File, pe.Line, tt.line, err)
			}
			prefix := "nodes.csv: "
			if tt.line > 0 {
				prefix = "nodes.csv:" + strconv.Itoa(tt.line) + ": "
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, prefix) {
				t.Errorf("error %q does not start with %q", msg, prefix)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q does not contain %q", msg, tt.want)
			}
		})
	}
}

func TestErrorMessageExamples(t *testing.T) {
	const hdr = "id,host,coordination_port,client_port\n"
	_, err := Parse(strings.NewReader(hdr+"3,a,1,2\n1,b,1,2\n3,c,1,2\n"), "nodes.csv")
	if got, want := err.Error(), "nodes.csv:4: duplicate id 3 (first on line 2)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAddr(t *testing.T) {
	n := Entry{ID: 1, Host: "127.0.0.1", CoordPort: 5001, ClientPort: 8001}
	if got := n.CoordAddr(); got != "127.0.0.1:5001" {
		t.Errorf("CoordAddr = %q", got)
	}
	if got := n.ClientAddr(); got != "127.0.0.1:8001" {
		t.Errorf("ClientAddr = %q", got)
	}
	n6 := Entry{ID: 2, Host: "::1", CoordPort: 5002, ClientPort: 8002}
	if got := n6.CoordAddr(); got != "[::1]:5002" {
		t.Errorf("CoordAddr = %q", got)
	}
	if got := n6.ClientAddr(); got != "[::1]:8002" {
		t.Errorf("ClientAddr = %q", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ring.csv")
	if err := os.WriteFile(path, []byte("nodeId, hostaddress, coordinationPort, clientport\n1, ::1, 5001, 8001\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Entry{{ID: 1, Host: "::1", CoordPort: 5001, ClientPort: 8001}}; !reflect.DeepEqual(nodes, want) {
		t.Errorf("Load = %+v, want %+v", nodes, want)
	}

	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("id,host,coordination_port,client_port\n1,h,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), bad+":2: missing field client_port") {
		t.Errorf("Load(bad) error = %v", err)
	}

	_, err = Load(filepath.Join(dir, "missing.csv"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want fs.ErrNotExist", err)
	}
	if errors.Is(err, ErrInvalid) {
		t.Errorf("Load(missing) error %v wraps ErrInvalid", err)
	}
}

func TestLoadTestdata(t *testing.T) {
	for _, name := range []string{"ours.csv", "reference.csv"} {
		t.Run(name, func(t *testing.T) {
			nodes, err := Load(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			want := []Entry{
				{ID: 1, Host: "10.0.0.1", CoordPort: 5001, ClientPort: 8001},
				{ID: 2, Host: "10.0.0.2", CoordPort: 5001, ClientPort: 8001},
				{ID: 3, Host: "10.0.0.3", CoordPort: 5001, ClientPort: 8001},
			}
			if !reflect.DeepEqual(nodes, want) {
				t.Errorf("Load = %+v, want %+v", nodes, want)
			}
		})
	}
}

// TestRepoNodeList checks the repository's own nodes.csv: a local 5-node ring.
func TestRepoNodeList(t *testing.T) {
	nodes, err := Load(filepath.Join("..", "..", "nodes.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 5 {
		t.Fatalf("got %d nodes, want 5: %+v", len(nodes), nodes)
	}
	for i, n := range nodes {
		want := Entry{ID: int64(i + 1), Host: "127.0.0.1", CoordPort: 5001 + i, ClientPort: 8001 + i}
		if n != want {
			t.Errorf("node %d = %+v, want %+v", i, n, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	const hdr = "id,host,coordination_port,client_port\n"
	seeds := []string{
		"",
		hdr,
		hdr + "1,127.0.0.1,5001,8001\n2,127.0.0.1,5002,8002\n",
		"nodeId, hostaddress, coordinationPort, clientport\n1, ::1, 5001, 8001\n",
		"# c\n\nclient_port,host,id,coord_port\r\n8001,[::1],1,5001\r\n",
		hdr + "1,h,5001,5001\n",
		hdr + "1,h,5001,8001\n1,g,5001,8001\n",
		hdr + "1,h,70000,8001\n",
		hdr + "1,\"h\nx\",1,2\n",
		hdr + "1,h,1\n",
		hdr + "1,h,1,2,3\n",
		"\uFEFF" + hdr + "0009,h,00001,2\n",
		"id,id\n",
		"\"\n",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		nodes, err := Parse(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			if nodes != nil {
				t.Fatalf("nodes %+v returned with error %v", nodes, err)
			}
			var pe *Error
			if errors.As(err, &pe) != errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v: *Error and ErrInvalid disagree", err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.csv:") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if len(nodes) == 0 {
			t.Fatal("accepted an empty node list")
		}
		ids := map[int64]bool{}
		addrs := map[string]bool{}
		for _, n := range nodes {
			if n.ID < 1 {
				t.Fatalf("id %d < 1", n.ID)
			}
			if ids[n.ID] {
				t.Fatalf("duplicate id %d accepted", n.ID)
			}
			ids[n.ID] = true
			if n.Host == "" {
				t.Fatal("empty host accepted")
			}
			for _, p := range []int{n.CoordPort, n.ClientPort} {
				if p < 1 || p > 65535 {
					t.Fatalf("port %d out of range accepted", p)
				}
			}
			for _, a := range []string{n.CoordAddr(), n.ClientAddr()} {
				h, p, err := net.SplitHostPort(a)
				if err != nil || h != n.Host {
					t.Fatalf("address %q does not round-trip (host %q, port %q, err %v)", a, h, p, err)
				}
				key := strings.ToLower(a)
				if addrs[key] {
					t.Fatalf("address %s used twice", a)
				}
				addrs[key] = true
			}
		}
	})
}
