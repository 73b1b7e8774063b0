package protocol

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// decls are the string constants this package declares, by kind.
type decls struct {
	types, codes, features []string
}

// declared reads the package's source for its constants of type Type and
// Code and its Feature constants, so that a constant added without a word
// in docs/PROTOCOL.md fails the tests below.
func declared(t *testing.T) decls {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var d decls
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				d.add(t, spec.(*ast.ValueSpec))
			}
		}
	}
	if len(d.types) == 0 || len(d.codes) == 0 || len(d.features) == 0 {
		t.Fatalf("found no constants: %+v", d)
	}
	return d
}

func (d *decls) add(t *testing.T, vs *ast.ValueSpec) {
	for i, name := range vs.Names {
		lit, ok := vs.Values[i].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			continue
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		typ, _ := vs.Type.(*ast.Ident)
		switch {
		case typ != nil && typ.Name == "Type":
			d.types = append(d.types, v)
		case typ != nil && typ.Name == "Code":
			d.codes = append(d.codes, v)
		case strings.HasPrefix(name.Name, "Feature"):
			d.features = append(d.features, v)
		}
	}
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDocNamesEveryDeclaration: every message type has an example in
// docs/PROTOCOL.md, and every code and feature is named there.
func TestDocNamesEveryDeclaration(t *testing.T) {
	d, doc := declared(t), readDoc(t)
	for _, typ := range d.types {
		if !strings.Contains(doc, `"messageType":"`+typ+`"`) {
			t.Errorf("type %s has no example in docs/PROTOCOL.md", typ)
		}
	}
	for _, code := range d.codes {
		if !strings.Contains(doc, "`"+code+"`") {
			t.Errorf("code %s is not in docs/PROTOCOL.md (as `%s`)", code, code)
		}
	}
	for _, f := range d.features {
		if !strings.Contains(doc, "| `"+f+"` |") {
			t.Errorf("feature %s is not in docs/PROTOCOL.md's table of features", f)
		}
	}
}

// TestDocDeclaresNothingMore: the types in docs/PROTOCOL.md's headings of
// protocols 1 and 2, and the codes and features in its tables, are all
// declared here.
func TestDocDeclaresNothingMore(t *testing.T) {
	d, doc := declared(t), readDoc(t)
	clientDoc, _, _ := strings.Cut(doc, "\n## Node-to-node frames")
	upper := regexp.MustCompile(`\b[A-Z][A-Z_]*[A-Z]\b`)
	for _, h := range regexp.MustCompile(`(?m)^### (.*)$`).FindAllStringSubmatch(clientDoc, -1) {
		for _, w := range upper.FindAllString(h[1], -1) {
			if !slices.Contains(d.types, w) {
				t.Errorf("heading %q names %s, not a declared Type", h[1], w)
			}
		}
	}
	codes, features := tableNames(clientDoc, "code"), tableNames(clientDoc, "feature")
	if len(codes) == 0 || len(features) == 0 {
		t.Fatalf("found no table of codes or of features in docs/PROTOCOL.md")
	}
	for _, n := range codes {
		if !slices.Contains(d.codes, n) {
			t.Errorf("docs/PROTOCOL.md's table of codes names %s, not a declared Code", n)
		}
	}
	for _, n := range features {
		if !slices.Contains(d.features, n) {
			t.Errorf("docs/PROTOCOL.md's table of features names %s, not a declared feature", n)
		}
	}
}

// tableNames lists the names (`NAME`) in the first column of the tables
// of doc whose first column is headed head.
func tableNames(doc, head string) []string {
	var names []string
	in := false
	name := regexp.MustCompile("`([^`]*)`")
	for line := range strings.Lines(doc) {
		cells := strings.Split(line, "|")
		switch {
		case !strings.HasPrefix(line, "|") || len(cells) < 3:
			in = false
		case strings.TrimSpace(cells[1]) == head:
			in = true
		case in:
			for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
				names = append(names, m[1])
			}
		}
	}
	return names
}

// TestDocNamesEveryField: every JSON field of the shapes declared here is
// in docs/PROTOCOL.md, in an example ("name":) or named ("name" or
// `name`).
func TestDocNamesEveryField(t *testing.T) {
	doc := readDoc(t)
	shapes := []any{
		LoginV1{}, GroupV1{}, ChatV1{}, ErrorV1{}, AliveV1{},
		LoginV2{}, GroupV2{}, AccountV2{}, InviteV2{}, ChatV2{}, ErrorV2{}, StoredV2{},
		WhoV2{}, GroupsV2{}, HistoryV2{}, AwayV2{}, WhoisV2{}, NamesV2{},
		UserNoticeV2{}, NodeNoticeV2{}, AliveV2{},
		NodeAddr{}, OnlineUser{}, GroupInfo{}, Member{},
		LoginRequest{}, AccountRequest{}, ChatRequest{}, AckRequest{}, AckUpToRequest{}, QueryRequest{},
		StatusRequest{}, NoticeRequest{}, FromClient{}, FromNode{},
	}
	for _, s := range shapes {
		rt := reflect.TypeOf(s)
		for i := range rt.NumField() {
			f, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if !strings.Contains(doc, `"`+f+`"`) && !strings.Contains(doc, "`"+f+"`") {
				t.Errorf("%s's field %q is not in docs/PROTOCOL.md", rt.Name(), f)
			}
		}
	}
}

// TestProtocol1Bytes: the protocol-1 shapes encode as the original client
// writes and reads them, field for field (DESIGN.md, "Chat").
func TestProtocol1Bytes(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{LoginV1{TypeLogin, "alice"}, `{"messageType":"LOGIN","username":"alice"}`},
		{GroupV1{TypeJoinGroup, "g1"}, `{"messageType":"JOIN_GROUP","group":"g1"}`},
		{ChatV1{MessageType: TypeChatMessage, FromName: "alice", ToUsername: "bob", MessageContent: "hi <3", SentAt: "Nov 21, 2026, 1:43:15 PM"},
			`{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"bob","messageContent":"hi \u003c3","sentAt":"Nov 21, 2026, 1:43:15 PM"}`},
		{ChatV1{MessageType: TypeChatMessage, FromName: "alice", ToGroup: "g1", MessageContent: "hi", SentAt: "Nov 21, 2026, 1:43:15 PM"},
			`{"messageType":"CHAT_MESSAGE","fromName":"alice","toGroup":"g1","messageContent":"hi","sentAt":"Nov 21, 2026, 1:43:15 PM"}`},
		{ErrorV1{TypeError, "no"}, `{"messageType":"ERROR","errorMessage":"no"}`},
		{AliveV1{TypeAlive}, `{"messageType":"ALIVE"}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("%T encodes as %s (%v), want %s", c.v, b, err, c.want)
		}
	}
}
