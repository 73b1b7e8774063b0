package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// keyBytes is the length of a generated cluster key: 256 bits.
const keyBytes = 32

func newKeygenCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen FILE",
		Short: "Write a new random cluster key to FILE (mode 0600)",
		Long: `keygen writes a new random 256-bit cluster key, as hex, to FILE, readable by
its owner only (mode 0600). Copy the file to every node's host and start each
node with --cluster-key-file FILE: nodes sign their frames with it, and drop
frames that do not carry its signature. An existing FILE is left alone
unless --force is given.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{errors.New("keygen needs exactly one argument: the key file to write")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := writeKeyFile(args[0], force); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote a new cluster key to %s (mode 0600); copy it to every node's host and start each with --cluster-key-file\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists (nodes using the old key can no longer talk to those using the new one)")
	return cmd
}

// writeKeyFile writes a new key to path with mode 0600. Without force an
// existing file is an error; with it the file is replaced whole (a new
// file renamed over it), so it is never readable by others even for a
// moment.
func writeKeyFile(path string, force bool) error {
	key := make([]byte, keyBytes)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	text := []byte(hex.EncodeToString(key) + "\n")
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("keygen: %s exists; give --force to replace it (every node must then get the new key)", path)
		}
		if err != nil {
			return fmt.Errorf("keygen: %w", err)
		}
		if _, err := f.Write(text); err != nil {
			f.Close()
			return fmt.Errorf("keygen: %w", err)
		}
		return f.Close()
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("keygen: %s is not a regular file", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keygen-*") // mode 0600
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(text); err != nil {
		tmp.Close()
		return fmt.Errorf("keygen: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	return nil
}
