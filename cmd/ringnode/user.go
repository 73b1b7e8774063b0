package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/chat"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
)

func newUserCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Administer chat accounts",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newPasswdCmd(g))
	return cmd
}

func newPasswdCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "passwd NAME",
		Short: "Set a user's password (creating the account if the name is new)",
		Long: `passwd sets the password of user NAME, replacing any it had; a name never used
becomes an account with that password. On a terminal it asks for the password
twice without echoing it; otherwise it reads the first line of standard input:

  printf '%s\n' "$PASSWORD" | ringnode user passwd alice

This is how a name first used without a password (protocol 1) gets one when its
owner cannot send SET_PASSWORD, and how accounts are made for --auth password.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if e := chat.CheckName("username", name); e != nil {
				return usageError{errors.New(e.Message)}
			}
			password, err := readNewPassword(cmd, name)
			if err != nil {
				return err
			}
			hash, err := chat.HashPassword(password)
			if err != nil {
				return usageError{err}
			}
			p, err := g.prepareStore(cmd, g.log)
			if err != nil {
				return err
			}
			defer p.st.Close()
			var created bool
			err = p.st.Update(cmd.Context(), func(tx store.Tx) error {
				var u store.User
				var err error
				if u, created, err = tx.CreateUser(name, hash); err != nil || created {
					return err
				}
				return tx.SetPassword(u.ID, hash)
			})
			if err != nil {
				return fmt.Errorf("set the password of %q: %w", name, err)
			}
			if created {
				fmt.Fprintf(cmd.OutOrStdout(), "created user %q with a password\n", name)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "password of %q set\n", name)
			}
			return nil
		},
	}
}

// readNewPassword asks for the password twice on a terminal, or reads the
// first line of standard input.
func readNewPassword(cmd *cobra.Command, name string) (string, error) {
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok && term.IsTerminal(f.Fd()) {
		ask := func(prompt string) (string, error) {
			fmt.Fprint(cmd.ErrOrStderr(), prompt)
			b, err := term.ReadPassword(f.Fd())
			fmt.Fprintln(cmd.ErrOrStderr())
			return string(b), err
		}
		first, err := ask(fmt.Sprintf("New password for %s: ", name))
		if err != nil {
			return "", err
		}
		again, err := ask("Again: ")
		if err != nil {
			return "", err
		}
		if first != again {
			return "", usageError{errors.New("the passwords differ; nothing changed")}
		}
		if first == "" {
			return "", usageError{errors.New("empty password; nothing changed")}
		}
		return first, nil
	}
	line, err := bufio.NewReaderSize(in, protocol.MaxPassword+2).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the password from standard input: %w", err)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", usageError{errors.New("no password on standard input (one line expected); nothing changed")}
	}
	return line, nil
}
