package wire_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringchat/ringchat/internal/wire"
)

func writeKey(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadKey(t *testing.T) {
	const hexKey = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF"
	want32 := []byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
		0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	tests := []struct {
		name      string
		file, env string // file is the content of a key file, if not empty
		want      []byte
	}{
		{"file hex", "  " + hexKey + "\n", "", want32},
		{"file hex 32 digits", hexKey[:32] + "\n", "", want32[:16]},
		{"file raw", "\tcorrect horse battery staple\r\n", "", []byte("correct horse battery staple")},
		{"file hex-looking but odd", hexKey[:33], "", []byte(hexKey[:33])},
		{"file short hex is raw", "0123456789abcdef", "", []byte("0123456789abcdef")},
		{"file wins over env", hexKey, "an environment key, ignored", want32},
		{"env hex", "", hexKey, want32},
		{"env raw", "", " sixteen bytes!!! ", []byte("sixteen bytes!!!")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.file != "" {
				file = writeKey(t, tc.file)
			}
			got, isDev, err := wire.LoadKey(file, tc.env)
			if err != nil {
				t.Fatalf("LoadKey: %v", err)
			}
			if isDev || !bytes.Equal(got, tc.want) {
				t.Errorf("LoadKey = %q, %v; want %q, false", got, isDev, tc.want)
			}
			if _, err := wire.NewCodec(got); err != nil {
				t.Errorf("NewCodec(loaded key): %v", err)
			}
		})
	}
}

func TestLoadKeyRefusesShortKeys(t *testing.T) {
	for _, secret := range []string{"", " \n", "hunter2", "fifteen bytes!!", "abcdef0123"} {
		p := writeKey(t, secret+"\n")
		_, _, err := wire.LoadKey(p, "")
		if !errors.Is(err, wire.ErrShortKey) {
			t.Errorf("LoadKey(file %q): %v, want ErrShortKey", secret, err)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "wire: ") || !strings.Contains(msg, p) {
			t.Errorf("error %q should start with \"wire: \" and name %s", msg, p)
		}
		if strings.TrimSpace(secret) != "" && strings.Contains(msg, secret) {
			t.Errorf("error %q shows the key", msg)
		}
		if secret == "" {
			continue
		}
		_, _, err = wire.LoadKey("", secret)
		if !errors.Is(err, wire.ErrShortKey) || strings.Contains(err.Error(), secret) {
			t.Errorf("LoadKey(env %q): %v; want ErrShortKey, without the key", secret, err)
		}
	}
}

func TestLoadKeyMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no-such.key")
	_, _, err := wire.LoadKey(p, "an environment key is not a fallback for a missing file")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), p) || !strings.HasPrefix(err.Error(), "wire: ") {
		t.Errorf("LoadKey(missing file): %v; want fs.ErrNotExist naming %s", err, p)
	}
}

func TestLoadKeyDevFallback(t *testing.T) {
	key, isDev, err := wire.LoadKey("", "")
	if err != nil || !isDev || string(key) != wire.DevKey {
		t.Fatalf("LoadKey(\"\", \"\") = %q, %v, %v; want DevKey, true, nil", key, isDev, err)
	}
	if _, err := wire.NewCodec(key); err != nil {
		t.Errorf("NewCodec(DevKey): %v", err)
	}
}
