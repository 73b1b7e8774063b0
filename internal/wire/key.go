package wire

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
)

// DevKey is the built-in development cluster key, used by LoadKey when no
// key is configured. It is public, so it is INSECURE: anyone can forge
// frames for a cluster that uses it. Log a warning when LoadKey returns it.
const DevKey = "ringchat-INSECURE-development-cluster-key-do-not-use"

// minHexKeyLen is the shortest key text taken as hex: 16 bytes.
const minHexKeyLen = 2 * MinKeyLen

// LoadKey returns the cluster key. If file is not empty, the key is the
// file's content; else if env (the value of an environment variable, which
// the caller reads) is not empty, it is env; else it is DevKey, and isDev is
// true so that the caller can warn that the cluster is insecure.
//
// The text is trimmed of surrounding white space. If what remains is valid
// hex of at least 32 digits (even length, digits of either case) it is
// decoded; otherwise its raw bytes are the key. A key shorter than MinKeyLen
// bytes is refused. Errors name the file but never show the key.
//
// LoadKey does not check the file's permissions; it should be readable only
// by the user that runs ringnode (mode 0600).
func LoadKey(file string, env string) (key []byte, isDev bool, err error) {
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, false, fmt.Errorf("wire: reading key file: %w", err)
		}
		k, err := parseKey(b, fmt.Sprintf("key file %q", file))
		return k, false, err
	case env != "":
		k, err := parseKey([]byte(env), "key from environment")
		return k, false, err
	default:
		return []byte(DevKey), true, nil
	}
}

// parseKey turns key text into a key; where says where the text came from,
// for errors.
func parseKey(text []byte, where string) ([]byte, error) {
	t := bytes.TrimSpace(text)
	if len(t) >= minHexKeyLen && len(t)%2 == 0 {
		if k, err := hex.DecodeString(string(t)); err == nil {
			return k, nil
		}
	}
	if len(t) < MinKeyLen {
		return nil, fmt.Errorf("%w: %s: %d bytes, need at least %d (or %d hex digits)",
			ErrShortKey, where, len(t), MinKeyLen, minHexKeyLen)
	}
	return bytes.Clone(t), nil
}
