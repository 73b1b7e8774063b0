package tui

import (
	"fmt"
	"strings"
	"unicode"
)

// UIHelpText lists the commands only the full-screen client has.
const UIHelpText = `  /query USER        open a conversation with USER (as /to)
  /close             close the current tab (a group's: leave the group too)
  /part [GROUP]      leave GROUP (the current tab's) and close its tab
  /search [TEXT]     find TEXT in the current tab; Ctrl-R: the match before; /search: clear
`

// KeysText lists the keys of the full-screen client.
const KeysText = `  Tab, Shift+Tab     complete a command, user or #group (again: the next one)
  Ctrl-N, Ctrl-P     next, previous conversation; Alt+1..9 the Nth; Alt+A the next with unread
  PgUp, PgDn         scroll (PgUp at the top loads older messages); Esc back to the bottom
  Ctrl-R             find the input line's text in the tab; again: the match before; Esc ends
  Up, Down           recall typed lines; Ctrl-C, Ctrl-D (on an empty line) quit
`

// ActionPrefix starts the text of an action (/me waves travels as the
// text "/me waves"): every client shows it, and ringchat shows it as
// "* alice waves".
const ActionPrefix = "/me "

// actionOf returns the action of a message's text ("waves" of "/me waves").
func actionOf(text string) (string, bool) {
	return strings.CutPrefix(text, ActionPrefix)
}

// ParseUI reads an input line of the full-screen client: Parse's
// commands, and those of UIHelpText.
func ParseUI(line string) (Command, error) {
	trimmed := strings.TrimSpace(line)
	if !strings.HasPrefix(trimmed, "/") || strings.HasPrefix(trimmed, "//") {
		return Parse(line)
	}
	name, rest := cutWord(trimmed)
	switch strings.ToLower(name) {
	case "/close":
		if rest != "" {
			return Command{}, fmt.Errorf("usage: /close (closes the current tab)")
		}
		return Command{Act: ActClose}, nil
	case "/part":
		if strings.ContainsFunc(rest, unicode.IsSpace) {
			return Command{}, fmt.Errorf("usage: /part [GROUP]")
		}
		return Command{Act: ActLeave, Group: strings.TrimPrefix(rest, "#"), Close: true}, nil
	case "/search":
		return Command{Act: ActSearch, Text: rest}, nil
	}
	return Parse(line)
}
